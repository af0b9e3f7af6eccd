package worker

import (
	"context"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// minPollHold: an empty answer to a lease poll faster than this means the server did not hold
// the poll, and the next poll waits a little.
const minPollHold = 5 * time.Millisecond

// empty reports whether a poll's answer carries nothing.
func empty(r *apitype.LeaseResponse) bool {
	return r == nil || len(r.Leases) == 0 && len(r.Cancel) == 0 && len(r.Lost) == 0 && !r.Drain
}

// leaseLoop keeps one lease poll outstanding until leasing stops. Each poll asks for as many
// runs as there is room for (see roomLocked); a full worker polls with Max 0, so that cancel,
// lost and drain pushes still reach it, and that poll is aborted and sent again as soon as
// there is room.
func (a *Agent) leaseLoop(ctx context.Context) {
	wait := apitype.Duration(a.cfg.PollWait)
	var b backoff
	var start []*attempt
	for {
		pctx, cancel := context.WithCancel(ctx)
		a.mu.Lock()
		if a.draining {
			a.mu.Unlock()
			cancel()
			return
		}
		free := a.roomLocked()
		if a.gatheringLocked(free) {
			free = 0 // woken when there is room enough
		} else if free > 0 {
			a.gather.over = false
			if a.gather.timer != nil {
				a.gather.timer.Stop()
				a.gather.timer = nil
			}
		}
		began := a.now()
		a.poll = pollState{cancel: cancel, max: free, began: began}
		a.mu.Unlock()

		gen := a.regGen.Load()
		resp, err := a.srv.Lease(pctx, a.ID(), &apitype.LeaseRequest{Session: a.Session(), Max: free, Wait: &wait})

		a.mu.Lock()
		aborted := a.poll.aborted
		a.poll = pollState{aborted: aborted} // until the next poll replaces it (gatherBusy)
		short := false
		if !aborted && err == nil && free > 0 {
			full := resp != nil && len(resp.Leases) == free
			short = a.gather.lastFull && !full
			a.gather.lastFull = full
		}
		a.mu.Unlock()
		if short {
			a.ship.signal() // completions held for this poll's answer go now
		}
		cancel()

		if resp != nil {
			start = a.accept(resp, start[:0])
		}
		switch {
		case ctx.Err() != nil:
			return
		case aborted:
			// We cut the poll short to send a new one.
		case err == nil:
			if empty(resp) && a.now().Sub(began) < minPollHold {
				// The server answered at once instead of holding the poll: do not spin.
				sleep(ctx, min(b.next(), time.Second), a.stopLease)
				break
			}
			b.reset()
		case isUnknownWorker(err):
			a.reregister(ctx, gen)
			sleep(ctx, b.next(), a.stopLease) // in case the server keeps forgetting us
		default:
			d := b.next()
			a.log.Warn("lease poll failed; retrying", "err", err, "in", d)
			sleep(ctx, d, a.stopLease)
		}
	}
}

// accept takes the leases of a poll's answer, starts as many as there are free slots (the
// rest wait in the backlog), then applies the pushes. start is a buffer to reuse.
//
// The answer's lost names leases held before it: they are killed first, before the new
// attempts start (the server has already freed what they were booked, GPUs included, and may
// have given it to the new ones), and before the new leases are taken, since a run may be in
// both: its old lease expired and the server leased it to this worker again.
func (a *Agent) accept(resp *apitype.LeaseResponse, start []*attempt) []*attempt {
	a.applyPushes(resp.Lost, nil, false)
	if n := len(resp.Leases); n > 0 {
		now := a.now()
		batch := make([]attempt, n) // one allocation for the batch
		var replaced []*attempt
		a.mu.Lock()
		for i := range resp.Leases {
			at := &batch[i]
			at.init(a, &resp.Leases[i], now)
			if old := a.attempts[at.lease.RunID]; old != nil {
				// The server leased the run again: the old attempt's lease is gone.
				replaced = append(replaced, old)
			}
			a.attempts[at.lease.RunID] = at
			if a.used < a.slots {
				a.used++
				start = append(start, at)
			} else {
				a.backlog = append(a.backlog, at)
			}
		}
		a.mu.Unlock()
		if len(start) < n {
			a.log.Warn("server granted more leases than free slots; holding the rest", "granted", n, "started", len(start))
		}
		for _, old := range replaced {
			old.markLost()
		}
		if a.killing.Load() {
			// Granted by a poll that raced the end of the drain: report them at once.
			for i := range batch {
				batch[i].stop(reasonShutdown)
			}
		}
		for i, at := range start {
			go at.run()
			start[i] = nil
		}
		a.applyPushes(nil, resp.Cancel, resp.Drain)
		return start
	}
	a.applyPushes(nil, resp.Cancel, resp.Drain)
	return start
}
