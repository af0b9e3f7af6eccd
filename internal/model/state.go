package model

// RunStatus is the state of a run; see the package doc for the transitions.
type RunStatus string

// Run states (the status words of the API).
const (
	RunWaiting   RunStatus = "waiting"   // dependencies do not hold yet
	RunScheduled RunStatus = "scheduled" // not due yet (run_at, delay, retry backoff)
	RunQueued    RunStatus = "queued"    // due, waiting for a worker
	RunRunning   RunStatus = "running"   // an attempt holds a lease
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed" // attempts exhausted: dead until a manual retry
	RunCancelled RunStatus = "cancelled"
	RunSkipped   RunStatus = "skipped" // a dependency can no longer hold, or a policy skipped it
)

// RunStatuses lists every run state, in lifecycle order.
var RunStatuses = []RunStatus{RunWaiting, RunScheduled, RunQueued, RunRunning, RunSucceeded, RunFailed, RunCancelled, RunSkipped}

// Valid reports whether s is one of the run states.
func (s RunStatus) Valid() bool {
	for _, v := range RunStatuses {
		if s == v {
			return true
		}
	}
	return false
}

// Final reports whether s is a final state: a final run never changes again except by a
// manual retry.
func (s RunStatus) Final() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCancelled || s == RunSkipped
}

// Active reports whether a run in state s still needs work: not final.
func (s RunStatus) Active() bool { return s.Valid() && !s.Final() }

// AttemptStatus is the outcome of one attempt.
type AttemptStatus string

// Attempt outcomes.
const (
	AttemptRunning   AttemptStatus = "running"
	AttemptSucceeded AttemptStatus = "succeeded"
	AttemptFailed    AttemptStatus = "failed"    // non-zero exit, handler error, failed to start
	AttemptTimedOut  AttemptStatus = "timed_out" // the job's timeout expired
	AttemptLost      AttemptStatus = "lost"      // the worker stopped heartbeating or restarted
	AttemptCancelled AttemptStatus = "cancelled" // stopped on request
)

// Valid reports whether s is an attempt outcome a worker may report (running excluded).
func (s AttemptStatus) Valid() bool {
	switch s {
	case AttemptSucceeded, AttemptFailed, AttemptTimedOut, AttemptLost, AttemptCancelled:
		return true
	}
	return false
}

// Trigger says what created a run.
type Trigger string

// Triggers.
const (
	TriggerSubmit   Trigger = "submit"
	TriggerCron     Trigger = "cron"
	TriggerManual   Trigger = "manual"
	TriggerEvent    Trigger = "event"
	TriggerRetry    Trigger = "retry"
	TriggerPipeline Trigger = "pipeline"
)

// PendingCode is the machine-readable reason a run is not running yet.
type PendingCode string

// Pending reason codes (invariant 2: a run that is not final says why it waits).
const (
	PendingNone             PendingCode = ""
	PendingNotDue           PendingCode = "not_due"
	PendingRetryBackoff     PendingCode = "retry_backoff"
	PendingNoWorker         PendingCode = "no_worker_fits"
	PendingQueuePaused      PendingCode = "queue_paused"
	PendingConcurrencyLimit PendingCode = "concurrency_limit"
	PendingRateLimited      PendingCode = "rate_limited"
	PendingDependencies     PendingCode = "waiting_on_dependencies"
)

// WorkerState is a worker's lifecycle state.
type WorkerState string

// Worker states.
const (
	WorkerActive   WorkerState = "active"
	WorkerDraining WorkerState = "draining"
	WorkerLost     WorkerState = "lost"
	// WorkerDrained: the worker said it left (a clean exit, after a drain). It takes no
	// work, stays listed so, and is removed after retention.
	WorkerDrained WorkerState = "drained"
)
