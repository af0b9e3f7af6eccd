package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

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
