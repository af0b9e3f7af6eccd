package service

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// flakyPrune passes PruneRuns to a store after failing its first call.
type flakyPrune struct {
	store.Store
	failed atomic.Bool
}

func (f *flakyPrune) PruneRuns(ctx context.Context, p *store.PruneRunsParams) (int, error) {
	if !f.failed.Swap(true) {
		return 0, errOutage
	}
	return f.Store.PruneRuns(ctx, p)
}

func TestRetention(t *testing.T) {
	t.Parallel()
	const (
		pause    = 100 * time.Millisecond
		interval = time.Minute
	)
	type testBundle struct {
		clk   *clock.Fake
		store store.Store
		job   *model.Job
	}
	// setup builds a retention service that keeps finished runs and silent workers an hour,
	// deleting 2 rows per batch, over a fresh SQLite store; the fake clock reads start.
	setup := func(t *testing.T, start time.Time, mods ...func(*RetentionConfig)) (*Retention, *testBundle) {
		t.Helper()
		st := openStore(t)
		b := &testBundle{clk: clock.NewFake(start), store: st, job: newJob(t, st, "history")}
		cfg := RetentionConfig{Store: st, Clock: b.clk, Logger: discard, Batch: 2, Pause: pause, Interval: interval,
			Policy: RetentionPolicy{Runs: time.Hour, Workers: time.Hour}}
		for _, m := range mods {
			m(&cfg)
		}
		r := NewRetention(cfg)
		r.TestSignals.Pruned.Init(t)
		r.TestSignals.Slept.Init(t)
		r.TestSignals.Failed.Init(t)
		return r, b
	}
	start := func(t *testing.T, r *Retention) {
		t.Helper()
		require.NoError(t, r.Start(context.Background()))
		t.Cleanup(r.Stop)
	}
	// finished stores n runs, one after the other, that succeed at t0.
	finished := func(t *testing.T, b *testBundle, n int) []*model.Run {
		t.Helper()
		var out []*model.Run
		for i := range n {
			created := t0.Add(time.Duration(i-n) * time.Millisecond) // ids in order of creation
			run := newRun(t, b.store, b.job, created, created)
			leased, err := b.store.LeaseRuns(context.Background(), &store.LeaseRunsParams{WorkerID: "w", Max: 1, LeaseTTL: time.Minute, Now: t0})
			require.NoError(t, err)
			require.Len(t, leased.Leases, 1)
			res, err := b.store.CompleteAttempts(context.Background(), &store.CompleteAttemptsParams{Now: t0,
				Completions: []store.Completion{{RunID: run.ID, Token: leased.Leases[0].Token, Status: model.AttemptSucceeded}}})
			require.NoError(t, err)
			require.NoError(t, res[0].Err)
			out = append(out, run)
		}
		return out
	}

	t.Run("deletes a backlog in batches with a pause between them", func(t *testing.T) {
		t.Parallel()
		now := t0.Add(2 * time.Hour)
		r, b := setup(t, now)
		runs := finished(t, b, 3)
		_, _, err := b.store.RegisterWorker(context.Background(), &store.RegisterWorkerParams{ID: "gone", Session: "s", Now: t0})
		require.NoError(t, err)
		start(t, r)

		require.Equal(t, Pruned{Runs: 2, Workers: 1}, r.TestSignals.Pruned.WaitOrTimeout())
		require.Equal(t, now.Add(pause), r.TestSignals.Slept.WaitOrTimeout(), "a full batch: more may be past retention")
		b.clk.Set(now.Add(pause))
		require.Equal(t, Pruned{Runs: 1}, r.TestSignals.Pruned.WaitOrTimeout())
		require.Equal(t, now.Add(pause+interval), r.TestSignals.Slept.WaitOrTimeout(), "nothing left: an interval")
		for _, run := range runs {
			_, err := b.store.GetRun(context.Background(), &store.GetRunParams{ID: run.ID})
			require.ErrorIs(t, err, model.ErrNotFound)
		}
		_, err = b.store.GetWorker(context.Background(), &store.GetWorkerParams{ID: "gone"})
		require.ErrorIs(t, err, model.ErrNotFound)
	})

	t.Run("keeps what is within retention", func(t *testing.T) {
		t.Parallel()
		now := t0.Add(59*time.Minute + 30*time.Second)
		r, b := setup(t, now)
		runs := finished(t, b, 1)
		start(t, r)
		require.Equal(t, Pruned{}, r.TestSignals.Pruned.WaitOrTimeout())
		require.Equal(t, now.Add(interval), r.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(now.Add(interval))
		require.Equal(t, Pruned{Runs: 1}, r.TestSignals.Pruned.WaitOrTimeout(), "an hour after it finished")
		_, err := b.store.GetRun(context.Background(), &store.GetRunParams{ID: runs[0].ID})
		require.ErrorIs(t, err, model.ErrNotFound)
	})

	t.Run("per-job rules and extra kinds", func(t *testing.T) {
		t.Parallel()
		var asked []time.Time
		audit := RetentionRule{Name: "audit", Age: 24 * time.Hour, Prune: func(_ context.Context, before time.Time, limit int) (int, error) {
			asked = append(asked, before)
			require.Equal(t, 10, limit)
			return 1, nil
		}}
		off := RetentionRule{Name: "off", Prune: func(context.Context, time.Time, int) (int, error) {
			t.Error("a rule without an age runs")
			return 0, nil
		}}
		now := t0.Add(time.Minute)
		r, b := setup(t, now, func(c *RetentionConfig) {
			c.Batch = 10
			c.Policy = RetentionPolicy{MaxPerJob: 1, Extra: []RetentionRule{audit, off}}
		})
		runs := finished(t, b, 3)
		start(t, r)
		require.Equal(t, Pruned{Runs: 2, Extra: map[string]int{"audit": 1}}, r.TestSignals.Pruned.WaitOrTimeout())
		require.Equal(t, []time.Time{now.Add(-24 * time.Hour)}, asked)
		require.Equal(t, model.RunSucceeded, getRun(t, b.store, runs[2].ID).Status, "the job's newest stays")
	})

	t.Run("a store error is retried after RetryDelay", func(t *testing.T) {
		t.Parallel()
		now := t0.Add(2 * time.Hour)
		r, b := setup(t, now)
		finished(t, b, 1)
		r.store = &flakyPrune{Store: b.store}
		start(t, r)
		require.ErrorIs(t, r.TestSignals.Failed.WaitOrTimeout(), errOutage)
		require.Equal(t, now.Add(DefaultRetryDelay), r.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(now.Add(DefaultRetryDelay))
		require.Equal(t, Pruned{Runs: 1}, r.TestSignals.Pruned.WaitOrTimeout())
	})
}
