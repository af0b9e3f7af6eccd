package scheduler

// The Errors of runs that end for a reason of the server's, not of their worker's: one
// place for the words, so that both stores and the engine say the same.
const (
	// LeaseExpired is the Error of an attempt (and its run) ended lost because its lease
	// ran out (running -> queued, scheduled or failed by the retry rules).
	LeaseExpired = "lease expired"
	// WorkerRestarted is the Error of an attempt ended lost because its worker registered
	// again with a new session.
	WorkerRestarted = "worker restarted (new session)"
	// LeaseUndelivered is the Error of an attempt ended lost because the lease poll that
	// took it was gone (its worker died or hung up) before the answer went out: nobody runs
	// it.
	LeaseUndelivered = "lease never delivered (the worker's poll was gone)"
	// JobDeleted is the Error of a run cancelled because its job was deleted.
	JobDeleted = "job deleted"
	// CancelledByRequest is the Error of a run cancelled through the API without a reason.
	CancelledByRequest = "cancelled by request"
)

// PipelineCancelled is the Error of the step runs of pipeline run id when it is cancelled.
func PipelineCancelled(id string) string { return "pipeline run " + id + " cancelled" }
