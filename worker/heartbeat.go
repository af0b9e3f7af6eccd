package worker

import (
	"context"
	"time"

	"github.com/stint-dev/stint/apitype"
)

func (a *Agent) interval() time.Duration { return time.Duration(a.hbInterval.Load()) }
func (a *Agent) ttl() time.Duration      { return time.Duration(a.leaseTTL.Load()) }

// killMargin returns how long before a lease would expire, by the agent's own clock, the agent
// kills an attempt whose lease it could not renew: a tenth of the lease TTL, at least 100ms
// (but at most half the TTL). See expire.
func killMargin(ttl time.Duration) time.Duration {
	return max(ttl/10, min(ttl/2, 100*time.Millisecond))
}

// heartbeatLoop sends one heartbeat per interval carrying every held lease, and acts on the
// answer. When heartbeats fail it retries sooner. It kills nothing itself: expireLoop kills
// the attempts whose leases it could not renew in time.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	var b backoff
	timer := time.NewTimer(a.interval())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := a.now()
		if a.beat(ctx) {
			b.reset()
			timer.Reset(max(start.Add(a.interval()).Sub(a.now()), time.Millisecond))
			continue
		}
		if ctx.Err() != nil {
			return
		}
		timer.Reset(min(b.next(), a.interval()))
	}
}

// expireLoop treats a lease that comes within killMargin of its TTL without a successful
// heartbeat as lost (expire): the server may give the run to someone else once the TTL has
// passed, so the attempt is killed before that and not reported. It runs apart from the
// heartbeats because a heartbeat can wait on a network that no longer answers for
// heartbeatTimeout, far longer than the margin: a kill must not wait for it.
func (a *Agent) expireLoop(ctx context.Context) {
	timer := time.NewTimer(a.interval())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := a.now()
		// A lease granted meanwhile is due no sooner than the TTL less the margin from now.
		ttl := a.ttl()
		d := min(a.interval(), ttl-killMargin(ttl))
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
	a.renewed(ats, start)
	return true
}

// renewed records that the server renewed the leases of ats no earlier than at: the time the
// renewing request was sent, on the agent's clock, which the server's renewal follows.
func (a *Agent) renewed(ats []*attempt, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, att := range ats {
		if !att.leaseReleased.Load() && att.renewedAt.Before(at) {
			att.renewedAt = at
		}
	}
}

// heartbeatTimeout bounds one heartbeat: half the lease TTL, at least a second. A slow
// store answer is waited for rather than cut off at the interval (which only turned a
// heartbeat that would have succeeded into an error and a retry); a failed heartbeat is
// retried with backoff while the leases last.
func (a *Agent) heartbeatTimeout() time.Duration {
	return max(a.ttl()/2, a.interval(), time.Second)
}

// expire treats leases of running attempts not renewed within the TTL less killMargin as lost,
// and returns when the next such lease is due to be killed (zero if none is held).
//
// A lease's renewedAt is when the request that last renewed it was sent (a heartbeat, a
// re-attach), or when the lease poll's answer that granted it arrived. The server renews a
// lease to its own now + TTL when the request reaches it, so a renewal's expiry on the
// server comes at least TTL after renewedAt, and the kill comes killMargin before that: the
// margin covers the timer firing late, the kill taking effect and, for a lease just granted,
// the answer's time in transit. Durations are measured on the monotonic clock, so a wall
// clock step changes nothing.
func (a *Agent) expire(now time.Time) time.Time {
	ttl := a.ttl()
	life := ttl - killMargin(ttl)
	var next time.Time
	var lost []*attempt
	a.mu.Lock()
	for _, at := range a.attempts {
		if at.completed.Load() {
			// Nothing left to kill: the completion is on its way, and the server's answer
			// to it (recorded, or refused as stale) releases the lease.
			continue
		}
		exp := at.renewedAt.Add(life)
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
		a.log.Warn("lease about to expire without a successful heartbeat: killing attempt",
			"run_id", at.lease.RunID, "attempt", at.lease.Attempt, "lease_ttl", ttl, "margin", killMargin(ttl))
		at.markLost()
	}
	return next
}
