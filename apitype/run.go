package apitype

import (
	"encoding/json"
	"time"
)

// Run is one request to execute a job.
type Run struct {
	ID            string          `json:"id"`
	JobID         string          `json:"job_id"`
	JobName       string          `json:"job_name"`
	Namespace     string          `json:"namespace"`
	Status        string          `json:"status"`
	PendingCode   string          `json:"pending_code,omitempty"`
	PendingReason string          `json:"pending_reason,omitempty"`
	Queue         string          `json:"queue"`
	Priority      int             `json:"priority"`
	Trigger       string          `json:"trigger"`
	Args          json.RawMessage `json:"args,omitempty"`
	// ScheduledFor is when the run is due; a retry after a backoff, or by hand, moves it.
	ScheduledFor time.Time `json:"scheduled_for"`
	// Instant is the cron instant a cron run was fired for (by the schedule or a backfill);
	// it never changes, whatever the retries. Absent for runs of other triggers.
	Instant     *time.Time `json:"instant,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	Attempt     int        `json:"attempt"`
	MaxAttempts int        `json:"max_attempts"`
	// Disruptions counts the attempts lost to infrastructure that were retried without
	// counting against MaxAttempts: the run may make MaxAttempts + Disruptions attempts.
	Disruptions     int    `json:"disruptions"`
	IdempotencyKey  string `json:"idempotency_key,omitempty"`
	CancelRequested bool   `json:"cancel_requested,omitempty"`
	Error           string `json:"error,omitempty"`
	WorkerID        string `json:"worker_id,omitempty"`
	// DependsOn are the runs this one waits for, each with its condition (Run and
	// Condition set); empty when it waits for none.
	DependsOn []Dependency `json:"depends_on,omitempty"`
	Attempts  []Attempt    `json:"attempts,omitempty"`
}

// Attempt is one execution of a run.
type Attempt struct {
	N          int        `json:"n"`
	WorkerID   string     `json:"worker_id"`
	Status     string     `json:"status"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// RunList is a page of runs.
type RunList struct {
	Items      []*Run `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}
