package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/storetest"
)

// TestHeartbeatLocksNoEndedRun: a heartbeat that lists a lease whose attempt already ended
// (as a worker does until its completion is acknowledged) neither extends nor locks that
// run. Another transaction holds the ended run's row lock meanwhile: the heartbeat must
// answer without waiting for it, and still extend the lease that is live.
func TestHeartbeatLocksNoEndedRun(t *testing.T) {
	s := openTest(t)
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	_, _, err := s.RegisterWorker(ctx, &store.RegisterWorkerParams{ID: "w", Session: "s",
		Capacity: model.Capacity{Slots: 4}, Handlers: []string{"noop"}, Now: now, Takeover: true})
	require.NoError(t, err)
	_, err = s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: oneOffJobs(now, 2), Now: now})
	require.NoError(t, err)
	ls, err := storetest.Leases(s.LeaseRuns(ctx, &store.LeaseRunsParams{WorkerID: "w", Max: 2, LeaseTTL: time.Minute, Now: now,
		Handlers: []string{"noop"}}))
	require.NoError(t, err)
	require.Len(t, ls, 2)
	ended, live := ls[0], ls[1]
	res, err := s.CompleteAttempts(ctx, &store.CompleteAttemptsParams{Now: now.Add(time.Second),
		Completions: []store.Completion{{RunID: ended.Run.ID, Token: ended.Token, Status: model.AttemptSucceeded}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	locker, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = locker.Rollback(ctx) }()
	var lockerPID int
	require.NoError(t, locker.QueryRow(ctx, `SELECT pg_backend_pid() FROM runs WHERE id = $1 FOR UPDATE`, ended.Run.ID).Scan(&lockerPID))

	type answer struct {
		res []store.HeartbeatResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := s.Heartbeat(ctx, &store.HeartbeatParams{LeaseTTL: time.Hour, Now: now.Add(2 * time.Second),
			Beats: []store.Beat{{WorkerID: "w", Session: "s", Held: []store.LeaseRef{
				{RunID: ended.Run.ID, Token: ended.Token}, {RunID: live.Run.ID, Token: live.Token}}}}})
		done <- answer{res, err}
	}()
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case a := <-done:
			require.NoError(t, a.err)
			require.Len(t, a.res, 1)
			require.NoError(t, a.res[0].Err)
			require.Equal(t, []string{ended.Run.ID}, a.res[0].Ended)
			require.Empty(t, a.res[0].Lost)
			var exp time.Time
			require.NoError(t, s.pool.QueryRow(ctx, `SELECT lease_expires_at FROM runs WHERE id = $1`, live.Run.ID).Scan(&exp))
			require.True(t, exp.Equal(now.Add(2*time.Second+time.Hour)), "the live lease is extended: %v", exp)
			return
		case <-poll.C:
			var blocked int
			require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE $1 = ANY(pg_blocking_pids(pid))`, lockerPID).Scan(&blocked))
			require.Zero(t, blocked, "the heartbeat waits for the lock of a run whose lease ended")
		}
	}
}
