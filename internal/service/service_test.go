package service

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// errOutage is the store error of the tests that make a store call fail.
var errOutage = errors.New("store unreachable")

// discard is the tests' logger.
var discard = slog.New(slog.DiscardHandler)

// openStore opens a fresh SQLite store in a temporary directory.
func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "stint.db")})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// wakeup is the tests' wake source: Wait returns a channel that the next Notify closes.
type wakeup struct {
	mu sync.Mutex
	ch chan struct{}
}

func newWakeup() *wakeup { return &wakeup{ch: make(chan struct{})} }

func (w *wakeup) Wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

func (w *wakeup) Notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.ch)
	w.ch = make(chan struct{})
}

// recorder collects what a service hands to a callback, for the test goroutine to read
// once a signal said the callback ran.
type recorder[T any] struct {
	mu  sync.Mutex
	got []T
}

func (r *recorder[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, v)
}

func (r *recorder[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.got...)
}

// newJob stores a noop job named name; mods change it first.
func newJob(t *testing.T, st store.Store, name string, mods ...func(*model.Job)) *model.Job {
	t.Helper()
	j := &model.Job{
		ID: id.New(t0), Namespace: model.DefaultNamespace, Name: name, Enabled: true,
		Spec:      model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Retry: model.RetryPolicy{MaxAttempts: 1}},
		CreatedAt: t0, UpdatedAt: t0,
	}
	for _, m := range mods {
		m(j)
	}
	res, err := st.CreateJobs(context.Background(), &store.CreateJobsParams{Jobs: []store.NewJob{{Job: j}}, Now: t0})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	return res[0].Job
}

// newRun stores a run of j due at due, created at now (queued when due, else scheduled);
// mods change it first.
func newRun(t *testing.T, st store.Store, j *model.Job, due, now time.Time, mods ...func(*model.Run)) *model.Run {
	t.Helper()
	r := &model.Run{
		ID: id.New(now), JobID: j.ID, JobName: j.Name, Namespace: j.Namespace, Queue: j.Spec.Queue,
		Trigger: model.TriggerSubmit, ScheduledFor: due, CreatedAt: now, MaxAttempts: j.Spec.Retry.MaxAttempts,
	}
	scheduler.Release(r, now)
	for _, m := range mods {
		m(r)
	}
	res, err := st.CreateRuns(context.Background(), &store.CreateRunsParams{Runs: []*model.Run{r}, Now: now})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	return res[0].Run
}

// getRun reads a run.
func getRun(t *testing.T, st store.Store, runID string) *model.Run {
	t.Helper()
	r, err := st.GetRun(context.Background(), &store.GetRunParams{ID: runID})
	require.NoError(t, err)
	return r
}

// fakeStore is a store of func fields, for the tests that need a store call to fail; it
// satisfies every service's store interface. A nil field answers zero values.
type fakeStore struct {
	calls atomic.Int64 // calls of any method

	nextDue         func(ctx context.Context) (time.Time, bool, error) // the earliest; NextDue filters by after
	promoteDue      func(ctx context.Context, p *store.PromoteDueParams) (int, error)
	rescueExpired   func(ctx context.Context, p *store.RescueExpiredParams) ([]*model.Run, error)
	resolvePending  func(ctx context.Context, p *store.ResolvePendingParams) ([]*model.Run, error)
	nextLeaseExpiry func(ctx context.Context) (time.Time, bool, error)
	nextRelease     func(ctx context.Context) (time.Time, bool, error)
	releaseDue      func(ctx context.Context, p *store.ReleaseDueParams) ([]*model.Run, error)
	nextQueueTurn   func(ctx context.Context, p *store.NextQueueTurnParams) (time.Time, bool, error)
	nextFire        func(ctx context.Context) (time.Time, bool, error)
}

func (f *fakeStore) NextDue(ctx context.Context, after time.Time) (time.Time, bool, error) {
	f.calls.Add(1)
	if f.nextDue == nil {
		return time.Time{}, false, nil
	}
	t, ok, err := f.nextDue(ctx)
	if err != nil || !ok || !t.After(after) {
		return time.Time{}, false, err
	}
	return t, true, nil
}

func (f *fakeStore) PromoteDue(ctx context.Context, p *store.PromoteDueParams) (int, error) {
	f.calls.Add(1)
	if f.promoteDue == nil {
		return 0, nil
	}
	return f.promoteDue(ctx, p)
}

func (f *fakeStore) RescueExpired(ctx context.Context, p *store.RescueExpiredParams) ([]*model.Run, error) {
	f.calls.Add(1)
	if f.rescueExpired == nil {
		return nil, nil
	}
	return f.rescueExpired(ctx, p)
}

func (f *fakeStore) ResolvePending(ctx context.Context, p *store.ResolvePendingParams) ([]*model.Run, error) {
	f.calls.Add(1)
	if f.resolvePending == nil {
		return nil, nil
	}
	return f.resolvePending(ctx, p)
}

func (f *fakeStore) NextLeaseExpiry(ctx context.Context) (time.Time, bool, error) {
	f.calls.Add(1)
	if f.nextLeaseExpiry == nil {
		return time.Time{}, false, nil
	}
	return f.nextLeaseExpiry(ctx)
}

func (f *fakeStore) NextRelease(ctx context.Context) (time.Time, bool, error) {
	f.calls.Add(1)
	if f.nextRelease == nil {
		return time.Time{}, false, nil
	}
	return f.nextRelease(ctx)
}

func (f *fakeStore) ReleaseDue(ctx context.Context, p *store.ReleaseDueParams) ([]*model.Run, error) {
	f.calls.Add(1)
	if f.releaseDue == nil {
		return nil, nil
	}
	return f.releaseDue(ctx, p)
}

func (f *fakeStore) NextQueueTurn(ctx context.Context, p *store.NextQueueTurnParams) (time.Time, bool, error) {
	f.calls.Add(1)
	if f.nextQueueTurn == nil {
		return time.Time{}, false, nil
	}
	return f.nextQueueTurn(ctx, p)
}

// The cron firer's other store methods find nothing due.

func (f *fakeStore) DueJobs(context.Context, *store.DueJobsParams) ([]*model.Job, error) {
	f.calls.Add(1)
	return nil, nil
}

func (f *fakeStore) FireJobs(context.Context, *store.FireJobsParams) ([]store.FireResult, error) {
	f.calls.Add(1)
	return nil, nil
}

// NextFire ignores after: the tests that use the fake set no lead.
func (f *fakeStore) NextFire(ctx context.Context, _ *store.NextFireParams) (time.Time, bool, error) {
	f.calls.Add(1)
	if f.nextFire == nil {
		return time.Time{}, false, nil
	}
	return f.nextFire(ctx)
}

func (f *fakeStore) DuePipelines(context.Context, *store.DuePipelinesParams) ([]*model.Pipeline, error) {
	f.calls.Add(1)
	return nil, nil
}

func (f *fakeStore) SetPipelineNextFire(context.Context, *store.SetPipelineNextFireParams) (bool, error) {
	f.calls.Add(1)
	return true, nil
}

// failOnce makes the first call of a store method fail with errOutage and passes the rest
// to next.
func failOnce[T any](next func(context.Context) (T, bool, error)) func(context.Context) (T, bool, error) {
	var failed atomic.Bool
	return func(ctx context.Context) (T, bool, error) {
		if !failed.Swap(true) {
			var zero T
			return zero, false, errOutage
		}
		return next(ctx)
	}
}

func TestRunner(t *testing.T) {
	t.Parallel()
	// loop blocks until its context ends, counting its starts and ends.
	type counts struct{ started, ended atomic.Int32 }
	loop := func(c *counts) func(context.Context) {
		return func(ctx context.Context) {
			c.started.Add(1)
			<-ctx.Done()
			c.ended.Add(1)
		}
	}
	t.Run("Stop ends the goroutine and waits for it", func(t *testing.T) {
		t.Parallel()
		var c counts
		r := runner{name: "test"}
		require.NoError(t, r.start(context.Background(), loop(&c)))
		r.Stop()
		require.Equal(t, int32(1), c.ended.Load(), "ended before Stop returned")
		r.Stop() // idempotent
	})
	t.Run("concurrent Stops all wait", func(t *testing.T) {
		t.Parallel()
		var c counts
		r := runner{name: "test"}
		require.NoError(t, r.start(context.Background(), loop(&c)))
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				r.Stop()
				require.Equal(t, int32(1), c.ended.Load())
			})
		}
		wg.Wait()
	})
	t.Run("Start twice fails", func(t *testing.T) {
		t.Parallel()
		var c counts
		r := runner{name: "test"}
		require.NoError(t, r.start(context.Background(), loop(&c)))
		t.Cleanup(r.Stop)
		require.ErrorIs(t, r.start(context.Background(), loop(&c)), ErrStarted)
	})
	t.Run("Start after Stop fails", func(t *testing.T) {
		t.Parallel()
		var c counts
		r := runner{name: "test"}
		require.NoError(t, r.start(context.Background(), loop(&c)))
		r.Stop()
		require.ErrorIs(t, r.start(context.Background(), loop(&c)), ErrStopped)
		require.Equal(t, int32(1), c.started.Load())
	})
	t.Run("Stop before Start", func(t *testing.T) {
		t.Parallel()
		var c counts
		r := runner{name: "test"}
		r.Stop()
		require.ErrorIs(t, r.start(context.Background(), loop(&c)), ErrStopped)
	})
	t.Run("the end of Start's context ends the loop", func(t *testing.T) {
		t.Parallel()
		var c counts
		r := runner{name: "test"}
		ctx, cancel := context.WithCancel(context.Background())
		require.NoError(t, r.start(ctx, loop(&c)))
		cancel()
		<-r.done
		require.Equal(t, int32(1), c.ended.Load())
		r.Stop()
	})
}
