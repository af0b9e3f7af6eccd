package scheduler

import (
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// Retry reopens r by a manual retry at now (failed or cancelled -> queued): due now, with
// one more attempt in its budget, its error, end time, cancel request and pending reason
// cleared; its earlier attempts stay its history. A cron run keeps its Instant. It refuses, with model.ErrInvalidState, a
// run in any other state and a run whose job was deleted (nothing could run it), leaving r
// as it was. A store then writes r and admits it under its concurrency limit again.
func Retry(r *model.Run, jobExists bool, now time.Time) error {
	if !jobExists {
		return fmt.Errorf("its job was deleted: %w", model.ErrInvalidState)
	}
	if r.Status != model.RunFailed && r.Status != model.RunCancelled {
		return fmt.Errorf("run is %s: %w", r.Status, model.ErrInvalidState)
	}
	r.Status = model.RunQueued
	r.ScheduledFor = now
	r.MaxAttempts++
	r.FinishedAt = nil
	r.Error = ""
	r.CancelRequested = false
	r.PendingCode, r.PendingReason = model.PendingNone, ""
	return nil
}
