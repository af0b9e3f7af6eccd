package store

import (
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// PromoteDueParams bound one promotion pass.
type PromoteDueParams struct {
	Now   time.Time
	Limit int
}

// LeaseRunsParams describe a worker's request for work.
type LeaseRunsParams struct {
	WorkerID string
	Max      int
	LeaseTTL time.Duration
	// Handlers, when not empty, restricts leasing to handler jobs of these kinds plus, if
	// Commands is true, command and shell jobs.
	Handlers []string
	Commands bool
	Now      time.Time
	// BestFitHold, when positive, leaves a constrained run that another live worker fits
	// better to that worker while the run has been due for less than this (see
	// placement.Pack). A worker is live when it is active and its last heartbeat is not
	// before LiveSince.
	BestFitHold time.Duration
	LiveSince   time.Time
}

// Leased is LeaseRuns' answer.
type Leased struct {
	Leases []*model.Lease
	// HeldUntil, when not zero, is when the earliest run left for a better-fitting worker
	// is offered to any worker it fits: a worker that got nothing should ask again then.
	HeldUntil time.Time
}

// Completion is the end of one attempt, as its worker reports it. What becomes of the run
// is scheduler.Decide's to say (succeeded wins over CancelRequested; cancelled or
// CancelRequested ends it cancelled; a lost attempt with disruptions left is queued at once
// and the run's Disruptions grows by one; a failure is retried, queued at once or scheduled
// with retry_backoff, while attempts remain and the exit code is not final, else the run
// ends failed); the store writes that outcome. A retried run keeps its Attempt count, and
// loses its lease fields (WorkerID, LeaseToken, LeaseExpiresAt), as does every run that
// leaves running. A status that is not a valid AttemptStatus is recorded as failed
// (scheduler.RecordedStatus).
type Completion struct {
	RunID    string
	Token    string
	Status   model.AttemptStatus
	ExitCode *int
	Error    string
}

// CompleteAttemptsParams are the arguments of CompleteAttempts.
type CompleteAttemptsParams struct {
	Completions []Completion
	Now         time.Time
	// Rand returns uniform numbers in [0, 1) that spread retry backoffs by their policy's
	// jitter; it is drawn once for each attempt whose outcome the retry rules decide (those
	// not succeeded or cancelled). nil means 0.5 (no spread).
	Rand func() float64
}

// CompletionResult is the outcome of one Completion.
type CompletionResult struct {
	Run *model.Run // the run after the change (see Ended); nil when Err is set
	Err error      // model.ErrLeaseLost when the token was stale
	// Admitted lists the runs this end changed in turn: held runs that took the concurrency
	// slot it freed, and dependants it released or skipped.
	Admitted []*model.Run
}

// Ended is what an end returns of a run (CompletionResult.Run, the runs of RescueExpired
// and of a worker's restart): the run as the end left it, without the parts that an end
// does not change and that no caller of one reads, which stay zero: Args,
// Requirements.Labels, IdempotencyKey, CreatedAt and the lease fields (an ended
// attempt's run is not running). Read the run for them. The PostgreSQL store returns only
// these columns (what the rest cost is in BENCHMARKS.md); the others clear the rest with
// Ended so that every store answers alike.
func Ended(r *model.Run) *model.Run {
	r.Args, r.Requirements.Labels, r.IdempotencyKey, r.CreatedAt = nil, nil, "", time.Time{}
	r.WorkerID, r.LeaseToken, r.LeaseExpiresAt = "", "", nil
	return r
}

// LeaseRef names a lease a worker holds.
type LeaseRef struct {
	RunID string
	Token string
}

// HeartbeatParams are the arguments of Heartbeat: the heartbeats of one or more workers,
// recorded together.
type HeartbeatParams struct {
	Beats    []Beat
	LeaseTTL time.Duration
	Now      time.Time
}

// Beat is one heartbeat of a worker: the leases it says it holds.
type Beat struct {
	WorkerID string
	// Session, when not empty, must be the worker's current session: a heartbeat of another
	// session is model.ErrNotFound (that process must register again).
	Session string
	Held    []LeaseRef
}

// HeartbeatResult tells a worker what to stop: the answer to one Beat.
type HeartbeatResult struct {
	Lost   []string // run ids whose lease is no longer the worker's: kill them
	Cancel []string // run ids asked to cancel: stop them and complete as cancelled
	// Ended lists held leases whose attempt's end this worker already reported and the
	// store recorded: nothing to kill, the worker only forgets the lease.
	Ended []string
	// Draining says the worker was asked to drain (its State is draining).
	Draining bool
	// Err is model.ErrNotFound when the worker is unknown or Session is not its session;
	// nothing of that beat was recorded. The other fields are then empty.
	Err error
}

// RescueExpiredParams bound one rescue pass.
type RescueExpiredParams struct {
	Now   time.Time
	Limit int
	// Rand: as CompleteAttemptsParams.Rand.
	Rand func() float64
}

// Uniform draws a number in [0, 1) from rand, the Rand of a params struct: 0.5 when rand
// is nil.
func Uniform(rand func() float64) float64 {
	if rand == nil {
		return 0.5
	}
	return rand()
}

// ReadLogsParams select log chunks.
type ReadLogsParams struct {
	RunID    string
	Attempt  int
	AfterSeq int64
	Limit    int
}

// AppendLogsParams are the arguments of AppendLogs.
type AppendLogsParams struct {
	Chunks []model.LogChunk
	// MaxAttemptBytes, when above 0, caps the output stored per attempt: a chunk that would
	// take its attempt's stored bytes past it is dropped, and so is every later chunk of that
	// attempt in the batch (they come in order). Only chunks that pass the lease check count;
	// a dropped chunk is not refused (see Store.AppendLogs). The cap holds for a worker that
	// sends its batches one after the other; concurrent batches of one attempt may each fit.
	MaxAttemptBytes int64
}

// GetQueueParams name the queue to read.
type GetQueueParams struct {
	Name string
}

// UpdateQueueParams change a queue; nil fields are left as they are.
type UpdateQueueParams struct {
	Name           string
	Priority       *int
	MaxConcurrency *int
	Paused         *bool
	// RateLimit sets the queue's rate limit; one with Rate 0 removes it.
	RateLimit *model.RateLimit
	// Alerts replaces the queue's alert thresholds; a zero QueueAlerts removes them.
	Alerts *model.QueueAlerts
	Now    time.Time
	// Committed, when set, is called once the change is committed, before the queue's
	// depth is counted for the answer (a count of its active runs: tens of milliseconds for
	// 100,000): the engine wakes workers there.
	Committed func()
}

// RegisterWorkerParams describe a worker at start, or one re-attaching.
type RegisterWorkerParams struct {
	ID string
	// Session is the new session's token, used unless the worker resumes its session.
	Session  string
	Labels   map[string]string
	Capacity model.Capacity
	Handlers []string
	Commands bool
	// Resume, when it is the worker's stored session, keeps that session: the worker
	// re-attaches (to this or another server) without having restarted, and no attempt of
	// it ends (see Store.RegisterWorker). Any other Resume is ignored.
	Resume string
	// LiveSince and Takeover guard a live session (scheduler.SessionHeld): when the worker
	// exists with another session that heartbeated at or after LiveSince, and Resume is not
	// that session, the registration is refused with model.ErrConflict and changes nothing,
	// unless Takeover says the caller proved it is that worker.
	LiveSince time.Time
	Takeover  bool
	Now       time.Time
	// Rand: as CompleteAttemptsParams.Rand, for the attempts a new session loses.
	Rand func() float64
}

// GetWorkerParams name the worker to read.
type GetWorkerParams struct {
	ID string
}

// SetWorkerStateParams set a worker's state.
type SetWorkerStateParams struct {
	ID    string
	State model.WorkerState
	// Session, when set, must be the worker's session: a worker that registered again
	// since is not changed (model.ErrNotFound).
	Session string
}
