package scheduler

import (
	"encoding/json"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// NewRun builds run runID of job, due at due (zero or past: now), made at now by trigger,
// with args (nil: the job's own). It is queued when due and scheduled with not_due
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
