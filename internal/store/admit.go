package store

import (
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// Admission is what a new run under a concurrency limit does; both engines decide with
// Admit and carry the decision out in the transaction that creates the run.
type Admission int

// Admissions.
const (
	// AdmitRun: a slot is free; the run is created as given and takes it.
	AdmitRun Admission = iota
	// HoldRun: the run is created waiting (PendingCode concurrency_limit) and takes a slot
	// when one frees.
	HoldRun
	// SkipRun: the run is created skipped (policy forbid).
	SkipRun
	// ReplaceRuns: the oldest slot holders are cancelled to make room (policy replace);
	// the run takes a slot if that frees one at once, else it waits like HoldRun.
	ReplaceRuns
)

// Admit decides a new run's admission given how many runs of its key hold a slot.
func Admit(c *model.RunConcurrency, holding int) Admission {
	if holding < c.Max {
		return AdmitRun
	}
	switch c.Policy {
	case model.ConcurrencyForbid:
		return SkipRun
	case model.ConcurrencyReplace:
		return ReplaceRuns
	default:
		return HoldRun
	}
}

// Hold marks r as waiting for a slot of its key.
func Hold(r *model.Run, holding int) {
	r.Status = model.RunWaiting
	r.PendingCode = model.PendingConcurrencyLimit
	r.PendingReason = fmt.Sprintf("concurrency limit: %d of %d runs of %q active", holding, r.Concurrency.Max, r.Concurrency.Key)
}

// Skip marks r as skipped by policy forbid.
func Skip(r *model.Run, holding int, now time.Time) {
	r.Status = model.RunSkipped
	r.PendingCode, r.PendingReason = model.PendingNone, ""
	r.FinishedAt = &now
	r.Error = fmt.Sprintf("skipped: concurrency policy forbid, %d of %d runs of %q active", holding, r.Concurrency.Max, r.Concurrency.Key)
}

// Release makes a held run runnable now that it has a slot: queued when due, else
// scheduled with not_due.
func Release(r *model.Run, now time.Time) {
	r.Status = model.RunQueued
	r.PendingCode, r.PendingReason = model.PendingNone, ""
	if r.ScheduledFor.After(now) {
		r.Status = model.RunScheduled
		r.PendingCode = model.PendingNotDue
		r.PendingReason = "not due until " + r.ScheduledFor.UTC().Format(time.RFC3339Nano)
	}
}

// ReplacedReason is the Error of a run that policy replace cancelled.
func ReplacedReason(by string) string {
	return "cancelled: replaced by run " + by + " (concurrency policy replace)"
}
