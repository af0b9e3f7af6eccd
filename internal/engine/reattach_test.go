package engine

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// peer is a second server over b's store and clock (Stepped: its services are not started,
// one server runs them, as a cluster's leader does; its group committers run).
func peer(t *testing.T, b *testBundle) *Engine {
	e := New(Config{Store: b.store, Clock: b.clk, Logger: slog.New(slog.DiscardHandler), LeaseTTL: 10e9, Stepped: true})
	require.NoError(t, e.Start(t.Context()))
	t.Cleanup(e.Stop)
	return e
}

func TestAnotherServerServesTheSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, b := setup(t)
	reg, err := e.Register(ctx, &RegisterParams{ID: "w1", Capacity: model.Capacity{Slots: 2}, Handlers: []string{"noop"}})
	require.NoError(t, err)
	run := submit(t, e, b, b.clk.Now(), model.RetryPolicy{})
	other := peer(t, b)

	for _, tc := range []struct {
		name, session string
		ok            bool
	}{
		{"no session: only the server it registered with", "", false},
		{"another session", "stale", false},
		{"its session", reg.Session, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := other.Lease(ctx, "w1", &LeaseParams{Session: tc.session, Max: 1})
			hb, hbErr := other.Heartbeat(ctx, "w1", &HeartbeatParams{Session: tc.session})
			if !tc.ok {
				require.ErrorIs(t, err, ErrUnknownWorker)
				require.ErrorIs(t, hbErr, ErrUnknownWorker)
				return
			}
			require.NoError(t, err)
			require.NoError(t, hbErr)
			require.Empty(t, hb.Lost)
			require.Len(t, res.Leases, 1, "served with the handlers the session registered")
			require.Equal(t, run.ID, res.Leases[0].Run.ID)
		})
	}
}

func TestReattachKeepsAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, b := setup(t)
	reg, err := e.Register(ctx, &RegisterParams{ID: "w1", Capacity: model.Capacity{Slots: 2}, Handlers: []string{"noop"}})
	require.NoError(t, err)
	kept := submit(t, e, b, b.clk.Now(), model.RetryPolicy{})
	dropped := submit(t, e, b, b.clk.Now(), model.RetryPolicy{})
	ls := lease(t, e, "w1", 2, 0).Leases
	require.Len(t, ls, 2)
	tokens := map[string]string{ls[0].Run.ID: ls[0].Token, ls[1].Run.ID: ls[1].Token}

	// The server died; the worker re-attaches to another with its session and leases, one
	// of them with a token that is not the store's.
	b.clk.Advance(time.Second)
	other := peer(t, b)
	got, err := other.Register(ctx, &RegisterParams{ID: "w1", Capacity: model.Capacity{Slots: 2}, Handlers: []string{"noop"},
		Resume: reg.Session, Held: []store.LeaseRef{
			{RunID: kept.ID, Token: tokens[kept.ID]},
			{RunID: dropped.ID, Token: "not-" + tokens[dropped.ID]},
		}})
	require.NoError(t, err)
	require.True(t, got.Resumed)
	require.Equal(t, reg.Session, got.Session)
	require.Equal(t, []string{dropped.ID}, got.Lost, "the worker kills what it holds with a stale token")
	r := getRun(t, b, kept.ID)
	require.Equal(t, model.RunRunning, r.Status)
	require.Equal(t, tokens[kept.ID], r.LeaseToken)
	require.Equal(t, 1, r.Attempt)
	require.Equal(t, b.clk.Now().Add(10*time.Second), *r.LeaseExpiresAt, "renewed")
	r = getRun(t, b, dropped.ID)
	require.Equal(t, model.RunRunning, r.Status, "the store's lease it did not prove is left to expire")
	require.Equal(t, tokens[dropped.ID], r.LeaseToken)
	require.Equal(t, ls[1].ExpiresAt, *r.LeaseExpiresAt, "and not renewed")

	// Another process claiming the id while the session is live is refused, and changes
	// nothing: it cannot prove it is w1.
	_, err = other.Register(ctx, &RegisterParams{ID: "w1", Capacity: model.Capacity{Slots: 2}, Handlers: []string{"noop"}})
	require.ErrorIs(t, err, model.ErrConflict)
	require.Equal(t, model.RunRunning, getRun(t, b, kept.ID).Status)

	// A restarted process (no session) that proves it is w1 loses what it held at once.
	got, err = other.Register(ctx, &RegisterParams{ID: "w1", Capacity: model.Capacity{Slots: 2}, Handlers: []string{"noop"},
		Takeover: true})
	require.NoError(t, err)
	require.False(t, got.Resumed)
	require.NotEqual(t, reg.Session, got.Session)
	require.Equal(t, model.AttemptLost, getRun(t, b, kept.ID).Attempts[0].Status)
}

// A re-attach whose held leases were listed before a lease answer reached the worker must
// not end that lease: the worker runs it, and a run ended as lost is queued again at once,
// for another worker to start beside it. Found by the simulation (internal/sim): a
// re-attach racing a lease poll ended the new attempt, and another worker leased the run
// while the first still ran it.
func TestReattachLeavesUnlistedLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, b := setup(t)
	reg, err := e.Register(ctx, &RegisterParams{ID: "w1", Capacity: model.Capacity{Slots: 2}, Handlers: []string{"noop"}})
	require.NoError(t, err)
	register(t, e, "w2")
	run := submit(t, e, b, b.clk.Now(), model.RetryPolicy{})

	// w1 lists what it holds (nothing) for a re-attach; before that arrives, its lease poll
	// is answered with the run.
	held := []store.LeaseRef{}
	l := lease(t, e, "w1", 1, 0).Leases
	require.Len(t, l, 1)
	got, err := e.Register(ctx, &RegisterParams{ID: "w1", Capacity: model.Capacity{Slots: 2}, Handlers: []string{"noop"},
		Resume: reg.Session, Held: held})
	require.NoError(t, err)
	require.True(t, got.Resumed)

	r := getRun(t, b, run.ID)
	require.Equal(t, model.RunRunning, r.Status, "w1 runs it")
	require.Equal(t, l[0].Token, r.LeaseToken)
	require.Empty(t, lease(t, e, "w2", 1, 0).Leases, "no other worker may start it")

	// w1's next heartbeat names the lease and keeps it.
	b.clk.Advance(time.Second)
	hb, err := e.Heartbeat(ctx, "w1", &HeartbeatParams{Session: reg.Session, Held: []store.LeaseRef{{RunID: run.ID, Token: l[0].Token}}})
	require.NoError(t, err)
	require.Empty(t, hb.Lost)
	require.Equal(t, b.clk.Now().Add(10*time.Second), *getRun(t, b, run.ID).LeaseExpiresAt)
}
