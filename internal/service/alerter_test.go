package service

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func TestAlerter(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		clk      *clock.Fake
		store    store.Store
		wake     *wakeup
		notified *recorder[[]alerting.Alert]
	}
	setup := func(t *testing.T) (*Alerter, *testBundle) {
		t.Helper()
		st := openStore(t)
		b := &testBundle{clk: clock.NewFake(t0), store: st, wake: newWakeup(), notified: &recorder[[]alerting.Alert]{}}
		a := NewAlerter(AlerterConfig{Store: st, Clock: b.clk, Logger: discard, Wake: b.wake.Wait,
			Rules: alerting.Rules{Hysteresis: 30 * time.Second}, NewID: id.New, Notify: b.notified.add})
		a.TestSignals.Evaluated.Init(t)
		a.TestSignals.Slept.Init(t)
		a.TestSignals.Failed.Init(t)
		require.NoError(t, a.Start(context.Background()))
		t.Cleanup(a.Stop)
		return a, b
	}
	// queueBacklog sets queue q's backlog threshold to 1 and puts two runs in it.
	backlog := func(t *testing.T, b *testBundle) []*model.Run {
		t.Helper()
		_, err := b.store.UpdateQueue(t.Context(), &store.UpdateQueueParams{Name: "q",
			Alerts: &model.QueueAlerts{MaxBacklog: 1}, Now: t0})
		require.NoError(t, err)
		j := newJob(t, b.store, "busy", func(j *model.Job) { j.Spec.Queue = "q" })
		return []*model.Run{newRun(t, b.store, j, t0, t0), newRun(t, b.store, j, t0, t0)}
	}

	t.Run("fires once, resolves once after the hysteresis, on its interval", func(t *testing.T) {
		t.Parallel()
		a, b := setup(t)
		require.True(t, a.TestSignals.Evaluated.WaitOrTimeout().Empty(), "nothing to alert about yet")
		require.Equal(t, t0.Add(DefaultAlertInterval), a.TestSignals.Slept.WaitOrTimeout())
		runs := backlog(t, b)

		b.clk.Set(t0.Add(DefaultAlertInterval))
		res := a.TestSignals.Evaluated.WaitOrTimeout()
		require.Len(t, res.Fire, 1)
		fired := res.Fire[0]
		require.Equal(t, alerting.RuleQueueBacklog, fired.Rule)
		require.Equal(t, "queue:q", fired.Subject)
		require.Equal(t, "queue q: 2 runs queued (threshold 1)", fired.Summary)
		require.NotEmpty(t, fired.ID)
		require.Equal(t, [][]alerting.Alert{{fired}}, b.notified.all())
		stored, err := b.store.ListAlerts(t.Context(), &store.ListAlertsParams{})
		require.NoError(t, err)
		require.Equal(t, []alerting.Alert{fired}, stored)

		// Evaluating again and again while it holds fires nothing more.
		for i := 2; i <= 4; i++ {
			require.Equal(t, t0.Add(time.Duration(i)*DefaultAlertInterval), a.TestSignals.Slept.WaitOrTimeout())
			b.clk.Set(t0.Add(time.Duration(i) * DefaultAlertInterval))
			require.True(t, a.TestSignals.Evaluated.WaitOrTimeout().Empty())
		}
		require.Len(t, b.notified.all(), 1)

		// The backlog drains: the alert clears, and resolves once clear for 30 s.
		_, err = b.store.CancelRuns(t.Context(), &store.CancelRunsParams{RunIDs: []string{runs[0].ID}, Now: b.clk.Now()})
		require.NoError(t, err)
		cleared := t0.Add(5 * DefaultAlertInterval)
		require.Equal(t, cleared, a.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(cleared)
		res = a.TestSignals.Evaluated.WaitOrTimeout()
		require.Len(t, res.Update, 1)
		require.Equal(t, cleared, *res.Update[0].ClearSince)
		for now := cleared; ; {
			require.Equal(t, now.Add(DefaultAlertInterval), a.TestSignals.Slept.WaitOrTimeout())
			now = now.Add(DefaultAlertInterval)
			b.clk.Set(now)
			res = a.TestSignals.Evaluated.WaitOrTimeout()
			if now.Sub(cleared) < 30*time.Second {
				require.True(t, res.Empty(), "within the hysteresis")
				continue
			}
			require.Len(t, res.Resolve, 1)
			require.Equal(t, fired.ID, res.Resolve[0].ID)
			require.Equal(t, now, *res.Resolve[0].ResolvedAt)
			break
		}
		all := b.notified.all()
		require.Len(t, all, 2, "one fire, one resolve")
		require.Equal(t, alerting.Resolved, all[1][0].State)
		firing, err := b.store.ListAlerts(t.Context(), &store.ListAlertsParams{State: alerting.Firing})
		require.NoError(t, err)
		require.Empty(t, firing)
	})

	t.Run("a wake-up evaluates early, at most once per gap", func(t *testing.T) {
		t.Parallel()
		a, b := setup(t)
		a.TestSignals.Evaluated.WaitOrTimeout()
		require.Equal(t, t0.Add(DefaultAlertInterval), a.TestSignals.Slept.WaitOrTimeout())
		_, _, err := b.store.RegisterWorker(t.Context(), &store.RegisterWorkerParams{ID: "w", Session: "s", Now: t0})
		require.NoError(t, err)
		require.NoError(t, b.store.SetWorkerState(t.Context(), &store.SetWorkerStateParams{ID: "w", State: model.WorkerLost}))
		backlog(t, b)
		b.wake.Notify() // at t0: within the gap of the first pass
		require.Equal(t, t0.Add(DefaultAlertMinGap), a.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(t0.Add(DefaultAlertMinGap))
		// The early pass reads the workers; the queues wait for the interval's pass.
		fired := a.TestSignals.Evaluated.WaitOrTimeout().Fire
		require.Len(t, fired, 1)
		require.Equal(t, alerting.RuleWorkerLost, fired[0].Rule)
		require.Equal(t, t0.Add(DefaultAlertMinGap+DefaultAlertInterval), a.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(t0.Add(DefaultAlertMinGap + DefaultAlertInterval))
		fired = a.TestSignals.Evaluated.WaitOrTimeout().Fire
		require.Len(t, fired, 1)
		require.Equal(t, alerting.RuleQueueBacklog, fired[0].Rule)
	})

	t.Run("a new alerter continues from the persisted alerts", func(t *testing.T) {
		t.Parallel()
		a, b := setup(t)
		a.TestSignals.Evaluated.WaitOrTimeout()
		a.TestSignals.Slept.WaitOrTimeout()
		backlog(t, b)
		b.clk.Set(t0.Add(DefaultAlertInterval))
		require.Len(t, a.TestSignals.Evaluated.WaitOrTimeout().Fire, 1)
		a.Stop()

		// The next leader's alerter finds it firing and fires nothing again.
		next := NewAlerter(AlerterConfig{Store: b.store, Clock: b.clk, Logger: discard, NewID: id.New})
		next.TestSignals.Evaluated.Init(t)
		require.NoError(t, next.Start(context.Background()))
		t.Cleanup(next.Stop)
		require.True(t, next.TestSignals.Evaluated.WaitOrTimeout().Empty())
	})

	t.Run("needs NewID", func(t *testing.T) {
		t.Parallel()
		require.ErrorIs(t, NewAlerter(AlerterConfig{}).Start(context.Background()), errNoNewID)
	})
}

// scansReads is a store that records, per AlertFacts call, whether it read the cron jobs,
// queues and running runs.
type scansReads struct {
	store.Store
	mu    sync.Mutex
	reads []bool
}

func (s *scansReads) AlertFacts(ctx context.Context, p *store.AlertFactsParams) (*alerting.Facts, error) {
	s.mu.Lock()
	s.reads = append(s.reads, !p.SkipScans)
	s.mu.Unlock()
	return s.Store.AlertFacts(ctx, p)
}

func (s *scansReads) all() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reads)
}

// Passes that a run's end wakes early leave out the cron jobs (a row each), the queues (a
// count of every queued run) and the running runs; they are read on the interval's passes.
func TestAlerterScansOncePerInterval(t *testing.T) {
	t.Parallel()
	st := &scansReads{Store: openStore(t)}
	clk, wake := clock.NewFake(t0), newWakeup()
	a := NewAlerter(AlerterConfig{Store: st, Clock: clk, Logger: discard, Wake: wake.Wait, NewID: id.New})
	a.TestSignals.Evaluated.Init(t)
	a.TestSignals.Slept.Init(t)
	require.NoError(t, a.Start(context.Background()))
	t.Cleanup(a.Stop)

	a.TestSignals.Evaluated.WaitOrTimeout()
	require.Equal(t, t0.Add(DefaultAlertInterval), a.TestSignals.Slept.WaitOrTimeout())
	wake.Notify()
	require.Equal(t, t0.Add(DefaultAlertMinGap), a.TestSignals.Slept.WaitOrTimeout())
	clk.Set(t0.Add(DefaultAlertMinGap))
	a.TestSignals.Evaluated.WaitOrTimeout() // woken early
	require.Equal(t, t0.Add(DefaultAlertMinGap+DefaultAlertInterval), a.TestSignals.Slept.WaitOrTimeout())
	clk.Set(t0.Add(DefaultAlertMinGap + DefaultAlertInterval))
	a.TestSignals.Evaluated.WaitOrTimeout() // the interval's pass
	require.Equal(t, []bool{true, false, true}, st.all())
}
