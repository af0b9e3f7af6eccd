package scheduler

import (
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// Admission is what a new run under a concurrency limit does; both stores decide with
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
	if c.Max == 0 || holding < c.Max {
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

// Hold marks r as waiting for a slot of its key (waiting -> waiting, or new -> waiting).
func Hold(r *model.Run, holding int) {
	r.Status = model.RunWaiting
	r.PendingCode = model.PendingConcurrencyLimit
	r.PendingReason = fmt.Sprintf("concurrency limit: %d of %d runs of %q active", holding, r.Concurrency.Max, r.Concurrency.Key)
}

// Skip marks r as skipped by policy forbid (new -> skipped).
func Skip(r *model.Run, holding int, now time.Time) {
	r.Status = model.RunSkipped
	r.PendingCode, r.PendingReason = model.PendingNone, ""
	r.FinishedAt = &now
	r.Error = fmt.Sprintf("skipped: concurrency policy forbid, %d of %d runs of %q active", holding, r.Concurrency.Max, r.Concurrency.Key)
}

// Release makes a run runnable (new, or waiting -> queued or scheduled): queued when due,
// else scheduled with not_due.
func Release(r *model.Run, now time.Time) {
	r.Status = model.RunQueued
	r.PendingCode, r.PendingReason = model.PendingNone, ""
	if r.ScheduledFor.After(now) {
		r.Status = model.RunScheduled
		r.PendingCode = model.PendingNotDue
		r.PendingReason = NotDueReason(r.ScheduledFor)
	}
}

// NotDueReason is the PendingReason of a run scheduled for at (PendingCode not_due).
func NotDueReason(at time.Time) string { return "not due until " + stamp(at) }

// ReplacedReason is the Error of a run that policy replace cancelled to make room for run
// by (running -> cancel requested, or queued/scheduled/waiting -> cancelled).
func ReplacedReason(by string) string {
	return "cancelled: replaced by run " + by + " (concurrency policy replace)"
}

// Reserve is the generic cell rate algorithm: a key whose theoretical arrival time is tat
// admits, at most Rate.Rate in any window of Rate.Per (a burst of Rate.Rate, then one every
// Per/Rate). It returns when a run asking at now may start, and the key's next tat.
func Reserve(tat, now time.Time, r *model.RateLimit) (at, next time.Time) {
	at = TurnAt(tat, r)
	if at.Before(now) {
		at = now
	}
	if tat.Before(now) {
		tat = now
	}
	return at, tat.Add(r.Per / time.Duration(r.Rate))
}

// RateHold marks r as waiting for its turn under its key's rate limit, until at (new, or
// waiting -> waiting rate_limited).
func RateHold(r *model.Run, at time.Time) {
	c := r.Concurrency
	r.Status = model.RunWaiting
	r.PendingCode = model.PendingRateLimited
	r.PendingReason = fmt.Sprintf("rate limit: %d per %s on %q; starts at %s", c.Rate.Rate, c.Rate.Per, c.Key, stamp(at))
}

// TakeTurns takes up to n turns that rate limit r allows at now, from a key whose
// theoretical arrival time is tat, and returns how many it took and the key's next tat.
func TakeTurns(tat, now time.Time, r *model.RateLimit, n int) (int, time.Time) {
	taken := 0
	for taken < n {
		at, next := Reserve(tat, now, r)
		if at.After(now) {
			break
		}
		tat = next
		taken++
	}
	return taken, tat
}

// TurnAt is the instant a key whose theoretical arrival time is tat has its next turn
// from: a run asking at or after it may start (Reserve's at, before it is moved up to
// the asking time). It is before the asking time when the turn came earlier and is still
// untaken.
func TurnAt(tat time.Time, r *model.RateLimit) time.Time {
	return tat.Add(r.Per/time.Duration(r.Rate) - r.Per) // the burst tolerance is Per - interval
}

// stamp is how a reason writes an instant: RFC 3339 in UTC (with the fraction of a second
// when there is one).
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// AdmissionPreview words what Admit would do with a new run of job under limit c while
// active runs hold its slots, for a plan (nothing is created): "" when the run would be
// admitted.
func AdmissionPreview(c *model.RunConcurrency, active int, job string) string {
	what := "a new run would wait for one to end"
	switch Admit(c, active) {
	case AdmitRun:
		return ""
	case SkipRun:
		what = "a new run would be skipped (policy forbid)"
	case ReplaceRuns:
		what = "a new run would cancel the oldest (policy replace)"
	}
	return fmt.Sprintf("concurrency limit: %d of %d runs of job %q active: %s", active, c.Max, job, what)
}
