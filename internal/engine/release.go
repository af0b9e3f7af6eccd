package engine

import (
	"context"

	"github.com/stint-dev/stint/internal/store"
)

// releaseLoop keeps rate limits moving without polling: it admits runs held by a key's
// rate limit when their turn comes, and wakes workers when a rate-limited queue with queued
// runs gets its next turn. It sleeps until the earlier of the two, or until a new held run
// or an underfilled lease may have brought one earlier.
func (e *Engine) releaseLoop(ctx context.Context) {
	for ctx.Err() == nil {
		wake := e.timers.Wait()
		now := e.clock.Now()
		next, ok, err := e.store.NextRelease(ctx)
		if err != nil {
			e.retryLater(ctx, "next rate-limit release", err)
			continue
		}
		if ok && !next.After(now) {
			runs, err := e.store.ReleaseDue(ctx, &store.ReleaseDueParams{Now: now})
			if err != nil {
				e.retryLater(ctx, "release rate-limited runs", err)
				continue
			}
			e.wakeFor(runs)
			continue
		}
		if e.rateQueues.Load() {
			turn, tok, err := e.store.NextQueueTurn(ctx, &store.NextQueueTurnParams{Now: now})
			if err != nil {
				e.retryLater(ctx, "next queue turn", err)
				continue
			}
			if tok && (!ok || turn.Before(next)) {
				next, ok = turn, true
			}
		}
		until := now.Add(e.cfg.MaxLeaseWait * 10) // nothing held: sleep until woken
		if ok {
			until = next
		}
		if !e.sleepUntil(ctx, wake, until) {
			return
		}
		if e.rateQueues.Load() && ok && !e.clock.Now().Before(next) {
			e.work.Notify() // a queue's turn: leases may take its runs again
		}
	}
}
