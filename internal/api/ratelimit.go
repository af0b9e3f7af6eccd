package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

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
// A client is whom the request authenticated as (the bearer token, when the route checked
// one), else its remote address (IPv6 by its /64, which one host usually holds whole).
// Config.ClientKey replaces that rule: the place for a token's principal once tokens have
// them. Behind a proxy every client shares the proxy's address; clients there
// should send tokens, or the rate be set for the proxy as a whole.

// principalKey is the context key of the bearer token a request was authenticated with.
const principalKey ctxKey = requestIDKey + 1

// withPrincipal records on r the token it was authenticated with.
func withPrincipal(r *http.Request, token string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), principalKey, token))
}

// DefaultClientKey is the client a request counts against: "token:" and a hash of the bearer
// token it was authenticated with, else "ip:" and its remote address (an IPv6 address by its
// /64).
func DefaultClientKey(r *http.Request) string {
	if token, _ := r.Context().Value(principalKey).(string); token != "" {
		sum := sha256.Sum256([]byte(token))
		return "token:" + hex.EncodeToString(sum[:12])
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
