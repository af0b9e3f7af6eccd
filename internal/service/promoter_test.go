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

func TestPromoter(t *testing.T) {
	t.Parallel()
	const idle = 5 * time.Minute

	type testBundle struct {
		clk      *clock.Fake
		store    store.Store
		wake     *wakeup
		promoted *recorder[int]
		job      *model.Job
	}

	// setup builds a promoter on a fresh SQLite store and a fake clock at t0, its signals
	// live; mods change its config (a fake store). It is started by start.
	setup := func(t *testing.T, mods ...func(*PromoterConfig)) (*Promoter, *testBundle) {
		t.Helper()
		st := openStore(t)
		b := &testBundle{clk: clock.NewFake(t0), store: st, wake: newWakeup(), promoted: &recorder[int]{}}
		b.job = newJob(t, st, "promoted")
		cfg := PromoterConfig{Store: st, Clock: b.clk, Logger: discard, Wake: b.wake.Wait,
			OnPromoted: b.promoted.add, IdleWait: idle}
		for _, m := range mods {
			m(&cfg)
		}
		p := NewPromoter(cfg)
		p.TestSignals.Promoted.Init(t)
		p.TestSignals.Slept.Init(t)
		p.TestSignals.Failed.Init(t)
		return p, b
	}
	start := func(t *testing.T, p *Promoter) {
		t.Helper()
		require.NoError(t, p.Start(context.Background()))
		t.Cleanup(p.Stop)
	}

	t.Run("sleeps until the earliest due run and promotes it then", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t)
		later := newRun(t, b.store, b.job, t0.Add(time.Minute), t0)
		first := newRun(t, b.store, b.job, t0.Add(5*time.Second), t0)
		require.Equal(t, model.RunScheduled, first.Status)
		start(t, p)

		require.Equal(t, t0.Add(5*time.Second), p.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(t0.Add(5 * time.Second))
		require.Equal(t, 1, p.TestSignals.Promoted.WaitOrTimeout())
		require.Equal(t, []int{1}, b.promoted.all())
		require.Equal(t, model.RunQueued, getRun(t, b.store, first.ID).Status)
		require.Equal(t, model.RunScheduled, getRun(t, b.store, later.ID).Status)

		require.Equal(t, t0.Add(time.Minute), p.TestSignals.Slept.WaitOrTimeout(), "then until the next one")
	})

	t.Run("sleeps IdleWait when nothing is scheduled", func(t *testing.T) {
		t.Parallel()
		p, _ := setup(t)
		start(t, p)
		require.Equal(t, t0.Add(idle), p.TestSignals.Slept.WaitOrTimeout())
		p.TestSignals.Promoted.RequireEmpty()
	})

	t.Run("woken early by a new scheduled run", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t)
		start(t, p)
		require.Equal(t, t0.Add(idle), p.TestSignals.Slept.WaitOrTimeout())

		run := newRun(t, b.store, b.job, t0.Add(2*time.Second), t0)
		b.wake.Notify()
		require.Equal(t, t0.Add(2*time.Second), p.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(t0.Add(2 * time.Second))
		require.Equal(t, 1, p.TestSignals.Promoted.WaitOrTimeout())
		require.Equal(t, model.RunQueued, getRun(t, b.store, run.ID).Status)
	})

	t.Run("retries after a store error", func(t *testing.T) {
		t.Parallel()
		due := t0.Add(-time.Second)
		promoted := 0
		fake := &fakeStore{
			nextDue: failOnce(func(context.Context) (time.Time, bool, error) {
				if promoted > 0 {
					return time.Time{}, false, nil
				}
				return due, true, nil
			}),
			promoteDue: func(_ context.Context, p *store.PromoteDueParams) (int, error) {
				promoted = 3
				return promoted, nil
			},
		}
		p, b := setup(t, func(c *PromoterConfig) { c.Store = fake; c.RetryDelay = 2 * time.Second })
		start(t, p)

		require.ErrorIs(t, p.TestSignals.Failed.WaitOrTimeout(), errOutage)
		require.Equal(t, t0.Add(2*time.Second), p.TestSignals.Slept.WaitOrTimeout(), "pauses RetryDelay")
		b.clk.Set(t0.Add(2 * time.Second))
		require.Equal(t, 3, p.TestSignals.Promoted.WaitOrTimeout())
		require.Equal(t, []int{3}, b.promoted.all())
		require.Equal(t, t0.Add(2*time.Second+idle), p.TestSignals.Slept.WaitOrTimeout())
	})

	t.Run("Stop ends it", func(t *testing.T) {
		t.Parallel()
		fake := &fakeStore{}
		p, b := setup(t, func(c *PromoterConfig) { c.Store = fake })
		start(t, p)
		require.Equal(t, t0.Add(idle), p.TestSignals.Slept.WaitOrTimeout())
		p.Stop() // returns once the goroutine ended
		calls := fake.calls.Load()
		b.wake.Notify()
		b.clk.Set(t0.Add(idle))
		require.Equal(t, calls, fake.calls.Load(), "no store call after Stop")
		require.ErrorIs(t, p.Start(context.Background()), ErrStopped)
		p.Stop()
	})
}

// dueStore is a PromoterStore with due runs scheduled at t0 and nothing else; it records the
// limit of each promotion.
type dueStore struct {
	due    int
	limits []int
}

func (s *dueStore) NextDue(_ context.Context, after time.Time) (time.Time, bool, error) {
	return t0, s.due > 0 && t0.After(after), nil
}

func (s *dueStore) PromoteDue(_ context.Context, p *store.PromoteDueParams) (int, error) {
	s.limits = append(s.limits, p.Limit)
	n := min(p.Limit, s.due)
	s.due -= n
	return n, nil
}

// A burst is promoted in passes that start small, so that its first runs are queued soon,
// and double up to Batch while passes come back full; the next burst starts small again.
func TestPromoterRampsUpABurst(t *testing.T) {
	t.Parallel()
	st := &dueStore{due: 10000}
	p := NewPromoter(PromoterConfig{Store: st, Clock: clock.NewFake(t0), Logger: discard, Batch: 5000})
	pass := func() {
		t.Helper()
		_, err := p.Pass(context.Background())
		require.NoError(t, err)
	}
	for st.due > 0 {
		pass()
	}
	require.Equal(t, []int{625, 1250, 2500, 5000, 5000}, st.limits)
	pass() // nothing due
	st.due, st.limits = 700, nil
	pass()
	pass()
	require.Equal(t, []int{625, 1250}, st.limits, "a new burst starts small again")
}

// Runs due at an instant are left scheduled for Grace, for workers to lease straight from
// scheduled: the leasers are told as each instant falls due, and what no lease took is
// queued when its grace is over.
func TestPromoterGrace(t *testing.T) {
	t.Parallel()
	const grace = 2 * time.Second
	st := openStore(t)
	clk := clock.NewFake(t0)
	var told []time.Time
	promoted := &recorder[int]{}
	p := NewPromoter(PromoterConfig{Store: st, Clock: clk, Logger: discard, Grace: grace, IdleWait: time.Hour,
		OnDue: func() { told = append(told, clk.Now()) }, OnPromoted: promoted.add})
	job := newJob(t, st, "graced")
	first := newRun(t, st, job, t0.Add(time.Second), t0)
	second := newRun(t, st, job, t0.Add(2*time.Second), t0)
	pass := func(at time.Time) time.Time {
		t.Helper()
		clk.Set(at)
		next, err := p.Pass(context.Background())
		require.NoError(t, err)
		return next
	}

	require.Equal(t, t0.Add(time.Second), pass(t0), "asleep until the first instant")
	require.Empty(t, told)
	require.Equal(t, t0.Add(2*time.Second), pass(t0.Add(time.Second)), "then the second instant, before the first's grace ends")
	require.Equal(t, []time.Time{t0.Add(time.Second)}, told, "leasers told as the first run fell due")
	require.Equal(t, model.RunScheduled, getRun(t, st, first.ID).Status, "left for a lease")
	require.Equal(t, t0.Add(time.Second+grace), pass(t0.Add(2*time.Second)))
	require.Equal(t, []time.Time{t0.Add(time.Second), t0.Add(2 * time.Second)}, told, "and again as the second did")
	require.Equal(t, t0.Add(time.Second+grace), pass(t0.Add(2500*time.Millisecond)), "a pass with nothing new tells nobody")
	require.Len(t, told, 2)

	require.True(t, pass(t0.Add(time.Second+grace)).IsZero(), "the first run's grace is over: queued")
	require.Equal(t, []int{1}, promoted.all())
	require.Equal(t, model.RunQueued, getRun(t, st, first.ID).Status)
	require.Equal(t, model.RunScheduled, getRun(t, st, second.ID).Status)
	require.Equal(t, t0.Add(2*time.Second+grace), pass(t0.Add(time.Second+grace)))
	require.True(t, pass(t0.Add(2*time.Second+grace)).IsZero())
	require.Equal(t, model.RunQueued, getRun(t, st, second.ID).Status)
	require.Equal(t, t0.Add(2*time.Second+grace+time.Hour), pass(t0.Add(2*time.Second+grace)), "nothing scheduled: IdleWait")
	require.Len(t, told, 2)
}

// A pass that promotes fewer due runs than its limit while some are still due (locked by
// leases taking them) comes back a grace later, not at once: it must not spin while the
// leases commit.
func TestPromoterDoesNotSpinOnLockedRuns(t *testing.T) {
	t.Parallel()
	const grace = time.Second
	fake := &fakeStore{
		nextDue:    func(context.Context) (time.Time, bool, error) { return t0.Add(-time.Minute), true, nil },
		promoteDue: func(context.Context, *store.PromoteDueParams) (int, error) { return 0, nil },
	}
	p := NewPromoter(PromoterConfig{Store: fake, Clock: clock.NewFake(t0), Logger: discard, Grace: grace})
	next, err := p.Pass(context.Background())
	require.NoError(t, err)
	require.Equal(t, t0.Add(grace), next)
}
