package api

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

// fullDisk is a SQLite store whose disk can be made full: then its writes of jobs and its
// write probe fail as the engine's classification makes them fail (model.ErrUnavailable),
// or, with slow set, its probe runs out of time.
type fullDisk struct {
	*sqlite.Store
	full, slow atomic.Bool
	probes     atomic.Int32
}

var errFull = model.Unavailable("disk full", errors.New("database or disk is full (13)"))

func (s *fullDisk) CreateJobs(ctx context.Context, p *store.CreateJobsParams) ([]store.CreateJobResult, error) {
	if s.full.Load() {
		return nil, errFull
	}
	return s.Store.CreateJobs(ctx, p)
}

func (s *fullDisk) ProbeWrite(ctx context.Context) error {
	s.probes.Add(1)
	switch {
	case s.slow.Load():
		return context.DeadlineExceeded
	case s.full.Load():
		return errFull
	}
	return s.Store.ProbeWrite(ctx)
}

// TestStoreUnavailable: a full disk answers writes 503 with Retry-After and a problem that
// says so, and turns /readyz not ready until writes work again; a slow probe does not.
func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	var st *fullDisk
	b := setupStore(t, clk, func(s *sqlite.Store) store.Store { st = &fullDisk{Store: s}; return st }, nil)
	ready := func() *response {
		t.Helper()
		return b.do(t, "GET", "/readyz", nil)
	}
	require.Equal(t, http.StatusOK, ready().status)
	require.EqualValues(t, 1, st.probes.Load(), "the first check probes")
	require.Equal(t, http.StatusOK, ready().status)
	require.EqualValues(t, 1, st.probes.Load(), "probes are spaced")

	st.full.Store(true)
	r := b.do(t, "POST", "/v1/jobs", `{"command": ["true"]}`)
	require.Equal(t, http.StatusServiceUnavailable, r.status, "body: %s", r.body)
	require.Equal(t, "2", r.header.Get("Retry-After"))
	require.Contains(t, r.problem(t).Detail, "the store is unavailable (disk full); nothing was done")
	jobs, _ := b.counts(t)
	require.Zero(t, jobs)

	r = ready()
	require.Equal(t, http.StatusServiceUnavailable, r.status, "a failed write makes the server not ready at once")
	require.Equal(t, "the store cannot take writes (disk full)", r.problem(t).Detail)
	require.NotEmpty(t, r.header.Get("Retry-After"))

	clk.Set(start.Add(time.Second))
	require.Equal(t, http.StatusServiceUnavailable, ready().status)
	require.EqualValues(t, 2, st.probes.Load(), "after a failure the probe runs every second")

	// Room again: the probe passes, but the failed write holds until a write succeeds (or
	// the failure is old).
	st.full.Store(false)
	clk.Set(start.Add(2 * time.Second))
	require.Equal(t, http.StatusServiceUnavailable, ready().status)
	require.EqualValues(t, 3, st.probes.Load())
	require.Equal(t, http.StatusCreated, b.do(t, "POST", "/v1/jobs", `{"command": ["true"]}`).status)
	require.Equal(t, http.StatusOK, ready().status)

	// A failure that is not followed by another goes stale.
	st.full.Store(true)
	require.Equal(t, http.StatusServiceUnavailable, b.do(t, "POST", "/v1/jobs", `{"command": ["true"]}`).status)
	st.full.Store(false)
	clk.Set(start.Add(2*time.Second + failWindow))
	require.Equal(t, http.StatusOK, ready().status)

	// A probe that runs out of time says nothing about the disk.
	st.slow.Store(true)
	clk.Set(start.Add(time.Minute))
	require.Equal(t, http.StatusOK, ready().status)
	require.EqualValues(t, 5, st.probes.Load())
}
