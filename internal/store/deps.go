package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// DepTx is what dependency resolution needs of a store's write transaction. Both stores
// implement it with set-based statements over run_deps (indexed by upstream run).
type DepTx interface {
	// MeetDependants counts one dependency as met for every waiting run that waits on run
	// upstream through an edge whose condition is in met, and returns those left with no
	// unmet dependency (still waiting) for Resolve to release.
	MeetDependants(upstream string, met []model.Condition) ([]*model.Run, error)
	// SkipDependants ends, skipped, every waiting run that waits on run u through an edge
	// whose condition is in broken, with Error BrokenReason and FinishedAt now.
	SkipDependants(u *model.Run, broken []model.Condition, now time.Time) ([]*model.Run, error)
	// SetRunnable writes the status, PendingCode and PendingReason of runs released.
	SetRunnable(runs []*model.Run) error
}

// Resolve settles the dependants of the runs that just ended, in the transaction that ended
// them: each final run with dependants meets or breaks their conditions; a dependant with
// every dependency met is released (queued when due, else scheduled), one with a broken
// dependency is skipped, and the dependants of the skipped ones are settled in turn. It
// returns the runs it changed.
func Resolve(tx DepTx, ended []*model.Run, now time.Time) ([]*model.Run, error) {
	var work []*model.Run
	for _, r := range ended {
		if r != nil && r.HasDependants && r.Status.Final() {
			work = append(work, r)
		}
	}
	var changed []*model.Run
	for len(work) > 0 {
		u := work[0]
		work = work[1:]
		met, broken := conditionsAt(u.Status)
		ready, err := tx.MeetDependants(u.ID, met)
		if err != nil {
			return nil, fmt.Errorf("dependants of run %s: %w", u.ID, err)
		}
		for _, r := range ready {
			Release(r, now)
		}
		if err := tx.SetRunnable(ready); err != nil {
			return nil, fmt.Errorf("dependants of run %s: %w", u.ID, err)
		}
		skipped, err := tx.SkipDependants(u, broken, now)
		if err != nil {
			return nil, fmt.Errorf("dependants of run %s: %w", u.ID, err)
		}
		changed = append(append(changed, ready...), skipped...)
		for _, s := range skipped {
			if s.HasDependants {
				work = append(work, s)
			}
		}
	}
	return changed, nil
}

// conditionsAt splits the conditions into those a run in final state s meets and those it
// breaks.
func conditionsAt(s model.RunStatus) (met, broken []model.Condition) {
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
// not meet condition c. The stores build the same words in SQL (see SkipDependants).
func BrokenReason(upstream string, s model.RunStatus, c model.Condition) string {
	return fmt.Sprintf("skipped: upstream run %s ended %s, needed %s", upstream, s, c)
}

// WaitingReason is the PendingReason of a run with n unmet dependencies, the first of
// them d.
func WaitingReason(n int, d model.Dependency) string {
	if n == 1 {
		return fmt.Sprintf("waiting for run %s to be %s", d.RunID, d.Condition)
	}
	return fmt.Sprintf("waiting for %d upstream runs (run %s to be %s, ...)", n, d.RunID, d.Condition)
}

// PrepareDependencies sets the state a new run with dependencies starts in, given the state
// of each upstream run (ups, by id): skipped when one dependency is already broken,
// waiting while some are unmet, and as the caller made it (queued or scheduled) when every
// one is met. It returns how many are unmet.
func PrepareDependencies(r *model.Run, ups map[string]model.RunStatus, now time.Time) int {
	unmet := 0
	var first model.Dependency
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
			if unmet == 0 {
				first = d
			}
			unmet++
		}
	}
	if unmet > 0 {
		r.Status = model.RunWaiting
		r.PendingCode = model.PendingDependencies
		r.PendingReason = WaitingReason(unmet, first)
	}
	return unmet
}

// Reopen sets the state a final run starts again in (see Store.ReopenRuns), given its
// dependencies (r.DependsOn) and their upstream runs' states: it returns the unmet count.
func Reopen(r *model.Run, ups map[string]model.RunStatus, now time.Time) int {
	r.ScheduledFor, r.FinishedAt, r.Error, r.CancelRequested = now, nil, "", false
	Release(r, now)
	return PrepareDependencies(r, ups, now)
}

// Plain reports whether r can go in with the batch inserts: no concurrency limit to admit
// it under and no dependencies to check (nil is plain).
func Plain(r *model.Run) bool { return r == nil || r.Concurrency == nil && len(r.DependsOn) == 0 }

// ErrStale answers a cron fire whose schedule moved since it was read (another server
// fired it): nothing was written.
var ErrStale = errors.New("stale fire")
