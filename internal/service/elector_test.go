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

// outageStore fails TryLead while down is set.
type outageStore struct {
	ElectorStore
	down atomic.Bool
}

func (s *outageStore) TryLead(ctx context.Context, p *store.TryLeadParams) (*model.Leadership, error) {
	if s.down.Load() {
		return nil, errOutage
	}
	return s.ElectorStore.TryLead(ctx, p)
}

// newElector builds an elector named id over st on clk with its signals live, and a
// recorder of the terms it was elected and deposed with (+term, -term).
func newElector(t *testing.T, st ElectorStore, clk clock.Clock, id string) (*Elector, *recorder[int64]) {
	t.Helper()
	rec := &recorder[int64]{}
	e := NewElector(ElectorConfig{Store: st, Clock: clk, Logger: discard, ID: id, Addr: id + ":1", StartedAt: t0,
		TTL:       time.Second,
		OnElected: func(_ context.Context, term int64) { rec.add(term) },
		OnDeposed: func(term int64) { rec.add(-term) }})
	e.TestSignals.Elected.Init(t)
	e.TestSignals.Deposed.Init(t)
	e.TestSignals.Slept.Init(t)
	e.TestSignals.Failed.Init(t)
	t.Cleanup(e.Stop)
	return e, rec
}

func TestElector(t *testing.T) {
	t.Run("AloneLeadsAtStartAndResignsAtStop", func(t *testing.T) {
		st, clk := openStore(t), clock.NewFake(t0)
		e, rec := newElector(t, st, clk, "a")
		require.NoError(t, e.Start(t.Context()))
		require.Equal(t, []int64{1}, rec.all(), "leading when Start returns")
		require.Equal(t, int64(1), e.TestSignals.Elected.WaitOrTimeout())
		require.Equal(t, t0.Add(250*time.Millisecond), e.TestSignals.Slept.WaitOrTimeout(), "renews every TTL/4")

		servers, err := st.ListServers(t.Context(), &store.ListServersParams{})
		require.NoError(t, err)
		require.Equal(t, []*model.Server{{ID: "a", Addr: "a:1", StartedAt: t0, LastSeen: t0}}, servers)

		clk.Advance(250 * time.Millisecond)
		require.Equal(t, t0.Add(500*time.Millisecond), e.TestSignals.Slept.WaitOrTimeout())
		require.Equal(t, []int64{1}, rec.all(), "a renewal keeps the term: no new election")

		e.Stop()
		require.Equal(t, int64(1), e.TestSignals.Deposed.WaitOrTimeout())
		require.Equal(t, []int64{1, -1}, rec.all())
		_, err = st.Leader(t.Context(), &store.LeaderParams{Now: clk.Now()})
		require.ErrorIs(t, err, model.ErrNotFound, "the lease was given up")
	})

	t.Run("FollowerTakesOverAfterResign", func(t *testing.T) {
		st, clk := openStore(t), clock.NewFake(t0)
		a, _ := newElector(t, st, clk, "a")
		b, recB := newElector(t, st, clk, "b")
		require.NoError(t, a.Start(t.Context()))
		require.Equal(t, int64(1), a.TestSignals.Elected.WaitOrTimeout())
		require.NoError(t, b.Start(t.Context()))
		require.Empty(t, recB.all(), "b follows")
		a.TestSignals.Slept.WaitOrTimeout()
		next := b.TestSignals.Slept.WaitOrTimeout()

		a.Stop()
		a.TestSignals.Deposed.WaitOrTimeout()
		clk.Set(next)
		require.Equal(t, int64(2), b.TestSignals.Elected.WaitOrTimeout(), "b leads at its next try, with the next term")
	})

	t.Run("StepsDownWhenRenewalFails", func(t *testing.T) {
		st := &outageStore{ElectorStore: openStore(t)}
		clk := clock.NewFake(t0)
		e, rec := newElector(t, st, clk, "a")
		require.NoError(t, e.Start(t.Context()))
		e.TestSignals.Elected.WaitOrTimeout()
		st.down.Store(true)
		for _, want := range []time.Duration{250, 500, 750} {
			require.Equal(t, t0.Add(want*time.Millisecond), e.TestSignals.Slept.WaitOrTimeout())
			clk.Set(t0.Add(want * time.Millisecond))
			require.ErrorIs(t, e.TestSignals.Failed.WaitOrTimeout(), errOutage)
		}
		require.Equal(t, int64(1), e.TestSignals.Deposed.WaitOrTimeout(), "3/4 of the TTL without a renewal")
		require.Equal(t, []int64{1, -1}, rec.all())
		require.Equal(t, t0.Add(time.Second), e.TestSignals.Slept.WaitOrTimeout())

		st.down.Store(false)
		clk.Set(t0.Add(time.Second))
		require.Equal(t, int64(1), e.TestSignals.Elected.WaitOrTimeout(), "nobody took it meanwhile: the same term again")
	})

	t.Run("DeposedWhenAnotherTookTheLease", func(t *testing.T) {
		st, clk := openStore(t), clock.NewFake(t0)
		e, rec := newElector(t, st, clk, "a")
		require.NoError(t, e.Start(t.Context()))
		e.TestSignals.Elected.WaitOrTimeout()
		next := e.TestSignals.Slept.WaitOrTimeout()
		// Another server took the lease after it expired (a paused leader).
		l, err := st.TryLead(t.Context(), &store.TryLeadParams{Holder: "b", TTL: time.Hour, Now: t0.Add(2 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, "b", l.Holder)
		clk.Set(next)
		require.Equal(t, int64(1), e.TestSignals.Deposed.WaitOrTimeout())
		require.Equal(t, []int64{1, -1}, rec.all())
	})
}
