package model

import (
	"encoding/json"
	"time"
)

// Run is one request to execute a job. It holds one or more attempts.
type Run struct {
	ID            string
	JobID         string
	JobName       string
	Namespace     string
	Status        RunStatus
	PendingCode   PendingCode
	PendingReason string // human words for PendingCode; empty when running or final
	Queue         string
	Priority      int
	Trigger       Trigger
	Args          json.RawMessage
	// ScheduledFor is when the run is due: a retry after a backoff, and a manual retry,
	// move it.
	ScheduledFor time.Time
	// Instant is the cron instant the run was fired for (trigger cron, by a fire or a
	// backfill; see scheduler.NewCronRun), nil for every other run. It never changes: the
	// store keeps one cron run per (job, instant) and reads a job's fired instants from it,
	// whatever the retries did to ScheduledFor.
	Instant    *time.Time
	CreatedAt  time.Time
	StartedAt  *time.Time // first attempt's start
	FinishedAt *time.Time
	// Attempt counts attempts so far (the running one included).
	Attempt     int
	MaxAttempts int
	// Disruptions counts the attempts lost to infrastructure (lease expired, worker
	// restarted or shut down) that were retried without using up MaxAttempts: the run may
	// make MaxAttempts + Disruptions attempts (see scheduler.Decide).
	Disruptions int
	// IdempotencyKey dedupes triggers; empty when none was given.
	IdempotencyKey string
	// CancelRequested is set when a running run was asked to stop; the worker stops the
	// process and the run ends cancelled.
	CancelRequested bool
	// Error is the last attempt's error, kept on the run for lists.
	Error string
	// Concurrency is the limit the run counts against, from its job's concurrency policy;
	// nil when the job sets none. The store admits a new run under it when it is created
	// (see scheduler.Admit) and frees its slot when the run ends.
	Concurrency *RunConcurrency
	// Requirements are the job's, as they were when the run was created: what an attempt
	// books on its worker's capacity.
	Requirements Requirements
	// DependsOn are the runs this one waits for (status waiting, PendingCode
	// waiting_on_dependencies) before it may run; it is skipped when one can no longer
	// meet its condition. Given when the run is created; filled by GetRun.
	DependsOn []Dependency
	// HasDependants is set once another run depends on this one: its end resolves them.
	HasDependants bool

	// The current lease, while Status is running.
	WorkerID       string
	LeaseToken     string
	LeaseExpiresAt *time.Time

	// Attempts is filled by GetRun only: finished attempts from the attempt history plus the
	// running one.
	Attempts []Attempt
}

// RunConcurrency is a run's place under a concurrency limit: at most Max runs with the same
// Key hold a slot at once (a run holds one from its admission until it ends); Policy says
// what a new run does when none is free.
type RunConcurrency struct {
	Key    string
	Max    int // 0: no limit on active runs (a rate limit alone)
	Policy ConcurrencyPolicy
	// Rate, when set, also spaces the key's admissions: at most Rate.Rate in any window of
	// Rate.Per; a run over it waits (PendingCode rate_limited) until its turn.
	Rate *RateLimit
}

// ConcurrencyPolicy says what a new run does when its concurrency limit is reached.
type ConcurrencyPolicy string

// Concurrency policies.
const (
	ConcurrencyAllow   ConcurrencyPolicy = "allow"   // run side by side up to max, then wait
	ConcurrencyForbid  ConcurrencyPolicy = "forbid"  // the new run is skipped
	ConcurrencyQueue   ConcurrencyPolicy = "queue"   // the new run waits for a slot
	ConcurrencyReplace ConcurrencyPolicy = "replace" // the oldest active run is cancelled
)

// Attempt is one execution of a run on one worker.
type Attempt struct {
	RunID      string
	N          int // 1-based
	WorkerID   string
	Status     AttemptStatus
	ExitCode   *int
	Error      string
	StartedAt  time.Time
	FinishedAt *time.Time
}

// Lease is a run handed to a worker: the run, the job spec to execute, and the fencing token
// that every heartbeat and the completion must carry. The spec has no Args: the attempt's are
// its run's. The leases of one batch may share their specs' maps and slices: read them,
// never change them.
type Lease struct {
	Run       *Run
	Spec      JobSpec
	Token     string
	ExpiresAt time.Time
}

// LogStream names an output stream of an attempt.
type LogStream string

// Log streams.
const (
	Stdout LogStream = "stdout"
	Stderr LogStream = "stderr"
)

// LogChunk is a piece of an attempt's output, in the order the worker read it.
type LogChunk struct {
	RunID     string
	Attempt   int
	Seq       int64 // per attempt, increasing from 1
	Stream    LogStream
	Data      []byte
	CreatedAt time.Time
	// Token and WorkerID are the writer's proof, not stored: a chunk is appended only while
	// its attempt runs under the lease Token (and, when WorkerID is set, is leased to that
	// worker). Reads leave them empty.
	Token    string
	WorkerID string
}
