package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
)

// TestSubmitRate: a client's submissions beyond the rate are a 429 with Retry-After that
// creates nothing; other clients and reads are not held back; the client's turns come back
// with time.
func TestSubmitRate(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	b := setupOn(t, clk, nil, func(c *Config) {
		c.SubmitRate = &model.RateLimit{Rate: 2, Per: time.Second}
		c.ClientKey = func(r *http.Request) string { return r.Header.Get("X-Client") }
	})
	submit := func(client string) *response {
		t.Helper()
		return b.doCtx(t, t.Context(), "POST", "/v1/jobs", `{"command": ["true"]}`, http.Header{"X-Client": {client}})
	}
	require.Equal(t, http.StatusCreated, submit("a").status)
	require.Equal(t, http.StatusCreated, submit("a").status)
	jobs0, runs0 := b.counts(t)
	r := submit("a")
	require.Equal(t, http.StatusTooManyRequests, r.status, "body: %s", r.body)
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Contains(t, r.problem(t).Detail, "at most 2 per 1s")
	jobs, runs := b.counts(t)
	require.Equal(t, [2]int{jobs0, runs0}, [2]int{jobs, runs}, "a refused submission creates nothing")

	require.Equal(t, http.StatusCreated, submit("b").status, "another client has its own turns")
	require.Equal(t, http.StatusOK, b.doCtx(t, t.Context(), "GET", "/v1/jobs", nil, http.Header{"X-Client": {"a"}}).status,
		"reads are not submissions")
	r = b.doCtx(t, t.Context(), "POST", "/v1/jobs/batch", `{"jobs": [{"command": ["true"]}]}`, http.Header{"X-Client": {"a"}})
	require.Equal(t, http.StatusTooManyRequests, r.status, "a batch is a submission")

	clk.Set(start.Add(500 * time.Millisecond)) // one turn every Per/Rate
	require.Equal(t, http.StatusCreated, submit("a").status)
	require.Equal(t, http.StatusTooManyRequests, submit("a").status)
}

// TestSubmitRateCountsAuthenticatedClients: with a token required, a request with a wrong
// token is a 401 and spends nothing of the token's turns.
func TestSubmitRateCountsAuthenticatedClients(t *testing.T) {
	t.Parallel()
	b := setupOn(t, clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), nil, func(c *Config) {
		c.UserToken = "good"
		c.SubmitRate = &model.RateLimit{Rate: 1, Per: time.Minute}
	})
	for i := range 3 {
		r := b.doCtx(t, t.Context(), "POST", "/v1/jobs", `{"command": ["true"]}`, http.Header{"Authorization": {fmt.Sprintf("Bearer bad-%d", i)}})
		require.Equal(t, http.StatusUnauthorized, r.status, "body: %s", r.body)
	}
	b.token = "good"
	require.Equal(t, http.StatusCreated, b.do(t, "POST", "/v1/jobs", `{"command": ["true"]}`).status)
	r := b.do(t, "POST", "/v1/jobs", `{"command": ["true"]}`)
	require.Equal(t, http.StatusTooManyRequests, r.status, "body: %s", r.body)
	require.Equal(t, "60", r.header.Get("Retry-After"))
}

func TestDefaultClientKey(t *testing.T) {
	t.Parallel()
	req := func(remote, token string) *http.Request {
		r, err := http.NewRequestWithContext(context.Background(), "POST", "/v1/jobs", nil)
		require.NoError(t, err)
		r.RemoteAddr = remote
		r.Header.Set("Authorization", "Bearer sent-but-not-checked")
		if token != "" {
			r = withPrincipal(r, token)
		}
		return r
	}
	require.Equal(t, "ip:192.0.2.7", DefaultClientKey(req("192.0.2.7:4100", "")), "a token the route did not check is not a client")
	require.Equal(t, DefaultClientKey(req("192.0.2.7:1", "")), DefaultClientKey(req("192.0.2.7:2", "")), "ports do not matter")
	require.NotEqual(t, DefaultClientKey(req("192.0.2.7:1", "")), DefaultClientKey(req("192.0.2.8:1", "")))
	require.Equal(t, DefaultClientKey(req("[2001:db8:1:2::1]:1", "")), DefaultClientKey(req("[2001:db8:1:2:ffff::9]:1", "")),
		"one /64 is one client")
	require.NotEqual(t, DefaultClientKey(req("[2001:db8:1:2::1]:1", "")), DefaultClientKey(req("[2001:db8:1:3::1]:1", "")))
	a, b := DefaultClientKey(req("192.0.2.7:1", "token-a")), DefaultClientKey(req("192.0.2.7:1", "token-b"))
	require.NotEqual(t, a, b, "tokens are clients, whatever their address")
	require.Equal(t, a, DefaultClientKey(req("198.51.100.1:1", "token-a")))
	require.NotContains(t, a, "token-a", "the key does not hold the token")
}

// The limiter forgets clients whose allowance is whole again, so its memory follows the
// clients active within a window, not every client ever seen.
func TestSubmitLimiterForgetsIdleClients(t *testing.T) {
	t.Parallel()
	l := newSubmitLimiter(&model.RateLimit{Rate: 10, Per: time.Second})
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range minSweep - 1 {
		ok, _ := l.take(fmt.Sprint("old-", i), t0)
		require.True(t, ok)
	}
	require.Len(t, l.tats, minSweep-1)
	ok, _ := l.take("new", t0.Add(time.Second))
	require.True(t, ok)
	require.Len(t, l.tats, 1, "the idle clients were swept")
}
