package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// lead asks for the leader lease for holder at now.
func (f *fx) lead(holder string, ttl time.Duration, now time.Time) *model.Leadership {
	f.t.Helper()
	l, err := f.s.TryLead(f.ctx, &store.TryLeadParams{Holder: holder, TTL: ttl, Now: now})
	require.NoError(f.t, err)
	return l
}

// takeOver makes holder the leader once the current lease expires: on PostgreSQL expiry is
// the database's clock, so it asks until the lease (a short one) has run out there; on
// SQLite, now is past it at once.
func (f *fx) takeOver(holder string, now time.Time) *model.Leadership {
	f.t.Helper()
	var l *model.Leadership
	require.Eventually(f.t, func() bool {
		l = f.lead(holder, time.Hour, now)
		return l.Holder == holder
	}, 10*time.Second, 5*time.Millisecond, "the expired lease passes to %s", holder)
	return l
}

// testCluster checks the servers' rows and the leader lease: one holder at a time, terms
// that grow with each new holder, and fencing of the leader's cron fires by term.
func testCluster(t *testing.T, open OpenFunc) {
	t.Run("Servers", func(t *testing.T) {
		f := setup(t, open)
		servers, err := f.s.ListServers(f.ctx, &store.ListServersParams{})
		require.NoError(t, err)
		require.Empty(t, servers)
		for _, hb := range []store.HeartbeatServerParams{
			{ID: "b", Addr: "127.0.0.1:2", StartedAt: t0, Now: at(time.Second)},
			{ID: "a", Addr: "127.0.0.1:1", StartedAt: t0, Now: at(time.Second)},
			{ID: "a", Addr: "127.0.0.1:1", StartedAt: t0, Now: at(time.Minute)},
		} {
			require.NoError(t, f.s.HeartbeatServer(f.ctx, &hb))
		}
		servers, err = f.s.ListServers(f.ctx, &store.ListServersParams{})
		require.NoError(t, err)
		require.Equal(t, []*model.Server{
			{ID: "a", Addr: "127.0.0.1:1", StartedAt: t0, LastSeen: at(time.Minute)},
			{ID: "b", Addr: "127.0.0.1:2", StartedAt: t0, LastSeen: at(time.Second)},
		}, servers, "by id, a heartbeat moving LastSeen")
		servers, err = f.s.ListServers(f.ctx, &store.ListServersParams{SeenAfter: at(time.Second)})
		require.NoError(t, err)
		require.Len(t, servers, 1, "b was not seen after the bound")
		require.Equal(t, "a", servers[0].ID)
	})

	t.Run("OneHolderUnderConcurrentTries", func(t *testing.T) {
		f := setup(t, open)
		const n = 8
		got := make([]*model.Leadership, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = f.s.TryLead(f.ctx, &store.TryLeadParams{Holder: string(rune('a' + i)), TTL: time.Hour, Now: t0})
			}()
		}
		wg.Wait()
		leaders := 0
		for i := range n {
			require.NoError(t, errs[i])
			if got[i].Holder == string(rune('a'+i)) {
				leaders++
			}
			require.Equal(t, got[0].Holder, got[i].Holder, "every caller is told the same leader")
			require.Equal(t, got[0].Term, got[i].Term)
		}
		require.Equal(t, 1, leaders, "exactly one caller holds the lease")
		require.Equal(t, int64(1), got[0].Term)
	})

	t.Run("RenewKeepsTermOthersRefused", func(t *testing.T) {
		f := setup(t, open)
		first := f.lead("a", time.Hour, t0)
		require.Equal(t, "a", first.Holder)
		renewed := f.lead("a", time.Hour, at(time.Minute))
		require.Equal(t, "a", renewed.Holder)
		require.Equal(t, first.Term, renewed.Term, "a renewal keeps the term")
		require.Equal(t, first.Since, renewed.Since, "and the start of the leadership")
		require.False(t, renewed.ExpiresAt.Before(first.ExpiresAt), "a renewal moves the expiry on")

		other := f.lead("b", time.Hour, at(2*time.Minute))
		require.Equal(t, "a", other.Holder, "a live lease is not taken by another")
		require.Equal(t, first.Term, other.Term)

		l, err := f.s.Leader(f.ctx, &store.LeaderParams{Now: at(2 * time.Minute)})
		require.NoError(t, err)
		require.Equal(t, "a", l.Holder)
	})

	t.Run("ExpiryHandsOverWithNextTerm", func(t *testing.T) {
		f := setup(t, open)
		first := f.lead("a", time.Millisecond, t0)
		require.Equal(t, "a", first.Holder)
		second := f.takeOver("b", at(time.Second))
		require.Equal(t, first.Term+1, second.Term, "a new holder gets the next term")
		back := f.lead("a", time.Hour, at(2*time.Second))
		require.Equal(t, "b", back.Holder, "the old leader does not get it back while it is live")
	})

	t.Run("ResignHandsOverAtOnce", func(t *testing.T) {
		f := setup(t, open)
		first := f.lead("a", time.Hour, t0)
		require.NoError(t, f.s.ResignLead(f.ctx, &store.ResignLeadParams{Holder: "b", Now: t0}), "not b's to give up")
		require.Equal(t, "a", f.lead("b", time.Hour, t0).Holder)
		require.NoError(t, f.s.ResignLead(f.ctx, &store.ResignLeadParams{Holder: "a", Now: t0}))
		_, err := f.s.Leader(f.ctx, &store.LeaderParams{Now: t0})
		require.ErrorIs(t, err, model.ErrNotFound, "no leader after a resignation")
		next := f.lead("b", time.Hour, t0)
		require.Equal(t, "b", next.Holder, "the lease is free at once, an hour before it would have expired")
		require.Equal(t, first.Term+1, next.Term)
	})

	t.Run("DeposedLeaderFiresNothing", func(t *testing.T) {
		f := setup(t, open)
		next := at(time.Minute)
		j := f.job("nightly", func(j *model.Job) {
			j.Spec.Schedule = &model.Schedule{Cron: "* * * * *"}
			j.NextFireAt = timep(at(0))
		})
		f.createJob(j, nil)
		fire := func(term int64, now time.Time) ([]store.FireResult, error) {
			return f.s.FireJobs(f.ctx, &store.FireJobsParams{Term: term, Now: now, Fires: []store.Fire{{
				JobID: j.ID, Expect: at(0), Next: &next,
				Runs: []*model.Run{f.run(j, cronAt(at(0)))},
			}}})
		}
		old := f.lead("a", time.Millisecond, t0)
		cur := f.takeOver("b", at(time.Second))

		_, err := fire(old.Term, at(2*time.Second))
		require.ErrorIs(t, err, model.ErrNotLeader, "the deposed leader's late fire is refused")
		got, err := f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j.ID})
		require.NoError(t, err)
		require.Equal(t, at(0), *got.NextFireAt, "nothing written: the schedule did not move")
		fired, err := f.s.FiredInstants(f.ctx, &store.FiredInstantsParams{JobID: j.ID, From: at(-time.Hour), To: at(time.Hour)})
		require.NoError(t, err)
		require.Empty(t, fired, "and no run was made")
		moved, err := f.s.SetPipelineNextFire(f.ctx, &store.SetPipelineNextFireParams{ID: "p", Expect: at(0), Next: &next,
			Term: old.Term, Now: at(2 * time.Second)})
		require.ErrorIs(t, err, model.ErrNotLeader, "a pipeline's schedule is fenced too")
		require.False(t, moved)

		res, err := fire(cur.Term, at(2*time.Second))
		require.NoError(t, err, "the current leader fires")
		require.False(t, res[0].Stale)
		fired, err = f.s.FiredInstants(f.ctx, &store.FiredInstantsParams{JobID: j.ID, From: at(-time.Hour), To: at(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, []time.Time{at(0)}, fired)
	})
}
