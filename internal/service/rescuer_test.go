package service

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func TestRescuer(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second

	type testBundle struct {
		clk      *clock.Fake
		store    store.Store
		wake     *wakeup
		lost     *recorder[[]*model.Run]
		resolved *recorder[[]*model.Run]
		job      *model.Job
	}

	// setup builds a rescuer on a fresh SQLite store and a fake clock at t0, with a lease
	// TTL of 10s and retry jitter at its midpoint, its signals live; mods change its config. It is
	// started by start.
	setup := func(t *testing.T, mods ...func(*RescuerConfig)) (*Rescuer, *testBundle) {
		t.Helper()
		st := openStore(t)
		b := &testBundle{clk: clock.NewFake(t0), store: st, wake: newWakeup(),
			lost: &recorder[[]*model.Run]{}, resolved: &recorder[[]*model.Run]{}}
		b.job = newJob(t, st, "rescued", func(j *model.Job) {
			// No disruptions: a lost attempt waits out the backoff, which the tests see.
			noDisruptions := 0
			j.Spec.Retry = model.RetryPolicy{MaxAttempts: 2, InitialDelay: 3 * time.Second, MaxDisruptions: &noDisruptions}
		})
		cfg := RescuerConfig{Store: st, Clock: b.clk, Logger: discard, Wake: b.wake.Wait, LeaseTTL: ttl,
			Rand:       func() float64 { return 0.5 },
			OnLost:     b.lost.add,
			OnResolved: b.resolved.add}
		for _, m := range mods {
			m(&cfg)
		}
		r := NewRescuer(cfg)
		r.TestSignals.Rescued.Init(t)
		r.TestSignals.Slept.Init(t)
		r.TestSignals.Failed.Init(t)
		return r, b
	}
	start := func(t *testing.T, r *Rescuer) {
		t.Helper()
		require.NoError(t, r.Start(context.Background()))
		t.Cleanup(r.Stop)
	}
	// leased stores a queued run and leases it to worker w at now for leaseTTL.
	leased := func(t *testing.T, b *testBundle, now time.Time, leaseTTL time.Duration) *model.Run {
		t.Helper()
		run := newRun(t, b.store, b.job, now, now)
		got, err := b.store.LeaseRuns(context.Background(), &store.LeaseRunsParams{WorkerID: "w", Max: 1, LeaseTTL: leaseTTL, Now: now})
		require.NoError(t, err)
		require.Len(t, got.Leases, 1)
		require.Equal(t, run.ID, got.Leases[0].Run.ID)
		return run
	}

	t.Run("sleeps until the earliest lease expiry and rescues then", func(t *testing.T) {
		t.Parallel()
		r, b := setup(t)
		run := leased(t, b, t0, ttl)
		start(t, r)

		require.Empty(t, r.TestSignals.Rescued.WaitOrTimeout(), "nothing expired yet")
		expired := t0.Add(ttl + time.Millisecond)
		require.Equal(t, expired, r.TestSignals.Slept.WaitOrTimeout(), "just past the expiry")
		b.clk.Set(expired)
		rescued := r.TestSignals.Rescued.WaitOrTimeout()
		require.Len(t, rescued, 1)
		require.Equal(t, run.ID, rescued[0].ID)
		require.Equal(t, [][]*model.Run{rescued}, b.lost.all())

		got := getRun(t, b.store, run.ID)
		require.Equal(t, model.RunScheduled, got.Status, "retried after its backoff")
		require.Equal(t, expired.Add(3*time.Second), got.ScheduledFor)
		require.Equal(t, model.AttemptLost, got.Attempts[0].Status)
		require.Equal(t, expired.Add(ttl), r.TestSignals.Slept.WaitOrTimeout(), "no lease left: a TTL")
	})

	t.Run("woken early by a new lease", func(t *testing.T) {
		t.Parallel()
		r, b := setup(t)
		start(t, r)
		require.Empty(t, r.TestSignals.Rescued.WaitOrTimeout())
		require.Equal(t, t0.Add(ttl), r.TestSignals.Slept.WaitOrTimeout())

		run := leased(t, b, t0, 2*time.Second)
		b.wake.Notify()
		require.Empty(t, r.TestSignals.Rescued.WaitOrTimeout())
		require.Equal(t, t0.Add(2*time.Second+time.Millisecond), r.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(t0.Add(2*time.Second + time.Millisecond))
		rescued := r.TestSignals.Rescued.WaitOrTimeout()
		require.Len(t, rescued, 1)
		require.Equal(t, run.ID, rescued[0].ID)
	})

	t.Run("a full batch goes on at once", func(t *testing.T) {
		t.Parallel()
		passes := 0
		fake := &fakeStore{rescueExpired: func(_ context.Context, p *store.RescueExpiredParams) ([]*model.Run, error) {
			passes++
			if passes == 1 {
				return make([]*model.Run, p.Limit), nil
			}
			return nil, nil
		}}
		r, b := setup(t, func(c *RescuerConfig) { c.Store = fake; c.Batch = 2 })
		start(t, r)
		require.Len(t, r.TestSignals.Rescued.WaitOrTimeout(), 2)
		require.Empty(t, r.TestSignals.Rescued.WaitOrTimeout(), "the next pass comes without a sleep")
		require.Equal(t, t0.Add(ttl), r.TestSignals.Slept.WaitOrTimeout())
		require.Len(t, b.lost.all(), 1)
	})

	t.Run("hands resolved dependants on", func(t *testing.T) {
		t.Parallel()
		dependant := &model.Run{ID: "dependant", Status: model.RunQueued}
		fake := &fakeStore{resolvePending: func(context.Context, *store.ResolvePendingParams) ([]*model.Run, error) {
			return []*model.Run{dependant}, nil
		}}
		r, b := setup(t, func(c *RescuerConfig) { c.Store = fake })
		start(t, r)
		require.Empty(t, r.TestSignals.Rescued.WaitOrTimeout())
		require.Equal(t, [][]*model.Run{{dependant}}, b.resolved.all())
	})

	t.Run("retries after a store error", func(t *testing.T) {
		t.Parallel()
		fake := &fakeStore{nextLeaseExpiry: failOnce(func(context.Context) (time.Time, bool, error) {
			return t0.Add(30 * time.Second), true, nil
		})}
		r, b := setup(t, func(c *RescuerConfig) { c.Store = fake })
		start(t, r)
		require.Empty(t, r.TestSignals.Rescued.WaitOrTimeout())
		require.ErrorIs(t, r.TestSignals.Failed.WaitOrTimeout(), errOutage)
		require.Equal(t, t0.Add(DefaultRetryDelay), r.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(t0.Add(DefaultRetryDelay))
		require.Empty(t, r.TestSignals.Rescued.WaitOrTimeout())
		require.Equal(t, t0.Add(30*time.Second+time.Millisecond), r.TestSignals.Slept.WaitOrTimeout())
	})

	t.Run("Start needs a lease TTL", func(t *testing.T) {
		t.Parallel()
		r, _ := setup(t, func(c *RescuerConfig) { c.LeaseTTL = 0 })
		require.ErrorIs(t, r.Start(context.Background()), errNoLeaseTTL)
	})

	t.Run("Stop ends it", func(t *testing.T) {
		t.Parallel()
		fake := &fakeStore{}
		r, b := setup(t, func(c *RescuerConfig) { c.Store = fake })
		start(t, r)
		require.Empty(t, r.TestSignals.Rescued.WaitOrTimeout())
		require.Equal(t, t0.Add(ttl), r.TestSignals.Slept.WaitOrTimeout())
		r.Stop()
		calls := fake.calls.Load()
		b.wake.Notify()
		b.clk.Set(t0.Add(ttl))
		require.Equal(t, calls, fake.calls.Load(), "no store call after Stop")
		require.ErrorIs(t, r.Start(context.Background()), ErrStopped)
	})
}
