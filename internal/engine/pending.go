package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/placement"
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
			if q, err = e.store.GetQueue(ctx, r.Queue); err != nil {
				return fmt.Errorf("explain pending: %w", err)
			}
			queues[r.Queue] = q
		}
		if code, reason := queueHold(q); code != model.PendingNone {
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
		r.PendingCode, r.PendingReason = waitForWorker(rooms, r.Requirements)
	}
	return nil
}

// queueHold says why q holds back its queued runs as a whole: paused, at its max
// concurrency, or under a rate limit; PendingNone when it does not.
func queueHold(q *model.Queue) (model.PendingCode, string) {
	switch {
	case q.Paused:
		return model.PendingQueuePaused, fmt.Sprintf("queue %q is paused", q.Name)
	case q.MaxConcurrency > 0 && q.Depth[model.RunRunning] >= q.MaxConcurrency:
		return model.PendingConcurrencyLimit, fmt.Sprintf("queue %q is at its max concurrency (%d running)", q.Name, q.MaxConcurrency)
	case q.RateLimit != nil:
		return model.PendingRateLimited, fmt.Sprintf("queue %q starts at most %d runs per %s: waiting for a turn (or a free worker)",
			q.Name, q.RateLimit.Rate, q.RateLimit.Per)
	}
	return model.PendingNone, ""
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

// waitForWorker says why a due run that its queue does not hold back is still queued, given
// the active workers: none connected; none that meets its requirements (with the counts
// per constraint from placement.Explain); or some that fit, all busy. Each case is
// no_worker_fits: no worker can take the run now (as for an unconstrained run when every
// worker is busy); the words say whether waiting will help.
func waitForWorker(rooms []placement.Room, req model.Requirements) (model.PendingCode, string) {
	switch {
	case len(rooms) == 0:
		return model.PendingNoWorker, "no worker is connected"
	case !placement.Constrained(req):
		return model.PendingNoWorker, fmt.Sprintf("waiting for a free slot: %d active workers are busy", len(rooms))
	}
	v := placement.Explain(rooms, req)
	if len(v.Fits) == 0 {
		return v.Code, v.Reason
	}
	if len(v.Fits) == 1 {
		return model.PendingNoWorker, fmt.Sprintf("waiting for a free slot: 1 worker fits (%s), busy", v.Fits[0])
	}
	return model.PendingNoWorker, fmt.Sprintf("waiting for a free slot: %d workers fit (%s), all busy", len(v.Fits), listIDs(v.Fits, 5))
}

// listIDs joins the first n ids with commas, saying how many more there are.
func listIDs(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:n], ", "), len(ids)-n)
}
