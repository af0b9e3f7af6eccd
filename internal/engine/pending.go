package engine

import (
	"context"
	"fmt"

	"github.com/stint-dev/stint/internal/model"
)

// ExplainPending fills PendingCode and PendingReason of queued runs, which the store leaves
// empty because why a due run waits depends on the moment: its queue paused or at its limit,
// no live worker, or every worker busy (invariant 2: a run that is not final says why it
// waits). Runs in other states keep what the store says. It reads each queue once and the
// workers once, whatever the number of runs.
func (e *Engine) ExplainPending(ctx context.Context, runs []*model.Run) error {
	queues := map[string]*model.Queue{}
	var workersLive, workersLoaded = 0, false
	for _, r := range runs {
		if r.Status != model.RunQueued || r.PendingCode != model.PendingNone {
			continue
		}
		q, ok := queues[r.Queue]
		if !ok {
			var err error
			if q, err = e.store.GetQueue(ctx, r.Queue); err != nil {
				return fmt.Errorf("explain pending: %w", err)
			}
			queues[r.Queue] = q
		}
		switch {
		case q.Paused:
			r.PendingCode, r.PendingReason = model.PendingQueuePaused, fmt.Sprintf("queue %q is paused", q.Name)
			continue
		case q.MaxConcurrency > 0 && q.Depth[model.RunRunning] >= q.MaxConcurrency:
			r.PendingCode = model.PendingConcurrencyLimit
			r.PendingReason = fmt.Sprintf("queue %q is at its max concurrency (%d running)", q.Name, q.MaxConcurrency)
			continue
		case q.RateLimit != nil:
			r.PendingCode = model.PendingRateLimited
			r.PendingReason = fmt.Sprintf("queue %q starts at most %d runs per %s: waiting for a turn (or a free worker)",
				q.Name, q.RateLimit.Rate, q.RateLimit.Per)
			continue
		}
		if !workersLoaded {
			ws, err := e.Workers(ctx)
			if err != nil {
				return fmt.Errorf("explain pending: %w", err)
			}
			for _, w := range ws {
				if w.State == model.WorkerActive {
					workersLive++
				}
			}
			workersLoaded = true
		}
		r.PendingCode = model.PendingNoWorker
		if workersLive == 0 {
			r.PendingReason = "no worker is connected"
		} else {
			r.PendingReason = fmt.Sprintf("waiting for a free slot: %d active workers are busy", workersLive)
		}
	}
	return nil
}
