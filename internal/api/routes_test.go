package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("stint_up 1\n"))
	})
	b := setup(t, func(c *Config) {
		c.UserToken, c.WorkerToken, c.Metrics = "user-secret", "worker-secret", metrics
	})
	register := `{"id": "w1", "capacity": {"slots": 1}, "commands": true}`
	tests := []struct {
		name, token, method, path, body string
		status                          int
	}{
		{"healthz is open", "", "GET", "/healthz", "", 200},
		{"readyz is open", "", "GET", "/readyz", "", 200},
		{"metrics is open", "", "GET", "/metrics", "", 200},
		{"openapi is open", "", "GET", "/v1/openapi.json", "", 200},
		{"user route without token", "", "GET", "/v1/jobs", "", 401},
		{"user route with a bad token", "nope", "GET", "/v1/jobs", "", 401},
		{"user route with the worker token", "worker-secret", "GET", "/v1/jobs", "", 401},
		{"user route with the user token", "user-secret", "GET", "/v1/jobs", "", 200},
		{"worker listing is a user route", "worker-secret", "GET", "/v1/workers", "", 401},
		{"protocol without token", "", "POST", "/v1/workers/register", register, 401},
		{"protocol with the worker token", "worker-secret", "POST", "/v1/workers/register", register, 200},
		{"protocol with the user token", "user-secret", "POST", "/v1/workers/register", register, 200},
		{"bad input is not checked before auth", "", "POST", "/v1/jobs", `{"nope": 1}`, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := *b
			c.token = tt.token
			var body any
			if tt.body != "" {
				body = tt.body
			}
			r := c.do(t, tt.method, tt.path, body)
			require.Equal(t, tt.status, r.status, "body: %s", r.body)
			if tt.status == 401 {
				r.problem(t)
				require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
			}
		})
	}
	c := *b
	r := c.do(t, "GET", "/metrics", nil)
	require.Equal(t, "stint_up 1\n", string(r.body))
	r = c.do(t, "GET", "/v1/openapi.json", nil)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.Equal(t, openAPIDocument, r.body)

	// With only a user token, the protocol takes that token.
	u := setup(t, func(c *Config) { c.UserToken = "user-secret" })
	r = u.do(t, "POST", "/v1/workers/register", register)
	require.Equal(t, http.StatusUnauthorized, r.status)
	u.token = "user-secret"
	r = u.do(t, "POST", "/v1/workers/register", register)
	require.Equal(t, http.StatusOK, r.status)
}

func TestServiceRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)

	r := b.do(t, "GET", "/healthz", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"status": "ok"}`, string(r.body))
	r = b.do(t, "GET", "/readyz", nil)
	require.Equal(t, http.StatusOK, r.status)
	r = b.do(t, "GET", "/metrics", nil)
	require.Equal(t, http.StatusNotFound, r.status, "no metrics handler configured")
	r.problem(t)

	// Unknown routes and methods answer with problem documents.
	r = b.do(t, "GET", "/v1/nope", nil)
	require.Equal(t, http.StatusNotFound, r.status)
	r.problem(t)
	r = b.do(t, "PUT", "/v1/jobs", `{}`)
	require.Equal(t, http.StatusMethodNotAllowed, r.status)
	r.problem(t)
	require.Contains(t, r.header.Get("Allow"), "POST")

	// Request ids: kept when sane, made up otherwise.
	r = b.doCtx(t, t.Context(), "GET", "/healthz", nil, http.Header{RequestIDHeader: {"abc-123"}})
	require.Equal(t, "abc-123", r.header.Get(RequestIDHeader))
	r = b.doCtx(t, t.Context(), "GET", "/healthz", nil, http.Header{RequestIDHeader: {"bad id"}})
	require.Len(t, r.header.Get(RequestIDHeader), 26)
	r = b.do(t, "GET", "/v1/nope", nil)
	require.NotEmpty(t, r.header.Get(RequestIDHeader))
}
