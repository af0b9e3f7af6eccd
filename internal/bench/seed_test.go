package bench

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/model"
)

// TestSeedGen checks the seeded history without a database: the number of runs, every one
// final and ended the way scheduler.Decide ends it, its attempts in step with its counters,
// all before the seeding's time, and cron jobs firing next after it.
func TestSeedGen(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	const n = 10000
	g, err := newSeedGen(n, now, 1)
	require.NoError(t, err)
	require.Len(t, g.jobs, n/seedRunsPerJob)
	jobs := map[string]*seedJob{}
	for i := range g.jobs {
		sj := &g.jobs[i]
		jobs[sj.job.ID] = sj
		if sj.cron {
			require.NotNil(t, sj.job.NextFireAt)
			require.True(t, sj.job.NextFireAt.After(now), "a cron job fires next after the seeding")
			require.True(t, sj.job.NextFireAt.Before(now.Add(24*time.Hour)), "daily")
		} else {
			require.Nil(t, sj.job.NextFireAt)
			require.Equal(t, sj.job.ID, sj.job.Name, "nameless, as the API names it")
		}
	}
	require.Len(t, jobs, len(g.jobs), "job ids are unique")

	var all []seedRun
	for {
		c := g.next(777)
		if len(c) == 0 {
			break
		}
		all = append(all, c...)
	}
	require.Len(t, all, n)
	ids := map[string]bool{}
	byStatus := map[model.RunStatus]int{}
	attempts, cronRuns := 0, 0
	for _, sr := range all {
		r := sr.run
		require.False(t, ids[r.ID], "run ids are unique")
		ids[r.ID] = true
		sj := jobs[r.JobID]
		require.NotNil(t, sj, "run %s names a seeded job", r.ID)
		byStatus[r.Status]++
		require.Contains(t, []model.RunStatus{model.RunSucceeded, model.RunFailed}, r.Status)
		require.Empty(t, r.PendingCode)
		require.Empty(t, r.PendingReason)
		require.NotNil(t, r.StartedAt)
		require.NotNil(t, r.FinishedAt)
		require.True(t, r.FinishedAt.Before(now), "finished before the seeding")
		require.False(t, r.StartedAt.Before(r.CreatedAt))
		require.Equal(t, sj.job.Spec.Queue, r.Queue)
		require.Equal(t, seedMaxAttempt, r.MaxAttempts)
		require.Len(t, sr.attempts, r.Attempt, "one attempts row per attempt")
		require.Equal(t, sr.attempts[len(sr.attempts)-1].StartedAt, sr.attemptStartedAt)
		require.Equal(t, sr.attempts[len(sr.attempts)-1].WorkerID, r.WorkerID)
		for i, a := range sr.attempts {
			require.Equal(t, i+1, a.N)
			require.Equal(t, r.ID, a.RunID)
			last := i == len(sr.attempts)-1
			if last && r.Status == model.RunSucceeded {
				require.Equal(t, model.AttemptSucceeded, a.Status)
			} else {
				require.Equal(t, model.AttemptFailed, a.Status)
			}
		}
		if r.Status == model.RunFailed {
			require.Equal(t, seedMaxAttempt, r.Attempt, "failed runs spent their attempts")
			require.Equal(t, "seeded failure", r.Error)
		}
		attempts += r.Attempt
		if sj.cron {
			cronRuns++
			require.Equal(t, model.TriggerCron, r.Trigger)
			require.Zero(t, r.CreatedAt.Add(2*time.Second).Second(), "cron runs are made 2 s before an instant on the minute")
		} else {
			require.Contains(t, []model.Trigger{model.TriggerSubmit, model.TriggerManual}, r.Trigger)
		}
	}
	require.Equal(t, n/seedCronEvery, cronRuns)
	// 4% of runs fail every attempt, 6% fail once: with 10,000 runs these land well
	// within the bounds below for any random draw that follows those shares.
	require.InDelta(t, 0.04*n, byStatus[model.RunFailed], 0.01*n)
	require.InDelta(t, 1.14*n, attempts, 0.03*n)
}

// TestSeedStore seeds a scratch PostgreSQL database behind a server the bench started and
// checks that the server serves the history as its own: the counts in the tables, the
// failed runs listed with their attempts, and a manual retry of a seeded failed run that
// the local worker then runs to success.
func TestSeedStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	base := os.Getenv("STINT_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("STINT_TEST_DATABASE_URL not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := startServer(ctx, Config{Store: base, Slots: 10, Logger: slog.New(slog.DiscardHandler)}, nil)
	require.NoError(t, err)
	defer srv.stop()
	const n = 3000
	st, err := seedStore(ctx, srv.storeURL, n, time.Now())
	require.NoError(t, err)
	require.Equal(t, n, st.runs)
	require.Equal(t, n/seedRunsPerJob, st.jobs)
	require.Equal(t, n, st.byStatus[model.RunSucceeded]+st.byStatus[model.RunFailed])

	conn, err := pgx.Connect(ctx, srv.storeURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var runs, attempts, jobs, failed int
	require.NoError(t, conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM attempts),
		(SELECT count(*) FROM jobs), (SELECT count(*) FROM runs WHERE status = 'failed')`).Scan(&runs, &attempts, &jobs, &failed))
	require.Equal(t, []int{n, st.attempts, st.jobs, st.byStatus[model.RunFailed]}, []int{runs, attempts, jobs, failed})

	c, err := client.New(srv.url, client.WithPollInterval(20*time.Millisecond))
	require.NoError(t, err)
	page, err := c.ListRuns(ctx, client.ListRunsOptions{Status: "failed", Limit: 1000})
	require.NoError(t, err)
	require.Len(t, page.Items, failed)
	run, err := c.GetRun(ctx, page.Items[0].ID)
	require.NoError(t, err)
	require.Len(t, run.Attempts, seedMaxAttempt)
	for _, a := range run.Attempts {
		require.Equal(t, "failed", a.Status)
	}
	retried, err := c.RetryRun(ctx, run.ID)
	require.NoError(t, err)
	require.Contains(t, []string{"queued", "scheduled"}, retried.Status)
	done, err := c.WaitRun(ctx, run.ID, client.Finished)
	require.NoError(t, err)
	require.Equal(t, "succeeded", done.Status, "the local worker ran the seeded job's handler")
	require.Len(t, done.Attempts, seedMaxAttempt+1)
}
