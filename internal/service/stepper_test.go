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

// A Stepper runs a service's rounds when its loop would, and only then: these drive the
// promoter (whose rounds are the simplest) by hand on a fake clock, never starting it.
func TestStepper(t *testing.T) {
	t.Parallel()
	const idle = 5 * time.Minute

	type testBundle struct {
		clk      *clock.Fake
		store    store.Store
		wake     *wakeup
		promoted *recorder[int]
	}
	setup := func(t *testing.T, mods ...func(*PromoterConfig)) (*Stepper, *testBundle) {
		t.Helper()
		b := &testBundle{clk: clock.NewFake(t0), store: openStore(t), wake: newWakeup(), promoted: &recorder[int]{}}
		cfg := PromoterConfig{Store: b.store, Clock: b.clk, Logger: discard, Wake: b.wake.Wait,
			OnPromoted: b.promoted.add, IdleWait: idle, RetryDelay: 2 * time.Second}
		for _, m := range mods {
			m(&cfg)
		}
		s := NewPromoter(cfg).Stepper()
		require.Equal(t, "promoter", s.Name())
		return s, b
	}
	step := func(t *testing.T, s *Stepper) bool {
		t.Helper()
		ran, err := s.Step(context.Background())
		require.NoError(t, err)
		return ran
	}

	t.Run("due at first, then at the instant its round named", func(t *testing.T) {
		t.Parallel()
		s, b := setup(t)
		clk := b.clk
		require.Equal(t, t0, s.Next(), "a round that never ran is due")
		require.True(t, step(t, s))
		require.Equal(t, t0.Add(idle), s.Next(), "nothing scheduled: IdleWait")
		require.False(t, step(t, s), "not due: no round")
		clk.Set(t0.Add(idle - time.Millisecond))
		require.False(t, step(t, s))
		clk.Set(t0.Add(idle))
		require.Equal(t, t0.Add(idle), s.Next())
		require.True(t, step(t, s))
		require.Equal(t, t0.Add(2*idle), s.Next())
	})

	t.Run("woken by its Wake source, and due again at once after work", func(t *testing.T) {
		t.Parallel()
		s, b := setup(t)
		require.True(t, step(t, s))
		job := newJob(t, b.store, "stepped")
		run := newRun(t, b.store, job, t0.Add(time.Second), t0)
		require.Equal(t, t0.Add(idle), s.Next(), "a new run alone does not make it due")
		b.wake.Notify()
		require.Equal(t, t0, s.Next(), "woken: due now")
		require.True(t, step(t, s))
		require.Equal(t, t0.Add(time.Second), s.Next(), "until the new run is due")

		b.clk.Set(t0.Add(time.Second))
		require.True(t, step(t, s))
		require.Equal(t, []int{1}, b.promoted.all())
		require.Equal(t, model.RunQueued, getRun(t, b.store, run.ID).Status)
		require.Equal(t, t0.Add(time.Second), s.Next(), "a round that did work is followed by another at once")
		require.True(t, step(t, s))
		require.Equal(t, t0.Add(time.Second+idle), s.Next())
	})

	t.Run("a failed round is retried after RetryDelay, not woken early", func(t *testing.T) {
		t.Parallel()
		fake := &fakeStore{nextDue: failOnce(func(context.Context) (time.Time, bool, error) { return time.Time{}, false, nil })}
		s, b := setup(t, func(c *PromoterConfig) { c.Store = fake })
		ran, err := s.Step(context.Background())
		require.True(t, ran)
		require.ErrorIs(t, err, errOutage)
		require.ErrorContains(t, err, "promoter: next due: ")
		require.Equal(t, t0.Add(2*time.Second), s.Next())
		b.wake.Notify()
		require.Equal(t, t0.Add(2*time.Second), s.Next(), "a wake-up does not cut the pause short")
		b.clk.Set(t0.Add(2 * time.Second))
		require.True(t, step(t, s))
		require.Equal(t, t0.Add(2*time.Second+idle), s.Next())
	})
}
