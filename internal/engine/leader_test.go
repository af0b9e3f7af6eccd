package engine

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

// TestLeadership runs two engines on one store and clock: only the leader runs the leader
// services, and a follower takes them over, with the next term, when the leader goes.
func TestLeadership(t *testing.T) {
	t.Parallel()
	// pair builds engines a and b on one SQLite store, the elector's signals live, and
	// starts a first.
	pair := func(t *testing.T) (a, b *Engine, st store.Store, clk *clock.Fake) {
		t.Helper()
		st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "stint.db")})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		clk = clock.NewFake(t0)
		build := func(id string) *Engine {
			e := New(Config{Store: st, Clock: clk, Logger: slog.New(slog.DiscardHandler), LeaseTTL: 10 * time.Second,
				ServerID: id, AdvertiseAddr: id + ":8080", LeaderTTL: time.Second})
			e.elector.TestSignals.Elected.Init(t)
			e.elector.TestSignals.Deposed.Init(t)
			e.elector.TestSignals.Slept.Init(t)
			t.Cleanup(e.Stop)
			return e
		}
		a, b = build("a"), build("b")
		require.NoError(t, a.Start(context.Background()))
		require.Equal(t, int64(1), a.elector.TestSignals.Elected.WaitOrTimeout())
		require.NoError(t, b.Start(context.Background()))
		return a, b, st, clk
	}

	t.Run("OnlyTheLeaderRunsLeaderServices", func(t *testing.T) {
		a, b, _, _ := pair(t)
		require.Equal(t, int64(1), a.Term())
		require.Len(t, a.leaderServices, 2, "cron firer and rescuer")
		require.Zero(t, b.Term(), "b follows")
		require.Empty(t, b.leaderServices)

		c, err := b.Cluster(t.Context())
		require.NoError(t, err)
		require.Equal(t, "a", c.Leader.Holder, "any server tells who leads")
		require.Len(t, c.Servers, 2)
		require.Equal(t, "b:8080", c.Servers[1].Addr)
	})

	t.Run("FollowerTakesOverWhenLeaderStops", func(t *testing.T) {
		a, b, st, clk := pair(t)
		j := cronJob(t, b, &testBundle{clk: clk, store: st}, model.Schedule{Cron: "* * * * *"}, model.Concurrency{}, nil)
		next := b.elector.TestSignals.Slept.WaitOrTimeout()
		a.Stop()
		require.Equal(t, int64(1), a.elector.TestSignals.Deposed.WaitOrTimeout())
		require.Zero(t, a.Term())
		require.Empty(t, a.leaderServices, "stopped with the leadership")

		clk.Set(next)
		require.Equal(t, int64(2), b.elector.TestSignals.Elected.WaitOrTimeout(), "b leads at its next try: a resigned")
		require.Equal(t, int64(2), b.Term())

		// b's cron firer fires the job at its instant, under term 2.
		fire := *nextFireOf(t, &testBundle{clk: clk, store: st}, j.ID)
		clk.Set(fire)
		require.Eventually(t, func() bool {
			return len(runsOf(t, &testBundle{clk: clk, store: st}, j.ID)) == 1
		}, 10*time.Second, 5*time.Millisecond, "the new leader fires cron")
	})

	t.Run("LeaderDeposedByATakeoverStopsItsServices", func(t *testing.T) {
		a, _, st, clk := pair(t)
		next := a.elector.TestSignals.Slept.WaitOrTimeout()
		// a was paused past its lease; another server took the lease meanwhile.
		l, err := st.TryLead(t.Context(), &store.TryLeadParams{Holder: "c", TTL: time.Hour, Now: t0.Add(5 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, "c", l.Holder)
		clk.Set(next)
		require.Equal(t, int64(1), a.elector.TestSignals.Deposed.WaitOrTimeout())
		require.Zero(t, a.Term())
	})
}
