package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

// testBundle is a server on a real engine and SQLite store.
type testBundle struct {
	srv     *httptest.Server
	handler http.Handler // what srv serves
	eng     *engine.Engine
	store   store.Store
	// token is sent as the bearer token when set.
	token string
}

// setup starts an API over a fresh SQLite store; mods change its config.
func setup(t *testing.T, mods ...func(*Config)) *testBundle {
	t.Helper()
	return setupWrapped(t, nil, mods...)
}

// setupWrapped is setup with the API's handler wrapped by wrap (when not nil), for tests that
// watch requests enter and leave the server.
func setupWrapped(t *testing.T, wrap func(http.Handler) http.Handler, mods ...func(*Config)) *testBundle {
	t.Helper()
	return setupOn(t, clock.Real{}, wrap, mods...)
}

// setupOn is setupWrapped with the engine (and so the API) reading clk.
func setupOn(t *testing.T, clk clock.Clock, wrap func(http.Handler) http.Handler, mods ...func(*Config)) *testBundle {
	t.Helper()
	return setupStore(t, clk, nil, wrap, mods...)
}

// setupStore is setupOn with the SQLite store wrapped by wrapStore (when not nil), for tests
// that make the store fail.
func setupStore(t testing.TB, clk clock.Clock, wrapStore func(*sqlite.Store) store.Store, wrap func(http.Handler) http.Handler, mods ...func(*Config)) *testBundle {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	sq, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "stint.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sq.Close() })
	var st store.Store = sq
	if wrapStore != nil {
		st = wrapStore(sq)
	}
	eng := engine.New(engine.Config{Store: st, Logger: log, Clock: clk})
	require.NoError(t, eng.Start(ctx))
	t.Cleanup(eng.Stop)
	// Authentication is off unless a test turns it on (Open false): most tests are about
	// something else, and auth_test.go walks every route with every role.
	cfg := Config{Engine: eng, Logger: log, Open: true}
	for _, m := range mods {
		m(&cfg)
	}
	a, err := New(cfg)
	require.NoError(t, err)
	h := a.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testBundle{srv: srv, handler: h, eng: eng, store: st}
}

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

// problem decodes a problem answer, checking its content type.
func (r *response) problem(t *testing.T) *apitype.Problem {
	t.Helper()
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), "body: %s", r.body)
	var p apitype.Problem
	require.NoError(t, json.Unmarshal(r.body, &p))
	require.Equal(t, r.status, p.Status)
	return &p
}

// fields lists the fields a problem names.
func (r *response) fields(t *testing.T) []string {
	t.Helper()
	return fieldNames(r.problem(t).Errors)
}

func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "body: %s", r.body)
}

// do sends a request; body is a string of raw JSON, nil, or a value to marshal.
func (b *testBundle) do(t *testing.T, method, path string, body any) *response {
	t.Helper()
	return b.doCtx(t, context.Background(), method, path, body, nil)
}

func (b *testBundle) doCtx(t *testing.T, ctx context.Context, method, path string, body any, header http.Header) *response {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.srv.URL+path, rd)
	require.NoError(t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// createJob posts a spec and requires a 201.
func (b *testBundle) createJob(t *testing.T, spec string) apitype.CreateJobResponse {
	t.Helper()
	r := b.do(t, "POST", "/v1/jobs", spec)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var out apitype.CreateJobResponse
	r.decode(t, &out)
	return out
}

// counts returns how many jobs and runs exist, to check that a request changed nothing.
func (b *testBundle) counts(t *testing.T) (jobs, runs int) {
	t.Helper()
	jl, err := b.store.ListJobs(t.Context(), &store.ListJobsParams{Limit: 1000})
	require.NoError(t, err)
	rl, err := b.store.ListRuns(t.Context(), &store.ListRunsParams{Limit: 1000})
	require.NoError(t, err)
	return len(jl.Jobs), len(rl.Runs)
}

// getRun fetches a run.
func (b *testBundle) getRun(t *testing.T, id string) apitype.Run {
	t.Helper()
	r := b.do(t, "GET", "/v1/runs/"+id, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var run apitype.Run
	r.decode(t, &run)
	return run
}

// register registers a command worker.
func (b *testBundle) register(t *testing.T, id string) {
	t.Helper()
	r := b.do(t, "POST", "/v1/workers/register", apitype.RegisterRequest{
		ID: id, Capacity: apitype.Capacity{CPU: 4, MemoryMB: 4096, Slots: 4}, Commands: true,
	})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
}

// lease asks for up to max runs without waiting.
func (b *testBundle) lease(t *testing.T, workerID string, max int) apitype.LeaseResponse {
	t.Helper()
	r := b.do(t, "POST", "/v1/workers/"+workerID+"/lease", `{"max": `+itoa(max)+`, "wait": "0s"}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var out apitype.LeaseResponse
	r.decode(t, &out)
	return out
}

// complete ends an attempt and returns the result.
func (b *testBundle) complete(t *testing.T, c apitype.Completion) apitype.CompletionResult {
	t.Helper()
	r := b.do(t, "POST", "/v1/attempts/complete", apitype.CompleteRequest{Completions: []apitype.Completion{c}})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var out apitype.CompleteResponse
	r.decode(t, &out)
	require.Len(t, out.Results, 1)
	return out.Results[0]
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// watch wraps a handler to signal when a request whose path ends with suffix enters and
// leaves it.
func watch(suffix string, entered, left chan<- struct{}) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, suffix) {
				next.ServeHTTP(w, r)
				return
			}
			entered <- struct{}{}
			defer func() { left <- struct{}{} }()
			next.ServeHTTP(w, r)
		})
	}
}

// within waits for ch, failing the test after d.
func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// defLim returns the default limits, for tests of the validation functions.
func defLim() *Limits {
	l := DefaultLimits()
	return &l
}
