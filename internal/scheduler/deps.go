package scheduler

import (
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// ConditionsAt splits the conditions into those a run in final state s meets and those it
// breaks: the dependants waiting on it through a met edge count it down, those waiting
// through a broken one are skipped.
func ConditionsAt(s model.RunStatus) (met, broken []model.Condition) {
	for _, c := range []model.Condition{model.CondSucceeded, model.CondFailed, model.CondFinished} {
		if c.Met(s) {
			met = append(met, c)
		} else {
			broken = append(broken, c)
		}
	}
	return met, broken
}

// BrokenReason is the Error of a run skipped because upstream ended in state s, which does
// not meet condition c (waiting -> skipped).
func BrokenReason(upstream string, s model.RunStatus, c model.Condition) string {
	return fmt.Sprintf("skipped: upstream run %s ended %s, needed %s", upstream, s, c)
}

// BrokenReasons are the Errors of the dependants of upstream, which ended in state s,
// skipped through edges of each of the conditions broken (as ConditionsAt gives them), in
// that order.
func BrokenReasons(upstream string, s model.RunStatus, broken []model.Condition) []string {
	out := make([]string, len(broken))
	for i, c := range broken {
		out[i] = BrokenReason(upstream, s, c)
	}
	return out
}

// WaitingReason is the PendingReason of a run waiting on unmet dependencies
// (PendingCode waiting_on_dependencies). The stores keep the count (deps_pending) and
// derive the words from it when they read the run.
func WaitingReason(unmet int) string {
	if unmet == 1 {
		return "waiting for 1 upstream run"
	}
	return fmt.Sprintf("waiting for %d upstream runs", unmet)
}

// PrepareDependencies sets the state a new run with dependencies starts in, given the state
// of each upstream run (ups, by id): skipped when one dependency is already broken,
// waiting while some are unmet, and as the caller made it (queued or scheduled) when every
// one is met. It returns how many are unmet.
func PrepareDependencies(r *model.Run, ups map[string]model.RunStatus, now time.Time) int {
	unmet := 0
	for _, d := range r.DependsOn {
		s := ups[d.RunID]
		switch {
		case d.Condition.Broken(s):
			r.Status = model.RunSkipped
			r.PendingCode, r.PendingReason = model.PendingNone, ""
			r.FinishedAt = &now
			r.Error = BrokenReason(d.RunID, s, d.Condition)
			return 0
		case !d.Condition.Met(s):
			unmet++
		}
	}
	if unmet > 0 {
		r.Status = model.RunWaiting
		r.PendingCode = model.PendingDependencies
		r.PendingReason = WaitingReason(unmet)
	}
	return unmet
}

// Reopen sets the state a final run starts again in (final -> queued, scheduled, waiting or
// skipped; see Store.ReopenRuns), given its dependencies (r.DependsOn) and their upstream
// runs' states: it returns the unmet count.
func Reopen(r *model.Run, ups map[string]model.RunStatus, now time.Time) int {
	r.ScheduledFor, r.FinishedAt, r.Error, r.CancelRequested = now, nil, "", false
	Release(r, now)
	return PrepareDependencies(r, ups, now)
}
