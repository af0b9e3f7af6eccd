package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
)

// DepTx is what dependency resolution needs of a store's write transaction. Both stores
// implement it with set-based statements over run_deps (indexed by upstream run).
type DepTx interface {
	// MeetDependants counts one dependency as met for every waiting run that waits on run
	// upstream through an edge whose condition is in met, and returns those left with no
	// unmet dependency (still waiting) for Resolve to release.
	MeetDependants(upstream string, met []model.Condition) ([]*model.Run, error)
	// SkipDependants ends, skipped, every waiting run that waits on run upstream through an
	// edge whose condition is in broken, with FinishedAt now and as Error the entry of
	// reasons (scheduler.BrokenReasons) at the index of the edge's condition in broken.
	SkipDependants(upstream string, broken []model.Condition, reasons []string, now time.Time) ([]*model.Run, error)
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
		met, broken := scheduler.ConditionsAt(u.Status)
		ready, err := tx.MeetDependants(u.ID, met)
		if err != nil {
			return nil, fmt.Errorf("dependants of run %s: %w", u.ID, err)
		}
		for _, r := range ready {
			scheduler.Release(r, now)
		}
		if err := tx.SetRunnable(ready); err != nil {
			return nil, fmt.Errorf("dependants of run %s: %w", u.ID, err)
		}
		skipped, err := tx.SkipDependants(u.ID, broken, scheduler.BrokenReasons(u.ID, u.Status, broken), now)
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

// Plain reports whether r can go in with the batch inserts: no concurrency limit to admit
// it under and no dependencies to check (nil is plain).
func Plain(r *model.Run) bool { return r == nil || r.Concurrency == nil && len(r.DependsOn) == 0 }

// ErrStale answers a cron fire whose schedule moved since it was read (another server
// fired it): nothing was written.
var ErrStale = errors.New("stale fire")
