package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/auth"
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

// TestSubmitRateCountsAuthenticatedClients: with authentication on, a request with a wrong
// token is a 401 and spends nothing of anyone's turns; each token, static or stored, is a
// client of its own, whatever its name.
func TestSubmitRateCountsAuthenticatedClients(t *testing.T) {
	t.Parallel()
	b := setupOn(t, clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), nil, func(c *Config) {
		c.Open = false
		c.UserToken = "good-static-secret"
		c.SubmitRate = &model.RateLimit{Rate: 1, Per: time.Minute}
	})
	for i := range 3 {
		r := b.doCtx(t, t.Context(), "POST", "/v1/jobs", `{"command": ["true"]}`, http.Header{"Authorization": {fmt.Sprintf("Bearer bad-%d", i)}})
		require.Equal(t, http.StatusUnauthorized, r.status, "body: %s", r.body)
	}
	static := b.as("good-static-secret")
	require.Equal(t, http.StatusCreated, static.do(t, "POST", "/v1/jobs", `{"command": ["true"]}`).status)
	r := static.do(t, "POST", "/v1/jobs", `{"command": ["true"]}`)
	require.Equal(t, http.StatusTooManyRequests, r.status, "body: %s", r.body)
	require.Equal(t, "60", r.header.Get("Retry-After"))

	first, second := b.as(b.mint(t, "ci", model.RoleOperator, nil, "")), b.as(b.mint(t, "ci", model.RoleOperator, nil, ""))
	require.Equal(t, http.StatusCreated, first.do(t, "POST", "/v1/jobs", `{"command": ["true"]}`).status,
		"a stored token is not held back by the static one")
	require.Equal(t, http.StatusTooManyRequests, first.do(t, "POST", "/v1/jobs", `{"command": ["true"]}`).status)
	require.Equal(t, http.StatusCreated, second.do(t, "POST", "/v1/jobs", `{"command": ["true"]}`).status,
		"another token of the same name is another client")
}

func TestDefaultClientKey(t *testing.T) {
	t.Parallel()
	req := func(remote string, p *auth.Principal) *http.Request {
		r, err := http.NewRequestWithContext(context.Background(), "POST", "/v1/jobs", nil)
		require.NoError(t, err)
		r.RemoteAddr = remote
		r.Header.Set("Authorization", "Bearer sent-but-not-checked")
		if p != nil {
			r = r.WithContext(auth.NewContext(r.Context(), p))
		}
		return r
	}
	require.Equal(t, "ip:192.0.2.7", DefaultClientKey(req("192.0.2.7:4100", nil)), "a token the route did not check is not a client")
	require.Equal(t, DefaultClientKey(req("192.0.2.7:1", nil)), DefaultClientKey(req("192.0.2.7:2", nil)), "ports do not matter")
	require.NotEqual(t, DefaultClientKey(req("192.0.2.7:1", nil)), DefaultClientKey(req("192.0.2.8:1", nil)))
	require.Equal(t, DefaultClientKey(req("[2001:db8:1:2::1]:1", nil)), DefaultClientKey(req("[2001:db8:1:2:ffff::9]:1", nil)),
		"one /64 is one client")
	require.NotEqual(t, DefaultClientKey(req("[2001:db8:1:2::1]:1", nil)), DefaultClientKey(req("[2001:db8:1:3::1]:1", nil)))

	tokA := &auth.Principal{TokenID: "01TOKENA", Name: "ci", Role: model.RoleOperator}
	tokB := &auth.Principal{TokenID: "01TOKENB", Name: "ci", Role: model.RoleOperator}
	a, b := DefaultClientKey(req("192.0.2.7:1", tokA)), DefaultClientKey(req("192.0.2.7:1", tokB))
	require.NotEqual(t, a, b, "tokens are clients by id, whatever their address or name")
	require.Equal(t, a, DefaultClientKey(req("198.51.100.1:1", tokA)))
	require.NotEqual(t, DefaultClientKey(req("192.0.2.7:1", nil)), a)

	admin := &auth.Principal{Name: staticAdminName, Role: model.RoleAdmin}
	worker := &auth.Principal{Name: staticWorkerName, Role: model.RoleWorker}
	require.Equal(t, DefaultClientKey(req("192.0.2.7:1", admin)), DefaultClientKey(req("198.51.100.1:1", admin)), "a static token is one client")
	require.NotEqual(t, DefaultClientKey(req("192.0.2.7:1", admin)), DefaultClientKey(req("192.0.2.7:1", worker)))
	require.NotEqual(t, DefaultClientKey(req("192.0.2.7:1", admin)), DefaultClientKey(req("192.0.2.7:1", nil)))

	open := openPrincipal()
	require.Equal(t, DefaultClientKey(req("192.0.2.7:1", nil)), DefaultClientKey(req("192.0.2.7:1", open)),
		"without authentication every request is one principal: the address tells clients apart")
	require.NotEqual(t, DefaultClientKey(req("192.0.2.7:1", open)), DefaultClientKey(req("192.0.2.8:1", open)))
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
