package engine

import (
	"context"
	"fmt"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/placement"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// ExplainPending fills PendingCode and PendingReason of queued runs, which the store leaves
// empty because why a due run waits depends on the moment: its queue paused or at its limit,
// no live worker, no worker that meets its requirements, or every worker that does busy
// (invariant 2: a run that is not final says why it waits). Runs in other states keep what
// the store says. It reads each queue once and the workers once, whatever the number of
// runs.
func (e *Engine) ExplainPending(ctx context.Context, runs []*model.Run) error {
	queues := map[string]*model.Queue{}
	var rooms []placement.Room
	roomsLoaded := false
	for _, r := range runs {
		if r.Status != model.RunQueued || r.PendingCode != model.PendingNone {
			continue
		}
		q, ok := queues[r.Queue]
		if !ok {
			var err error
			if q, err = e.store.GetQueue(ctx, &store.GetQueueParams{Name: r.Queue}); err != nil {
				return fmt.Errorf("explain pending: %w", err)
			}
			queues[r.Queue] = q
		}
		if code, reason := scheduler.QueueHold(q); code != model.PendingNone {
			r.PendingCode, r.PendingReason = code, reason
			continue
		}
		if !roomsLoaded {
			var err error
			if rooms, err = e.activeRooms(ctx); err != nil {
				return fmt.Errorf("explain pending: %w", err)
			}
			roomsLoaded = true
		}
		r.PendingCode, r.PendingReason = scheduler.WaitForWorker(rooms, r.Requirements)
	}
	return nil
}

// activeRooms returns the active workers (those taking work: not draining, not silent for
// longer than the lease TTL) as placement sees them, in the store's order (by id).
func (e *Engine) activeRooms(ctx context.Context) ([]placement.Room, error) {
	ws, err := e.Workers(ctx)
	if err != nil {
		return nil, err
	}
	var rooms []placement.Room
	for _, w := range ws {
		if w.State == model.WorkerActive {
			rooms = append(rooms, store.NewRoom(w.ID, w.Labels, w.Capacity, w.Used))
		}
	}
	return rooms, nil
}
