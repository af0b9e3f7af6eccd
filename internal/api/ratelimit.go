package api

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/stint-dev/stint/internal/auth"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
)

// Submissions per client.
//
// The routes that create jobs or runs (route.Submit: POST /v1/jobs, batches, DAGs, PUT of a
// job or a pipeline, triggers, retries, backfills, webhooks) take a turn from their client's
// allowance first: at most Config.SubmitRate.Rate requests in any window of its Per (a burst
// of Rate, then one every Per/Rate), by the generic cell rate algorithm the scheduler uses
// for rate-limited runs (scheduler.Reserve). A request over it changes nothing and is a 429
// with Retry-After. One request is one turn, whatever it holds: batches and DAGs are capped
// by their own limits.
//
// A client is whom the request authenticated as: its stored API token (by the token's id),
// or the static --api-token or --worker-token it presented. A request that carries no
// principal (the open routes: webhooks) or the one principal of a server without
// authentication (`stint dev`) counts by its remote address instead (IPv6 by its /64, which
// one host usually holds whole). Config.ClientKey replaces that rule. Behind a proxy every
// client without a token shares the proxy's address; clients there should send tokens, or
// the rate be set for the proxy as a whole.

// DefaultClientKey is the client a request counts against: "token:" and the id of the stored
// token it was authenticated with, "static:" and the flag of a static token, else "ip:" and
// its remote address (an IPv6 address by its /64).
func DefaultClientKey(r *http.Request) string {
	if p := principalOf(r.Context()); p != nil {
		if k := principalClient(p); k != "" {
			return k
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		return "ip:" + ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return "ip:" + host
}

// principalClient is the client key of a principal; "" when it names no client of its own
// (authentication off).
func principalClient(p *auth.Principal) string {
	switch {
	case p.TokenID != "":
		return "token:" + p.TokenID
	case p.Name == staticAdminName || p.Name == staticWorkerName:
		return "static:" + p.Name
	}
	return ""
}

// submitLimiter holds each client's theoretical arrival time under the submission rate.
type submitLimiter struct {
	rate *model.RateLimit
	mu   sync.Mutex
	tats map[string]time.Time
	// sweepAt is the size at which the map is swept of clients whose allowance is whole
	// again (their tat has passed): such a client is as good as a new one.
	sweepAt int
}

const minSweep = 1024

func newSubmitLimiter(rate *model.RateLimit) *submitLimiter {
	return &submitLimiter{rate: rate, tats: make(map[string]time.Time), sweepAt: minSweep}
}

// take takes a turn for client at now: ok, or how long until it has one.
func (l *submitLimiter) take(client string, now time.Time) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, next := scheduler.Reserve(l.tats[client], now, l.rate)
	if at.After(now) {
		return false, at.Sub(now)
	}
	l.tats[client] = next
	if len(l.tats) >= l.sweepAt {
		for k, tat := range l.tats {
			if !tat.After(now) {
				delete(l.tats, k)
			}
		}
		l.sweepAt = max(minSweep, 2*len(l.tats))
	}
	return true, 0
}

// tooMany is the 429 of a client over the submission rate.
func tooMany(rate *model.RateLimit, wait time.Duration) error {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	return &httpError{status: http.StatusTooManyRequests, retryAfter: time.Duration(secs) * time.Second,
		detail: fmt.Sprintf("too many submissions from this client: at most %d per %s; try again in %ds", rate.Rate, rate.Per, secs)}
}

// awaitTurn takes a turn of the submission rate for r's client, waiting for it as long as
// it takes (until ctx ends): the later batches of a stream of jobs slow down under the
// rate rather than fail.
func (a *API) awaitTurn(ctx context.Context, r *http.Request) error {
	if a.submits == nil {
		return nil
	}
	client := a.cfg.ClientKey(r)
	for {
		ok, wait := a.submits.take(client, a.clock.Now())
		if ok {
			return nil
		}
		t := a.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}
