package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// anonymous builds an unnamed one-off job (its name is its id, as the API names it) that
// store.Anonymous stores as its run alone, with its queued first run (neither stored).
func (f *fx) anonymous(mods ...func(*model.Job)) (*model.Job, *model.Run) {
	f.t.Helper()
	j := f.job("", mods...)
	j.Name = j.ID
	j.RequestHash = "hash-of-" + j.ID
	r := f.run(j, func(r *model.Run) { r.Args = j.Spec.Args }) // as scheduler.NewRun makes it
	require.True(f.t, store.Anonymous(store.NewJob{Job: j, Run: r}), "the fixture must build an anonymous job")
	return j, r
}

// asRead is job j as GetJob answers it: times at microseconds in UTC, and, for an
// anonymous job, without the request hash, which serves idempotency keys alone.
func asRead(j *model.Job) *model.Job {
	c := *j
	c.CreatedAt, c.UpdatedAt, c.NextFireAt = micro(j.CreatedAt), micro(j.UpdatedAt), nil
	c.RequestHash = ""
	return &c
}

// listed returns the ids of the jobs ListJobs lists.
func (f *fx) listed() []string {
	f.t.Helper()
	page, err := f.s.ListJobs(f.ctx, &store.ListJobsParams{})
	require.NoError(f.t, err)
	ids := make([]string, len(page.Jobs))
	for i, j := range page.Jobs {
		ids[i] = j.ID
	}
	return ids
}

// testAnonymous checks one-off jobs stored as their run alone (store.Anonymous): everything
// a job's reader and its runs see is as if it had its row, except that ListJobs, a list
// of definitions, does not list it until a change to it gives it one.
func testAnonymous(t *testing.T, open OpenFunc) {
	t.Run("CreateGetLeaseComplete", func(t *testing.T) {
		f := setup(t, open)
		named := f.job("named")
		j, r := f.anonymous(func(j *model.Job) {
			j.Spec = model.JobSpec{Command: []string{"sh", "-c", "exit 3"}, Args: rawJSON(`{"a":1}`),
				Env: map[string]string{"K": "V"}, SecretEnv: map[string]string{"S": "sealed"}, Dir: "/tmp",
				Queue: "anon", Priority: 3, Timeout: time.Minute, Tags: []string{"t"},
				Requirements: model.Requirements{CPU: 0.5, Labels: map[string]string{"zone": "a"}},
				Retry:        model.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Second, FinalExitCodes: []int{9}}}
		})
		j2, r2 := f.anonymous()
		res, err := f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Now: t0,
			Jobs: []store.NewJob{{Job: j, Run: r}, {Job: named, Run: f.run(named)}, {Job: j2, Run: r2}}})
		require.NoError(t, err)
		require.Len(t, res, 3)
		for _, x := range res {
			require.NoError(t, x.Err)
			require.False(t, x.Existing)
		}
		require.Equal(t, j.ID, res[0].Job.ID)
		require.Equal(t, r.ID, res[0].Run.ID)
		require.Equal(t, j.Spec.Requirements, res[0].Run.Requirements, "the run books its job's requirements")

		for _, key := range []string{j.ID} {
			got, err := f.s.GetJob(f.ctx, &store.GetJobParams{Namespace: model.DefaultNamespace, IDOrName: key})
			require.NoError(t, err)
			require.Equal(t, asRead(j), got)
		}
		got, err := f.s.GetJob(f.ctx, &store.GetJobParams{Namespace: "elsewhere", IDOrName: j2.ID})
		require.NoError(t, err, "an id matches in any namespace")
		require.Equal(t, asRead(j2), got)
		require.Equal(t, []string{named.ID}, f.listed(), "the jobs list lists definitions: an anonymous job has none")
		last, err := f.s.LastRuns(f.ctx, &store.LastRunsParams{JobIDs: []string{j.ID}})
		require.NoError(t, err)
		require.Equal(t, r.ID, last[j.ID].ID)

		// The lease carries the job's spec from the run; the failed attempt is retried under
		// the run's own retry policy (one more attempt, after InitialDelay at draw 0.5).
		f.register("w", "s", t0)
		ls := f.lease("w", 10, t0)
		require.ElementsMatch(t, []string{r.ID, r2.ID, res[1].Run.ID}, leaseIDs(ls))
		var l *model.Lease
		for _, x := range ls {
			if x.Run.ID == r.ID {
				l = x
			}
		}
		want := j.Spec
		want.Args = nil // a lease's args are its run's
		require.Equal(t, want, l.Spec)
		require.JSONEq(t, string(j.Spec.Args), string(l.Run.Args))
		c := f.complete(store.Completion{RunID: r.ID, Token: l.Token, Status: model.AttemptFailed, ExitCode: intp(3), Error: "exit 3"},
			at(time.Second), func() float64 { return 0.5 })
		require.NoError(t, c.Err)
		require.Equal(t, model.RunScheduled, c.Run.Status)
		require.Equal(t, model.PendingRetryBackoff, c.Run.PendingCode)
		require.Equal(t, micro(at(2*time.Second)), c.Run.ScheduledFor)

		// The running one is a fact of the run_too_long rule, with its job's name and timeout.
		facts, err := f.s.AlertFacts(f.ctx, &store.AlertFactsParams{Now: at(time.Hour), FailedAfter: at(time.Hour),
			StreakJobs: []string{j.ID}, Streak: 5, RunningBefore: at(time.Hour)})
		require.NoError(t, err)
		var running []string
		for _, x := range facts.Running {
			running = append(running, x.ID)
			if x.ID == r2.ID {
				require.Equal(t, j2.ID, x.Job.ID)
				require.Equal(t, j2.Name, x.Job.Name)
				require.Equal(t, j2.Namespace, x.Job.Namespace)
			}
		}
		require.ElementsMatch(t, []string{r2.ID, res[1].Run.ID}, running)
		require.Len(t, facts.Streaks, 1)
		require.Equal(t, j.Name, facts.Streaks[0].Job.Name, "an anonymous job has a streak, like any job")
		require.Equal(t, time.Minute, facts.Streaks[0].Job.Timeout)
	})

	t.Run("BesideATakenName", func(t *testing.T) {
		// A taken name sends the batch down the engines' slow paths (entry by entry, or ON
		// CONFLICT): the anonymous entries go in all the same, as their run alone.
		f := setup(t, open)
		f.submit("dup")
		dup := f.job("dup")
		j, r := f.anonymous()
		j2, r2 := f.anonymous()
		res, err := f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Now: t0,
			Jobs: []store.NewJob{{Job: j, Run: r}, {Job: dup, Run: f.run(dup)}, {Job: j2, Run: r2}}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		require.ErrorIs(t, res[1].Err, model.ErrConflict)
		require.NoError(t, res[2].Err)
		for _, x := range []*model.Job{j, j2} {
			got, err := f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: x.ID})
			require.NoError(t, err)
			require.Equal(t, asRead(x), got)
		}
		require.Len(t, f.listed(), 1, "the first dup alone")
		f.register("w", "s", t0)
		ls := f.lease("w", 10, t0)
		require.Len(t, ls, 3, "the first dup's run and the two anonymous runs")
		require.ElementsMatch(t, []string{r.ID, r2.ID}, leaseIDs(ls)[1:])
	})

	t.Run("ChangesGiveItARow", func(t *testing.T) {
		f := setup(t, open)
		// Update: the job becomes a definition like any other, and its queued run takes the
		// new spec at its lease.
		j, r := f.anonymous()
		f.createJob(j, r)
		spec := j.Spec
		spec.Command = []string{"false"}
		upd, err := f.s.UpdateJob(f.ctx, &store.UpdateJobParams{ID: j.ID, Spec: spec, Enabled: true, Now: at(time.Second)})
		require.NoError(t, err)
		require.Equal(t, spec, upd.Spec)
		require.Equal(t, micro(t0), upd.CreatedAt)
		require.Equal(t, []string{j.ID}, f.listed())
		got, err := f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j.ID})
		require.NoError(t, err)
		require.Equal(t, upd, got)
		f.register("w", "s", t0)
		l := f.leaseOne("w", at(time.Second))
		require.Equal(t, r.ID, l.Run.ID)
		require.Equal(t, spec, l.Spec, "the run reads its job's row once the job has one")

		// Trigger: a new run of an anonymous job.
		j2, r2 := f.anonymous()
		f.createJob(j2, r2)
		again := f.run(j2, func(r *model.Run) { r.Trigger = model.TriggerManual })
		f.createRuns(again)
		require.ElementsMatch(t, []string{j.ID, j2.ID}, f.listed())
		ls := f.lease("w", 10, at(time.Second))
		require.ElementsMatch(t, []string{r2.ID, again.ID}, leaseIDs(ls))
		for _, x := range ls {
			require.Equal(t, j2.Spec, x.Spec)
		}

		// Webhook secret.
		j3, r3 := f.anonymous()
		f.createJob(j3, r3)
		require.NoError(t, f.s.SetWebhookSecret(f.ctx, &store.SetWebhookSecretParams{JobID: j3.ID, Secret: "s3", Now: t0}))
		sec, err := f.s.WebhookSecret(f.ctx, &store.WebhookSecretParams{JobID: j3.ID})
		require.NoError(t, err)
		require.Equal(t, "s3", sec)
		require.Contains(t, f.listed(), j3.ID)

		// An id that names no job, anonymous or not, is still not found.
		_, err = f.s.UpdateJob(f.ctx, &store.UpdateJobParams{ID: "nope", Spec: spec, Enabled: true, Now: t0})
		require.ErrorIs(t, err, model.ErrNotFound)
		cr, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{f.run(f.job("ghost"))}, Now: t0})
		require.NoError(t, err)
		require.ErrorIs(t, cr[0].Err, model.ErrNotFound)
	})

	t.Run("NameTakenStaysAnonymous", func(t *testing.T) {
		// A job named like an anonymous job's id takes the name its row would have: the
		// anonymous job cannot get a row, and keeps its spec on its run.
		f := setup(t, open)
		j, r := f.anonymous()
		f.createJob(j, r)
		named, _ := f.submit(j.ID)
		got, err := f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j.ID})
		require.NoError(t, err)
		require.Equal(t, j.ID, got.ID, "an id names its job before a name does")
		require.Equal(t, j.Spec, got.Spec)
		got, err = f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: named.ID})
		require.NoError(t, err)
		require.Equal(t, j.ID, got.Name, "the named job, by its own id")
		spec := j.Spec
		spec.Command = []string{"false"}
		_, err = f.s.UpdateJob(f.ctx, &store.UpdateJobParams{ID: j.ID, Spec: spec, Enabled: true, Now: at(time.Second)})
		require.ErrorIs(t, err, model.ErrNotFound)
		f.register("w", "s", t0)
		for _, l := range f.lease("w", 10, t0) {
			if l.Run.ID == r.ID {
				require.Equal(t, j.Spec, l.Spec, "the run still carries its spec")
				return
			}
		}
		t.Fatal("the anonymous run was not leased")
	})

	t.Run("DeleteCancelRetry", func(t *testing.T) {
		f := setup(t, open)
		j, r := f.anonymous()
		f.createJob(j, r)
		cancelled, err := f.s.DeleteJob(f.ctx, &store.DeleteJobParams{ID: j.ID, Now: at(time.Second)})
		require.NoError(t, err)
		require.Equal(t, []string{r.ID}, runIDs(cancelled))
		_, err = f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j.ID})
		require.ErrorIs(t, err, model.ErrNotFound)
		require.Empty(t, f.listed())
		_, err = f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: r.ID, Now: at(2 * time.Second)})
		require.ErrorIs(t, err, model.ErrInvalidState, "its job was deleted")
		require.Equal(t, model.RunCancelled, f.getRun(r.ID).Status, "the run stays, as history")

		// A cancelled run of an anonymous job that still stands is retried as it is.
		j2, r2 := f.anonymous()
		f.createJob(j2, r2)
		_, err = f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{r2.ID}, Reason: "no", Now: at(time.Second)})
		require.NoError(t, err)
		re, err := f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: r2.ID, Now: at(2 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, model.RunQueued, re.Status)
		require.Empty(t, f.listed(), "a retry does not change the job")
		f.register("w", "s", t0)
		l := f.leaseOne("w", at(2*time.Second))
		require.Equal(t, j2.Spec, l.Spec)

		// Retention deletes an anonymous job with its run.
		f.finish(l, model.AttemptSucceeded, intp(0), at(3*time.Second))
		n := f.prune(store.PruneRunsParams{Before: at(time.Hour)})
		require.Equal(t, 2, n)
		_, err = f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j2.ID})
		require.ErrorIs(t, err, model.ErrNotFound)
	})

	t.Run("RetentionSparesNoAnonymousRun", func(t *testing.T) {
		f := setup(t, open)
		named := f.job("named")
		f.createJob(named, nil)
		kept := f.ended(named, model.AttemptSucceeded, at(time.Minute))
		j, r := f.anonymous()
		f.createJob(j, r)
		f.register("w", "s", t0)
		l := f.leaseOne("w", at(time.Minute))
		require.Equal(t, r.ID, l.Run.ID)
		f.finish(l, model.AttemptSucceeded, intp(0), at(2*time.Minute))

		// A job's newest runs are spared, but an anonymous job is its one run: sparing it
		// would keep every one-off job for ever.
		require.Equal(t, 1, f.prune(store.PruneRunsParams{Before: at(time.Hour), KeepPerJob: 10}))
		_, err := f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j.ID})
		require.ErrorIs(t, err, model.ErrNotFound, "the anonymous job went with its run")
		require.Equal(t, model.RunSucceeded, f.getRun(kept.ID).Status, "the named job's last run stays")
	})
}
