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
	a.mu.Lock()
	refs := make([]apitype.LeaseRef, 0, len(a.attempts))
	ats := make([]*attempt, 0, len(a.attempts))
	for _, at := range a.attempts {
		refs = append(refs, apitype.LeaseRef{RunID: at.lease.RunID, Token: at.lease.Token})
		ats = append(ats, at)
	}
	a.mu.Unlock()

	start := a.now()
	gen := a.regGen.Load()
	hctx, cancel := context.WithTimeout(ctx, max(a.interval(), time.Second))
	resp, err := a.srv.Heartbeat(hctx, a.ID(), &apitype.HeartbeatRequest{Held: refs})
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
		a.applyPushes(resp.Lost, resp.Cancel, resp.Drain)
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

// expire treats leases not renewed within the TTL as lost, and returns when the next held
// lease expires (zero if none is held).
func (a *Agent) expire(now time.Time) time.Time {
	ttl := a.ttl()
	var next time.Time
	var lost []*attempt
	a.mu.Lock()
	for _, at := range a.attempts {
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
