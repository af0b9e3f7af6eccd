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

// Reserve is the generic cell rate algorithm: a key whose theoretical arrival time is tat
// admits, at most Rate.Rate in any window of Rate.Per (a burst of Rate.Rate, then one every
// Per/Rate). It returns when a run asking at now may start, and the key's next tat.
func Reserve(tat, now time.Time, r *model.RateLimit) (at, next time.Time) {
	interval := r.Per / time.Duration(r.Rate)
	if tat.Before(now) {
		tat = now
	}
	at = tat.Add(interval - r.Per) // the burst tolerance is Per - interval
	if at.Before(now) {
		at = now
	}
	return at, tat.Add(interval)
}

// RateHold marks r as waiting for its turn under its key's rate limit, until at.
func RateHold(r *model.Run, at time.Time) {
	c := r.Concurrency
	r.Status = model.RunWaiting
	r.PendingCode = model.PendingRateLimited
	r.PendingReason = fmt.Sprintf("rate limit: %d per %s on %q; starts at %s", c.Rate.Rate, c.Rate.Per, c.Key,
		at.UTC().Format(time.RFC3339Nano))
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

// NextTurn is when a key whose theoretical arrival time is tat gets its next turn.
func NextTurn(tat, now time.Time, r *model.RateLimit) time.Time {
	at, _ := Reserve(tat, now, r)
	return at
}

// QueueRateKey is the rate_limits key of a queue's rate limit.
func QueueRateKey(queue string) string { return "queue:" + queue }

// RateColumns are the (rate, per in microseconds) columns of an optional rate limit.
func RateColumns(r *model.RateLimit) (int, int64) {
	if r == nil {
		return 0, 0
	}
	return r.Rate, r.Per.Microseconds()
}

// RateFromColumns is the rate limit that RateColumns wrote (nil: none).
func RateFromColumns(rate int, perMicros int64) *model.RateLimit {
	if rate <= 0 {
		return nil
	}
	return &model.RateLimit{Rate: rate, Per: time.Duration(perMicros) * time.Microsecond}
}
