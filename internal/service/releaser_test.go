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

func TestReleaser(t *testing.T) {
	t.Parallel()
	const idle = 5 * time.Minute

	type testBundle struct {
		clk        *clock.Fake
		store      store.Store
		wake       *wakeup
		released   *recorder[[]*model.Run]
		turns      atomic.Int32
		rateQueues atomic.Bool
		job        *model.Job
	}

	// setup builds a releaser on a fresh SQLite store and a fake clock at t0, its signals
	// live; mods change its config. It is started by start.
	setup := func(t *testing.T, mods ...func(*ReleaserConfig)) (*Releaser, *testBundle) {
		t.Helper()
		st := openStore(t)
		b := &testBundle{clk: clock.NewFake(t0), store: st, wake: newWakeup(), released: &recorder[[]*model.Run]{}}
		b.job = newJob(t, st, "rated")
		cfg := ReleaserConfig{Store: st, Clock: b.clk, Logger: discard, Wake: b.wake.Wait, IdleWait: idle,
			RateQueues: b.rateQueues.Load,
			OnReleased: b.released.add,
			OnTurn:     func() { b.turns.Add(1) }}
		for _, m := range mods {
			m(&cfg)
		}
		r := NewReleaser(cfg)
		r.TestSignals.Released.Init(t)
		r.TestSignals.Turn.Init(t)
		r.TestSignals.Slept.Init(t)
		r.TestSignals.Failed.Init(t)
		return r, b
	}
	start := func(t *testing.T, r *Releaser) {
		t.Helper()
		require.NoError(t, r.Start(context.Background()))
		t.Cleanup(r.Stop)
	}
	// rated stores n runs at now under a key rate limit of 2 a minute: two start at once,
	// the third waits until now+30s.
	rated := func(t *testing.T, b *testBundle, now time.Time, n int) []*model.Run {
		t.Helper()
		var runs []*model.Run
		for range n {
			runs = append(runs, newRun(t, b.store, b.job, now, now, func(r *model.Run) {
				r.Concurrency = &model.RunConcurrency{Key: "key:default:api", Policy: model.ConcurrencyAllow,
					Rate: &model.RateLimit{Rate: 2, Per: time.Minute}}
			}))
		}
		return runs
	}

	t.Run("sleeps until a held run's turn and releases it then", func(t *testing.T) {
		t.Parallel()
		r, b := setup(t)
		runs := rated(t, b, t0, 3)
		require.Equal(t, model.PendingRateLimited, runs[2].PendingCode)
		start(t, r)

		turn := t0.Add(30 * time.Second)
		require.Equal(t, turn, r.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(turn)
		released := r.TestSignals.Released.WaitOrTimeout()
		require.Len(t, released, 1)
		require.Equal(t, runs[2].ID, released[0].ID)
		require.Equal(t, [][]*model.Run{released}, b.released.all())
		require.Equal(t, model.RunQueued, getRun(t, b.store, runs[2].ID).Status)
		require.Equal(t, turn.Add(idle), r.TestSignals.Slept.WaitOrTimeout(), "nothing held any more")
		r.TestSignals.Turn.RequireEmpty()
	})

	t.Run("woken early by a new held run", func(t *testing.T) {
		t.Parallel()
		r, b := setup(t)
		start(t, r)
		require.Equal(t, t0.Add(idle), r.TestSignals.Slept.WaitOrTimeout())
		rated(t, b, t0, 3)
		b.wake.Notify()
		require.Equal(t, t0.Add(30*time.Second), r.TestSignals.Slept.WaitOrTimeout())
	})

	t.Run("watches no queue turns while no queue is rate-limited", func(t *testing.T) {
		t.Parallel()
		fake := &fakeStore{nextQueueTurn: func(context.Context, *store.NextQueueTurnParams) (time.Time, bool, error) {
			return t0.Add(time.Second), true, nil
		}}
		r, b := setup(t, func(c *ReleaserConfig) { c.Store = fake })
		start(t, r)
		require.Equal(t, t0.Add(idle), r.TestSignals.Slept.WaitOrTimeout())
		b.rateQueues.Store(true)
		b.wake.Notify()
		require.Equal(t, t0.Add(time.Second), r.TestSignals.Slept.WaitOrTimeout())
	})

	t.Run("retries after a store error", func(t *testing.T) {
		t.Parallel()
		fake := &fakeStore{nextRelease: failOnce(func(context.Context) (time.Time, bool, error) {
			return t0.Add(time.Minute), true, nil
		})}
		r, b := setup(t, func(c *ReleaserConfig) { c.Store = fake })
		start(t, r)
		require.ErrorIs(t, r.TestSignals.Failed.WaitOrTimeout(), errOutage)
		require.Equal(t, t0.Add(DefaultRetryDelay), r.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(t0.Add(DefaultRetryDelay))
		require.Equal(t, t0.Add(time.Minute), r.TestSignals.Slept.WaitOrTimeout())
	})

	// rateQueue limits the default queue to one run every 10s and has its turn at t0 taken
	// by a lease of the first of two runs: the next turn is at t0+10s.
	rateQueue := func(t *testing.T, b *testBundle) {
		t.Helper()
		_, err := b.store.UpdateQueue(context.Background(), &store.UpdateQueueParams{Name: model.DefaultQueue,
			RateLimit: &model.RateLimit{Rate: 1, Per: 10 * time.Second}, Now: t0})
		require.NoError(t, err)
		b.rateQueues.Store(true)
		newRun(t, b.store, b.job, t0, t0)
		newRun(t, b.store, b.job, t0, t0)
		got, err := b.store.LeaseRuns(context.Background(), &store.LeaseRunsParams{WorkerID: "w", Max: 5, LeaseTTL: time.Minute, Now: t0})
		require.NoError(t, err)
		require.Len(t, got.Leases, 1, "one turn now")
	}

	t.Run("tells of a rate-limited queue's next turn", func(t *testing.T) {
		t.Parallel()
		r, b := setup(t)
		rateQueue(t, b)
		start(t, r)

		turn := t0.Add(10 * time.Second)
		require.Equal(t, turn, r.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(turn)
		require.Equal(t, turn, r.TestSignals.Turn.WaitOrTimeout())
		require.Equal(t, turn.Add(idle), r.TestSignals.Slept.WaitOrTimeout(), "told once")
		require.Equal(t, int32(1), b.turns.Load())
	})

	t.Run("tells of a turn that came while it was not looking", func(t *testing.T) {
		t.Parallel()
		r, b := setup(t)
		b.rateQueues.Store(true)
		start(t, r)
		require.Equal(t, t0.Add(idle), r.TestSignals.Slept.WaitOrTimeout(), "no queue turn to wait for")
		// A lease takes the queue's turn and wakes the releaser, which gets to run only once
		// the next turn has come (a busy machine).
		rateQueue(t, b)
		turn := t0.Add(10 * time.Second)
		b.clk.Set(turn.Add(time.Second))
		b.wake.Notify()
		require.Equal(t, turn, r.TestSignals.Turn.WaitOrTimeout())
		require.Equal(t, turn.Add(time.Second).Add(idle), r.TestSignals.Slept.WaitOrTimeout(), "told once")
		require.Equal(t, int32(1), b.turns.Load())
	})

	t.Run("a failed round does not lose a queue's turn", func(t *testing.T) {
		t.Parallel()
		turn := t0.Add(10 * time.Second)
		var calls atomic.Int32
		fake := &fakeStore{nextQueueTurn: func(_ context.Context, p *store.NextQueueTurnParams) (time.Time, bool, error) {
			if calls.Add(1) == 2 {
				return time.Time{}, false, errOutage
			}
			if turn.After(p.After) {
				return turn, true, nil
			}
			return turn.Add(10 * time.Second), true, nil // the turn after it, once taken
		}}
		r, b := setup(t, func(c *ReleaserConfig) { c.Store = fake })
		b.rateQueues.Store(true)
		start(t, r)
		require.Equal(t, turn, r.TestSignals.Slept.WaitOrTimeout())
		b.wake.Notify() // woken before the turn, say by a lease: this round fails
		require.ErrorIs(t, r.TestSignals.Failed.WaitOrTimeout(), errOutage)
		require.Equal(t, t0.Add(DefaultRetryDelay), r.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(turn) // the pause and the turn are over at once
		require.Equal(t, turn, r.TestSignals.Turn.WaitOrTimeout(), "the round after the pause tells of the turn")
		require.Equal(t, turn.Add(10*time.Second), r.TestSignals.Slept.WaitOrTimeout())
		require.Equal(t, int32(1), b.turns.Load())
	})

	t.Run("Stop ends it", func(t *testing.T) {
		t.Parallel()
		fake := &fakeStore{}
		r, b := setup(t, func(c *ReleaserConfig) { c.Store = fake })
		start(t, r)
		require.Equal(t, t0.Add(idle), r.TestSignals.Slept.WaitOrTimeout())
		r.Stop()
		calls := fake.calls.Load()
		b.wake.Notify()
		b.clk.Set(t0.Add(idle))
		require.Equal(t, calls, fake.calls.Load(), "no store call after Stop")
		require.ErrorIs(t, r.Start(context.Background()), ErrStopped)
	})
}
