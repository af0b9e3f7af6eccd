package apitype

import (
	"encoding/json"
	"time"
)

// JobSpec is the body of POST /v1/jobs (and an entry of POST /v1/jobs/batch).
type JobSpec struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`

	// Exactly one of Command, Shell and Handler.
	Command []string `json:"command,omitempty"`
	Shell   string   `json:"shell,omitempty"`
	Handler string   `json:"handler,omitempty"`

	Args json.RawMessage   `json:"args,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	// SecretEnv are variables like Env whose values the server encrypts at rest and never
	// shows again: reads give SecretMask for each. In a PUT or PATCH (or an apply file),
	// SecretMask as a value keeps the job's stored value of that name.
	SecretEnv map[string]string `json:"secret_env,omitempty"`
	Dir       string            `json:"dir,omitempty"`

	Queue        string        `json:"queue,omitempty"`
	Priority     *int          `json:"priority,omitempty"`
	Requirements *Requirements `json:"requirements,omitempty"`
	Timeout      *Duration     `json:"timeout,omitempty"`
	Retry        *RetryPolicy  `json:"retry,omitempty"`
	Schedule     *Schedule     `json:"schedule,omitempty"`
	RunAt        *time.Time    `json:"run_at,omitempty"`
	Delay        *Duration     `json:"delay,omitempty"`
	Concurrency  *Concurrency  `json:"concurrency,omitempty"`
	DependsOn    []Dependency  `json:"depends_on,omitempty"`

	IdempotencyKey string   `json:"idempotency_key,omitempty"`
	Enabled        *bool    `json:"enabled,omitempty"`
	Tags           []string `json:"tags,omitempty"`
	// Alerts tunes the alert rules for this job (absent: the server's defaults).
	Alerts *JobAlerts `json:"alerts,omitempty"`
}

// JobAlerts are a job's own thresholds of the alert rules; an absent or zero field keeps
// the server's default.
type JobAlerts struct {
	// Off: no alert about this job or its runs.
	Off bool `json:"off,omitempty"`
	// ConsecutiveFailures is how many runs in a row must fail to fire job_failing (1-100).
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`
	// LateAfter is how long a cron instant may go unstarted before cron_late.
	LateAfter *Duration `json:"late_after,omitempty"`
	// MaxDuration is how long a run may run before run_too_long (at least 1m).
	MaxDuration *Duration `json:"max_duration,omitempty"`
}

// Requirements are what one attempt needs from a worker.
type Requirements struct {
	CPU      float64           `json:"cpu,omitempty"`
	MemoryMB int64             `json:"memory_mb,omitempty"`
	GPU      int               `json:"gpu,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
}

// RetryPolicy says how often and how soon a failed attempt is tried again.
type RetryPolicy struct {
	MaxAttempts    int       `json:"max_attempts,omitempty"`
	InitialDelay   *Duration `json:"initial_delay,omitempty"`
	MaxDelay       *Duration `json:"max_delay,omitempty"`
	Multiplier     float64   `json:"multiplier,omitempty"`
	Jitter         *float64  `json:"jitter,omitempty"`
	FinalExitCodes []int     `json:"final_exit_codes,omitempty"`
	RetryExitCodes []int     `json:"retry_exit_codes,omitempty"`
	// MaxDisruptions caps the attempts lost to infrastructure (the lease expired: the worker
	// or server died; the worker restarted or shut down) that are retried at once without
	// counting against MaxAttempts. Unset means 3; 0 counts every lost attempt.
	MaxDisruptions *int `json:"max_disruptions,omitempty"`
}

// Schedule is a cron schedule in an IANA time zone.
type Schedule struct {
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
	// Misfire is what happens to instants missed while no server was up: skip, run_once
	// (the default) or run_all (up to MisfireLimit runs, default 100).
	Misfire      string `json:"misfire,omitempty"`
	MisfireLimit int    `json:"misfire_limit,omitempty"`
	// Paused stops the schedule firing; manual triggers still work.
	Paused bool `json:"paused,omitempty"`
}

// Concurrency limits the active runs of a job.
type Concurrency struct {
	Policy string     `json:"policy,omitempty"`
	Max    int        `json:"max,omitempty"`
	Key    string     `json:"key,omitempty"`
	Rate   *RateLimit `json:"rate,omitempty"`
}

// RateLimit allows at most Rate runs to be admitted in any window of length Per.
type RateLimit struct {
	Rate int      `json:"rate"`
	Per  Duration `json:"per"`
}

// Dependency is an edge to an upstream run: the run named by Run (an existing run's id) or,
// in an entry of POST /v1/dags only, by Ref (the name of another entry of the request); give
// exactly one of them. Condition is what the upstream run must do: "succeeded" (the
// default), "failed" or "finished" (any final state).
type Dependency struct {
	Run       string `json:"run,omitempty"`
	Ref       string `json:"ref,omitempty"`
	Condition string `json:"condition,omitempty"`
}

// Job is a job definition as the API returns it.
type Job struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`

	Command []string          `json:"command,omitempty"`
	Shell   string            `json:"shell,omitempty"`
	Handler string            `json:"handler,omitempty"`
	Args    json.RawMessage   `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// SecretEnv names the job's secret variables, each with the value SecretMask.
	SecretEnv map[string]string `json:"secret_env,omitempty"`
	Dir       string            `json:"dir,omitempty"`

	Queue        string       `json:"queue"`
	Priority     int          `json:"priority"`
	Requirements Requirements `json:"requirements"`
	Timeout      *Duration    `json:"timeout,omitempty"`
	Retry        RetryPolicy  `json:"retry"`
	Schedule     *Schedule    `json:"schedule,omitempty"`
	Concurrency  Concurrency  `json:"concurrency"`
	Tags         []string     `json:"tags,omitempty"`
	Enabled      bool         `json:"enabled"`
	Alerts       *JobAlerts   `json:"alerts,omitempty"`

	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	// NextFireTimes are the next instants the schedule fires, in UTC; NextFireTimesLocal are
	// the same instants in the schedule's time zone.
	NextFireTimes      []time.Time `json:"next_fire_times,omitempty"`
	NextFireTimesLocal []time.Time `json:"next_fire_times_local,omitempty"`
	LastRun            *Run        `json:"last_run,omitempty"`
	// DAG names the ad-hoc DAG the job was submitted with (POST /v1/dags), if any.
	DAG *DAGRef `json:"dag,omitempty"`
}

// JobPatch is the body of PATCH /v1/jobs/{id}: fields that are present replace the job's.
// Setting one of Command, Shell and Handler replaces what the job runs (the other two are
// cleared).
type JobPatch struct {
	Command     []string          `json:"command,omitempty"`
	Shell       *string           `json:"shell,omitempty"`
	Handler     *string           `json:"handler,omitempty"`
	Dir         *string           `json:"dir,omitempty"`
	Enabled     *bool             `json:"enabled,omitempty"`
	Priority    *int              `json:"priority,omitempty"`
	Queue       *string           `json:"queue,omitempty"`
	Timeout     *Duration         `json:"timeout,omitempty"`
	Retry       *RetryPolicy      `json:"retry,omitempty"`
	Schedule    *Schedule         `json:"schedule,omitempty"`
	Concurrency *Concurrency      `json:"concurrency,omitempty"`
	Tags        []string          `json:"tags,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	// SecretEnv replaces the job's secret variables; an entry whose value is SecretMask keeps
	// the stored value of its name.
	SecretEnv    map[string]string `json:"secret_env,omitempty"`
	Args         json.RawMessage   `json:"args,omitempty"`
	Requirements *Requirements     `json:"requirements,omitempty"`
	// Alerts replaces the job's alert thresholds ({} returns to the server's defaults).
	Alerts *JobAlerts `json:"alerts,omitempty"`
}

// SecretMask stands for a secret value: reads show it for each entry of secret_env, and a
// PUT or PATCH that gives it keeps the stored value.
const SecretMask = "***"

// CreateJobResponse answers POST /v1/jobs.
type CreateJobResponse struct {
	Job *Job `json:"job"`
	Run *Run `json:"run"`
	// Error is set only in an entry of a batch answer whose job could not be created when the
	// batch committed (its name was taken meanwhile, or its idempotency key belongs to a
	// different request); Job and Run are then null and the other entries were created.
	Error *Problem `json:"error,omitempty"`
}

// BatchCreateJobsRequest is the body of POST /v1/jobs/batch: many jobs in one transaction.
type BatchCreateJobsRequest struct {
	Jobs []JobSpec `json:"jobs"`
}

// BatchCreateJobsResponse answers POST /v1/jobs/batch, one entry per job in request order.
type BatchCreateJobsResponse struct {
	Items []CreateJobResponse `json:"items"`
}

// BatchCreateJobsMinimalResponse answers POST /v1/jobs/batch sent with the header
// "Prefer: return=minimal": the ids of what each entry created instead of the objects.
type BatchCreateJobsMinimalResponse struct {
	Items []CreatedIDs `json:"items"`
}

// CreatedIDs is an entry of a minimal batch answer: the ids of the job and its first run,
// or the entry's error.
type CreatedIDs struct {
	JobID    string   `json:"job_id,omitempty"`
	RunID    string   `json:"run_id,omitempty"`
	Existing bool     `json:"existing,omitempty"`
	Error    *Problem `json:"error,omitempty"`
}

// JobStreamMediaType is the content type of POST /v1/jobs/stream, its body and its answer:
// newline-delimited JSON, one value per line.
const JobStreamMediaType = "application/x-ndjson"

// JobStreamLine is one line of the answer of POST /v1/jobs/stream (whose body holds one
// JobSpec per line): the result of input line Line, with the ids of what it created (or
// found by its idempotency key: Existing) or its Error; or, as the answer's last line, the
// Summary alone. Under "Prefer: return=minimal" the answer has only the lines of rejected
// input and the summary.
type JobStreamLine struct {
	// Line is the number of the input line (1 for the first, blank lines counted); 0 on the
	// summary line.
	Line int `json:"line,omitempty"`
	CreatedIDs
	Summary *JobStreamSummary `json:"summary,omitempty"`
}

// JobStreamSummary ends the answer of POST /v1/jobs/stream.
type JobStreamSummary struct {
	// Accepted counts the lines whose job is committed (Existing of them were found by their
	// idempotency key), Rejected those that created nothing, each answered with its error.
	Accepted int `json:"accepted"`
	Existing int `json:"existing"`
	Rejected int `json:"rejected"`
	// LastLine is the number of the last input line answered.
	LastLine int `json:"last_line"`
	// Complete: the body was read to its end and every line of it answered. When false,
	// Error says why the stream stopped after LastLine; the lines after it were not
	// committed by this request.
	Complete bool     `json:"complete"`
	Error    *Problem `json:"error,omitempty"`
}

// TriggerRequest is the optional body of POST /v1/jobs/{id}/trigger.
type TriggerRequest struct {
	Args           json.RawMessage `json:"args,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// WebhookSecret is the answer of POST /v1/jobs/{id}/webhook: the job's new webhook secret,
// shown this once. A call to Path must carry, in the header named Header, "sha256=" and the
// hex HMAC-SHA256 of the request body keyed with Secret.
type WebhookSecret struct {
	JobID      string `json:"job_id,omitempty"`
	PipelineID string `json:"pipeline_id,omitempty"` // a pipeline's secret (JobID empty)
	Secret     string `json:"secret"`
	Path       string `json:"path"`
	Header     string `json:"header"`
}

// BackfillRequest is the body of POST /v1/jobs/{id}/backfill: the cron instants in
// [From, To] that have no run yet get one, up to now (later instants are left to the
// schedule). DryRun lists them without creating anything.
type BackfillRequest struct {
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	DryRun bool      `json:"dry_run,omitempty"`
}

// BackfillInstant is one cron instant of a backfill.
type BackfillInstant struct {
	At      time.Time `json:"at"`
	AtLocal time.Time `json:"at_local"`
	// Existed: the instant had a run before this call. RunID names the run this call created
	// for it.
	Existed bool   `json:"existed"`
	RunID   string `json:"run_id,omitempty"`
}

// BackfillResponse answers a backfill: every instant of the range, and how many runs the
// call created.
type BackfillResponse struct {
	DryRun   bool              `json:"dry_run"`
	Instants []BackfillInstant `json:"instants"`
	Created  int               `json:"created"`
}

// ApplyResponse answers PUT /v1/jobs/{name}: Action is created, updated or unchanged,
// Changes names the fields that differed (updated), DryRun says nothing was written.
type ApplyResponse struct {
	Action  string   `json:"action"`
	Changes []string `json:"changes,omitempty"`
	DryRun  bool     `json:"dry_run,omitempty"`
	Job     *Job     `json:"job"`
}

// RunResponse wraps one run.
type RunResponse struct {
	Run *Run `json:"run"`
}

// CancelResponse answers POST /v1/jobs/{id}/cancel: the runs that were cancelled (running ones
// are stopping: cancel_requested).
type CancelResponse struct {
	Items []*Run `json:"items"`
}

// JobList is a page of jobs.
type JobList struct {
	Items      []*Job `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}
