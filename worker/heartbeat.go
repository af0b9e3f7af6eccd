package worker

import (
	"context"
	"time"

	"github.com/stint-dev/stint/apitype"
)

func (a *Agent) interval() time.Duration { return time.Duration(a.hbInterval.Load()) }
func (a *Agent) ttl() time.Duration      { return time.Duration(a.leaseTTL.Load()) }

// heartbeatLoop sends one heartbeat per interval carrying every held lease, and acts on the
// answer. When heartbeats fail it retries sooner, and once a lease has gone a whole TTL
// without a successful heartbeat it treats the lease as lost: the server has given the run to
// someone else by now, so the attempt is killed and not reported.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	var b backoff
	timer := time.NewTimer(a.interval())
	defer timer.Stop()
	next := a.now().Add(a.interval())
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if now := a.now(); !now.Before(next) {
			if a.beat(ctx) {
				b.reset()
				next = now.Add(a.interval())
			} else {
				if ctx.Err() != nil {
					return
				}
				next = a.now().Add(min(b.next(), a.interval()))
			}
		}
		now := a.now()
		d := next.Sub(now)
		if exp := a.expire(now); !exp.IsZero() && exp.Sub(now) < d {
			d = exp.Sub(now)
		}
		timer.Reset(max(d, time.Millisecond))
	}
}

// beat sends one heartbeat and reports whether the server answered.
func (a *Agent) beat(ctx context.Context) bool {
	refs, ats := a.heldRefs()
	start := a.now()
	gen := a.regGen.Load()
	hctx, cancel := context.WithTimeout(ctx, a.heartbeatTimeout())
	resp, err := a.srv.Heartbeat(hctx, a.ID(), &apitype.HeartbeatRequest{Session: a.Session(), Held: refs})
	cancel()
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case isUnknownWorker(err):
			a.reregister(ctx, gen)
		default:
			a.log.Warn("heartbeat failed", "err", err, "leases", len(refs))
		}
		return false
	}
	if resp != nil {
		a.applyLeaseAnswer(ats, resp.Lost, resp.Ended)
		a.applyPushes(nil, resp.Cancel, resp.Drain)
	}
	// The server renewed the leases it did not report lost no earlier than start.
	a.mu.Lock()
	for _, at := range ats {
		if !at.leaseReleased.Load() && at.renewedAt.Before(start) {
			at.renewedAt = start
		}
	}
	a.mu.Unlock()
	return true
}

// heartbeatTimeout bounds one heartbeat: half the lease TTL, at least a second. A slow
// store answer is waited for rather than cut off at the interval (which only turned a
// heartbeat that would have succeeded into an error and a retry); a failed heartbeat is
// retried with backoff while the leases last.
func (a *Agent) heartbeatTimeout() time.Duration {
	return max(a.ttl()/2, a.interval(), time.Second)
}

// expire treats leases of running attempts not renewed within the TTL as lost, and returns
// when the next such lease expires (zero if none is held).
func (a *Agent) expire(now time.Time) time.Time {
	ttl := a.ttl()
	var next time.Time
	var lost []*attempt
	a.mu.Lock()
	for _, at := range a.attempts {
		if at.completed.Load() {
			// Nothing left to kill: the completion is on its way, and the server's answer
			// to it (recorded, or refused as stale) releases the lease.
			continue
		}
		exp := at.renewedAt.Add(ttl)
		if !now.Before(exp) {
			lost = append(lost, at)
			continue
		}
		if next.IsZero() || exp.Before(next) {
			next = exp
		}
	}
	a.mu.Unlock()
	for _, at := range lost {
		a.log.Warn("lease expired without a successful heartbeat: killing attempt",
			"run_id", at.lease.RunID, "attempt", at.lease.Attempt, "lease_ttl", ttl)
		at.markLost()
	}
	return next
}
