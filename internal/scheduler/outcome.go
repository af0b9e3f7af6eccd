package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// DefaultMaxDisruptions is how many lost attempts of a run are retried without counting
// against its attempts when the job's policy does not say (MaxDisruptions nil).
const DefaultMaxDisruptions = 3

// MaxDisruptions is the disruption limit of policy p: its MaxDisruptions, or
// DefaultMaxDisruptions when it sets none.
func MaxDisruptions(p model.RetryPolicy) int {
	if p.MaxDisruptions == nil {
		return DefaultMaxDisruptions
	}
	return *p.MaxDisruptions
}

// Ending is the end of a run's running attempt: what the run was (its attempt count,
// budget, disruptions and cancel request), its job's retry policy, and how the attempt
// ended.
type Ending struct {
	Attempt     int // the attempt that ended, 1-based
	MaxAttempts int
	// Disruptions counts the run's earlier lost attempts that did not count against
	// MaxAttempts (model.Run.Disruptions before this end).
	Disruptions     int
	CancelRequested bool
	Policy          model.RetryPolicy
	Status          model.AttemptStatus
	ExitCode        *int
	Error           string
}

// Outcome is what a run becomes when its attempt ends (running -> succeeded, failed,
// cancelled, queued or scheduled). The store writes it as it is and clears the lease.
type Outcome struct {
	Status model.RunStatus
	// ScheduledFor is when a run retried after a backoff is due (Now plus the backoff);
	// zero otherwise, which keeps the time the run had: a run that ends, and a run queued
	// again at once, whose due time has passed already (it keeps its place in the lease
	// order). No outcome touches a cron run's Instant, the instant it was fired for, which
	// the store keeps unique per job (invariant 4): a retry moves its due time only.
	ScheduledFor  time.Time
	PendingCode   model.PendingCode
	PendingReason string
	// FinishedAt is Now when Status is final, else nil.
	FinishedAt *time.Time
	// Error is the attempt's error, whatever the outcome.
	Error string
	// Disrupted is set when the attempt was lost to infrastructure and retried without
	// counting against the run's attempts: the store adds one to the run's Disruptions.
	Disrupted bool
}

// RecordedStatus is the status an attempt is recorded with: what a worker cannot name is a
// failure.
func RecordedStatus(s model.AttemptStatus) model.AttemptStatus {
	if !s.Valid() {
		return model.AttemptFailed
	}
	return s
}

// NeedsRun reports whether the outcome of an attempt that ended with status s depends on
// the run and its job's retry policy. It does not for succeeded and cancelled: a store can
// end such attempts with Outcome of an Ending that carries only the status and error,
// without reading the run first.
func NeedsRun(s model.AttemptStatus) bool {
	s = RecordedStatus(s)
	return s != model.AttemptSucceeded && s != model.AttemptCancelled
}

// Decide applies the retry rules to an attempt's end, at now; u is a uniform number in
// [0, 1) that spreads the backoff by the policy's jitter (see Backoff).
//
//   - succeeded ends the run succeeded, even when a cancel was requested (the work
//     finished before the stop reached it);
//   - cancelled, or any other end of a run with CancelRequested, ends it cancelled;
//   - lost (the lease expired, the worker restarted or shut down: the attempt's end is
//     not the job's doing) while the run has disruptions left (Disruptions below
//     MaxDisruptions of the policy) is a disruption: the run is queued again at once (its
//     due time kept) and Disrupted, and the attempt does not count against MaxAttempts;
//   - otherwise (failed, timed_out, lost, or a status that is not valid) the run ends
//     failed when its attempts are spent (Attempt - Disruptions reached MaxAttempts) or the
//     exit code is final (in FinalExitCodes and not in RetryExitCodes), else it is
//     retried: queued at once when the backoff is zero (its due time kept), else
//     scheduled after it with PendingCode retry_backoff (RetryReason).
//
// A disruption is retried at once, not after a backoff: its loss was seen only once the
// lease ran out or the worker came back, which is delay enough, and the limit already
// bounds a loop of crashes; waiting longer would only add to every recovery.
func Decide(e Ending, now time.Time, u float64) Outcome {
	out := Outcome{Error: e.Error}
	status := RecordedStatus(e.Status)
	counted := e.Attempt - e.Disruptions // attempts that used the retry budget
	switch {
	case status == model.AttemptSucceeded:
		out.Status = model.RunSucceeded
	case status == model.AttemptCancelled || e.CancelRequested:
		out.Status = model.RunCancelled
	case status == model.AttemptLost && e.Disruptions < MaxDisruptions(e.Policy):
		out.Status = model.RunQueued
		out.Disrupted = true
	case counted >= e.MaxAttempts || FinalExit(e.Policy, e.ExitCode):
		out.Status = model.RunFailed
	default:
		out.Status = model.RunQueued
		if d := Backoff(e.Policy, counted, u); d > 0 {
			out.ScheduledFor = now.Add(d)
			out.Status = model.RunScheduled
			out.PendingCode = model.PendingRetryBackoff
			out.PendingReason = RetryReason(e.Attempt, status, out.ScheduledFor)
		}
	}
	if out.Status.Final() {
		out.FinishedAt = &now
	}
	return out
}

// FinalExit reports whether exit ends a run at once under policy, attempts left or not.
func FinalExit(policy model.RetryPolicy, exit *int) bool {
	return exit != nil && slices.Contains(policy.FinalExitCodes, *exit) && !slices.Contains(policy.RetryExitCodes, *exit)
}

// RetryReason is the PendingReason of a run whose attempt n ended with status s and whose
// next attempt is due at due (PendingCode retry_backoff), e.g. "attempt 2 timed out;
// attempt 3 due at 2026-01-02T03:04:05Z".
func RetryReason(n int, s model.AttemptStatus, due time.Time) string {
	return fmt.Sprintf("attempt %d %s; attempt %d due at %s", n, strings.ReplaceAll(string(s), "_", " "), n+1, stamp(due))
}
