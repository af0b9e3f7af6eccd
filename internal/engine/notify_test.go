package engine

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/postgres"
	"github.com/stint-dev/stint/internal/store/postgres/pgtest"
)

// setupServer starts an engine on the PostgreSQL schema of url with a notifier, as one
// server of a cluster, on clk. before runs ahead of Start (to initialise test signals). It
// returns once the notifier listens, so what another server publishes from then on arrives.
func setupServer(t *testing.T, name, url string, clk *clock.Fake, before func(*Engine)) (*Engine, *testBundle) {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, postgres.Config{URL: url, MaxConns: 8})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	listening := make(chan struct{}, 10)
	n, err := st.NewNotifier(ctx, postgres.NotifierConfig{OnListen: func() { listening <- struct{}{} }})
	require.NoError(t, err)
	e := New(Config{
		Store: st, Clock: clk, Logger: slog.New(slog.DiscardHandler), LeaseTTL: 10 * time.Second,
		Rand: func() float64 { return 0.5 }, Committers: 2, Notifier: n, ServerID: name,
	})
	if before != nil {
		before(e)
	}
	require.NoError(t, e.Start(ctx))
	t.Cleanup(e.Stop)
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("notifier did not listen within 10s")
	}
	return e, &testBundle{clk: clk, store: st}
}

// TestWakeAcrossServers runs two engines (servers A and B) on one PostgreSQL schema: what
// changes on A wakes what waits on B. The clock is fake and never moved, so nothing on B
// wakes by a timer: only a notification from A can.
func TestWakeAcrossServers(t *testing.T) {
	u := pgtest.NewSchema(t)
	clk := clock.NewFake(t0)
	// A starts first and so leads (its Start makes its first leadership try): it runs the
	// cron firer; B follows.
	a, ab := setupServer(t, "a", u, clk, func(e *Engine) { e.TestSignals.CronSlept.Init(t) })
	b, bb := setupServer(t, "b", u, clk, func(e *Engine) {
		e.TestSignals.Parked.Init(t)
		e.promoter.TestSignals.Slept.Init(t)
	})
	require.Positive(t, a.Term(), "the first server leads")
	require.Zero(t, b.Term(), "the second follows")
	// B's loops have read the empty store (the first query of each may take a new
	// connection) before A changes anything.
	b.promoter.TestSignals.Slept.WaitOrTimeout()
	a.TestSignals.CronSlept.WaitOrTimeout()
	register(t, b, "w1")

	t.Run("a submission on A wakes a lease poll parked on B", func(t *testing.T) {
		const wait = 10 * time.Second // of the poll; the fake clock never reaches it
		got := make(chan *LeaseResult, 1)
		go func() {
			resp, err := b.Lease(context.Background(), "w1", &LeaseParams{Max: 1, Wait: wait})
			if err != nil {
				t.Error(err)
			}
			got <- resp
		}()
		require.Equal(t, "w1", b.TestSignals.Parked.WaitOrTimeout())
		start := time.Now()
		run := submit(t, a, ab, time.Time{}, model.RetryPolicy{MaxAttempts: 1})
		select {
		case resp := <-got:
			latency := time.Since(start)
			t.Logf("submit on A to lease on B: %s", latency)
			require.Len(t, resp.Leases, 1)
			require.Equal(t, run.ID, resp.Leases[0].Run.ID)
			require.Less(t, latency, time.Second, "within milliseconds, not a wait")
		case <-time.After(wait):
			t.Fatalf("the poll on B was not woken within %s of the submission on A", wait)
		}
	})

	t.Run("a schedule created on follower B wakes leader A's cron firer", func(t *testing.T) {
		// 12:03: not the instant A's idle cron firer sleeps until (12:05, MaxLeaseWait*10).
		job := cronJob(t, b, bb, model.Schedule{Cron: "*/3 * * * *"}, model.Concurrency{}, nil)
		a.TestSignals.CronSlept.WaitUntil(func(at time.Time) bool { return at.Equal(*job.NextFireAt) })
	})

	t.Run("a run scheduled on A wakes B's promoter", func(t *testing.T) {
		due := t0.Add(time.Minute) // before the 12:05 B's idle promoter sleeps until
		submit(t, a, ab, due, model.RetryPolicy{MaxAttempts: 1})
		b.promoter.TestSignals.Slept.WaitUntil(func(at time.Time) bool { return at.Equal(due) })
	})

	t.Run("a change on A wakes a follower on B", func(t *testing.T) {
		changed := b.Changes()
		submit(t, a, ab, time.Time{}, model.RetryPolicy{MaxAttempts: 1})
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("a submission on A did not wake B's followers")
		}
		// Lease the run, so that the next subtest's lease takes its own.
		require.Len(t, lease(t, b, "w1", 1, 0).Leases, 1)
	})

	t.Run("a cancel on A reaches the worker's poll on B", func(t *testing.T) {
		run := submit(t, a, ab, time.Time{}, model.RetryPolicy{MaxAttempts: 1})
		leased := lease(t, b, "w1", 1, 0)
		require.Len(t, leased.Leases, 1)
		require.Equal(t, run.ID, leased.Leases[0].Run.ID)
		got := make(chan *LeaseResult, 1)
		go func() {
			resp, err := b.Lease(context.Background(), "w1", &LeaseParams{Max: 0, Wait: LongestLeaseWait})
			if err != nil {
				t.Error(err)
			}
			got <- resp
		}()
		require.Equal(t, "w1", b.TestSignals.Parked.WaitOrTimeout())
		_, err := a.CancelRuns(context.Background(), &store.CancelRunsParams{RunIDs: []string{run.ID}})
		require.NoError(t, err)
		select {
		case resp := <-got:
			require.Equal(t, []string{run.ID}, resp.Cancel)
		case <-time.After(10 * time.Second):
			t.Fatal("the cancel on A did not reach the poll on B")
		}
	})
}
