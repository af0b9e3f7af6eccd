package model

import (
	"encoding/json"
	"time"
)

// DefaultNamespace is the namespace of jobs that name none.
const DefaultNamespace = "default"

// DefaultQueue is the queue of jobs that name none.
const DefaultQueue = "default"

// Job is a definition: what to run, where, how to treat failure, and when.
type Job struct {
	ID        string
	Namespace string
	Name      string
	Spec      JobSpec
	Enabled   bool
	// NextFireAt is the next cron instant the job fires at (nil when it has no cron schedule
	// or is disabled).
	NextFireAt *time.Time
	// IdempotencyKey and RequestHash dedupe submissions: the same key with the same request
	// answers with the first result; with another request it is a conflict. A job without a
	// key has no hash (nothing would compare it).
	IdempotencyKey string
	RequestHash    string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// JobSpec is the part of a job that users write. The store keeps it as one JSON document, so
// the JSON tags here are a storage format: add fields freely, never rename one.
type JobSpec struct {
	// Exactly one of Command, Shell and Handler is set.
	Command []string `json:"command,omitempty"`
	Shell   string   `json:"shell,omitempty"`
	Handler string   `json:"handler,omitempty"`

	Args json.RawMessage   `json:"args,omitempty"` // a JSON object; commands get it as STINT_ARGS
	Env  map[string]string `json:"env,omitempty"`
	// SecretEnv are variables like Env whose values are sealed (internal/secret, bound to
	// "env:NAME"): the store never holds them in clear, reads show them masked, and only the
	// lease of an attempt carries them opened.
	SecretEnv map[string]string `json:"secret_env,omitempty"`
	Dir       string            `json:"dir,omitempty"`

	Queue        string        `json:"queue"`
	Priority     int           `json:"priority,omitzero"`
	Requirements Requirements  `json:"requirements,omitzero"`
	Timeout      time.Duration `json:"timeout,omitempty"`
	Retry        RetryPolicy   `json:"retry"`
	Schedule     *Schedule     `json:"schedule,omitempty"`
	Concurrency  Concurrency   `json:"concurrency,omitzero"`
	Tags         []string      `json:"tags,omitempty"`
	// DAG places the job in the ad-hoc DAG it was submitted with (POST /v1/dags); nil for
	// any other job. The API sets it, never the user.
	DAG *DAGMember `json:"dag,omitempty"`
	// Alerts tunes the alert rules for this job (nil: the server's defaults).
	Alerts *JobAlerts `json:"alerts,omitempty"`
}

// JobAlerts are a job's own thresholds of the alert rules (internal/alerting); a zero
// field keeps the server's default.
type JobAlerts struct {
	Off                 bool          `json:"off,omitempty"`                  // no alert about this job or its runs
	ConsecutiveFailures int           `json:"consecutive_failures,omitempty"` // failed runs in a row that fire job_failing
	LateAfter           time.Duration `json:"late_after,omitempty"`           // a cron instant not started this long after it fires cron_late
	MaxDuration         time.Duration `json:"max_duration,omitempty"`         // a run running longer fires run_too_long
}

// DAGMember is a job's place in an ad-hoc DAG. A DAG has no row of its own: its id is the
// run id of its first entry (by name), and that entry's job keeps the map of every entry to
// its run, so that the whole is read from any of its runs.
type DAGMember struct {
	ID    string `json:"id"`
	Entry string `json:"entry"`
	// Runs maps each entry's name to its run id; set on the first entry's job only.
	Runs map[string]string `json:"runs,omitempty"`
}

// Requirements are what one attempt of a job needs from a worker.
type Requirements struct {
	CPU      float64           `json:"cpu,omitempty"`
	MemoryMB int64             `json:"memory_mb,omitempty"`
	GPU      int               `json:"gpu,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
}

// RetryPolicy says how often and how soon a failed attempt is tried again.
type RetryPolicy struct {
	MaxAttempts  int           `json:"max_attempts"` // total attempts, first included; >= 1
	InitialDelay time.Duration `json:"initial_delay,omitempty"`
	MaxDelay     time.Duration `json:"max_delay,omitempty"`
	Multiplier   float64       `json:"multiplier,omitempty"`
	Jitter       float64       `json:"jitter,omitempty"` // fraction in [0, 1]: delay * (1 ± jitter)
	// FinalExitCodes end the run failed at once, attempts left or not. RetryExitCodes are
	// retried whatever else the policy says about the exit (attempts still count).
	FinalExitCodes []int `json:"final_exit_codes,omitempty"`
	RetryExitCodes []int `json:"retry_exit_codes,omitempty"`
	// MaxDisruptions caps the lost attempts (worker or server died) retried without
	// counting against MaxAttempts; nil means scheduler.DefaultMaxDisruptions, 0 counts
	// every lost attempt.
	MaxDisruptions *int `json:"max_disruptions,omitempty"`
}

// Schedule is a cron schedule in a time zone.
type Schedule struct {
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
	Misfire  string `json:"misfire,omitempty"` // skip | run_once | run_all
	// MisfireLimit caps the runs that run_all creates for one recovery (0: the default).
	MisfireLimit int `json:"misfire_limit,omitempty"`
	// Paused stops the schedule firing; the job still takes manual triggers.
	Paused bool `json:"paused,omitempty"`
}

// CronStats count what one server's cron loop did since it started.
type CronStats struct {
	Runs    uint64 // cron runs it created
	Missed  uint64 // instants it found missed (late past the misfire grace)
	Dropped uint64 // missed instants that got no run (misfire skip, run_once, run_all's cap)
}

// Misfire policies: what a schedule does with the instants it missed while no server was up.
const (
	MisfireSkip    = "skip"     // fire only from now on
	MisfireRunOnce = "run_once" // one run for everything missed (the default)
	MisfireRunAll  = "run_all"  // one run per missed instant, up to MisfireLimit
)

// Concurrency limits how many runs of a job (or of a key) are active at once, and how
// often they may start.
type Concurrency struct {
	Policy string     `json:"policy,omitempty"` // allow | forbid | queue | replace
	Max    int        `json:"max,omitempty"`
	Key    string     `json:"key,omitempty"`
	Rate   *RateLimit `json:"rate,omitempty"`
}

// RateLimit allows at most Rate admissions in any window of length Per.
type RateLimit struct {
	Rate int           `json:"rate"`
	Per  time.Duration `json:"per"`
}

// Dependency is an edge: this run waits for run RunID to reach Condition.
type Dependency struct {
	RunID     string    `json:"run"`
	Condition Condition `json:"condition"`
}

// Condition is what a dependency waits for its upstream run to do.
type Condition string

// Dependency conditions.
const (
	CondSucceeded Condition = "succeeded" // the upstream run succeeded
	CondFailed    Condition = "failed"    // the upstream run failed (for good)
	CondFinished  Condition = "finished"  // the upstream run reached any final state
)

// Valid reports whether c is a known condition.
func (c Condition) Valid() bool { return c == CondSucceeded || c == CondFailed || c == CondFinished }

// Met reports whether an upstream run in state s meets c; Broken whether it never can (s
// is final and does not meet it).
func (c Condition) Met(s RunStatus) bool {
	switch c {
	case CondSucceeded:
		return s == RunSucceeded
	case CondFailed:
		return s == RunFailed
	case CondFinished:
		return s.Final()
	}
	return false
}

// Broken reports whether an upstream run in state s can no longer meet c.
func (c Condition) Broken(s RunStatus) bool { return s.Final() && !c.Met(s) }
