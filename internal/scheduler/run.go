package scheduler

import (
	"encoding/json"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// NewRun builds run runID of job, due at due (zero or past: now), made at now by trigger,
// with args (nil: the job's own). A cron run is built by NewCronRun. It is queued when due and scheduled with not_due
// otherwise; its attempt budget is the job's retry MaxAttempts (at least 1) and its
// concurrency limit is RunConcurrency's. The store may still hold it back for its limit
// when it creates it.
func NewRun(runID string, job *model.Job, trigger model.Trigger, args json.RawMessage, due, now time.Time) *model.Run {
	if due.IsZero() || due.Before(now) {
		due = now
	}
	if args == nil {
		args = job.Spec.Args
	}
	maxAttempts := job.Spec.Retry.MaxAttempts
	if maxAttempts < 1 {
		maxAttempts = 1
	}
	r := &model.Run{
		ID:           runID,
		JobID:        job.ID,
		JobName:      job.Name,
		Namespace:    job.Namespace,
		Queue:        job.Spec.Queue,
		Priority:     job.Spec.Priority,
		Trigger:      trigger,
		Args:         args,
		ScheduledFor: due,
		CreatedAt:    now,
		MaxAttempts:  maxAttempts,
		Concurrency:  RunConcurrency(job, args),
	}
	Release(r, now)
	return r
}

// NewCronRun builds run runID of job for the cron instant at, made at now by a fire of
// the job's schedule or a backfill: a run with the job's args, trigger cron, due at its
// instant (queued when the instant has passed, scheduled with not_due when the fire is
// ahead of it) and holding the instant in Instant. The instant never changes afterwards:
// a retry moves ScheduledFor (Decide, Retry), never Instant, and the store keeps one cron
// run per (job, instant), so no instant is fired twice (invariant 4).
func NewCronRun(runID string, job *model.Job, at, now time.Time) *model.Run {
	r := NewRun(runID, job, model.TriggerCron, nil, at, now)
	at = at.UTC()
	r.ScheduledFor = at // a late instant is due at once, but stays the run's due time
	r.Instant = &at
	return r
}
