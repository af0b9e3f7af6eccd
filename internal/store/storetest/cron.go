package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func testCron(t *testing.T, open OpenFunc) {
	// cronJob stores an enabled cron job whose next fire is next.
	cronJob := func(f *fx, name string, next time.Time, mods ...func(*model.Job)) *model.Job {
		f.t.Helper()
		j := f.job(name, func(j *model.Job) {
			j.Spec.Schedule = &model.Schedule{Cron: "* * * * *"}
			j.NextFireAt = &next
		})
		for _, m := range mods {
			m(j)
		}
		return f.createJob(j, nil).Job
	}
	cronRun := func(f *fx, j *model.Job, instant time.Time) *model.Run {
		return f.run(j, cronAt(instant))
	}

	t.Run("NextFireAndDueJobs", func(t *testing.T) {
		f := setup(t, open)
		_, ok, err := f.s.NextFire(f.ctx, &store.NextFireParams{})
		require.NoError(t, err)
		require.False(t, ok, "no job has a next fire")

		late := cronJob(f, "late", at(time.Minute))
		early := cronJob(f, "early", at(10*time.Second))
		cronJob(f, "off", at(time.Second), func(j *model.Job) { j.Enabled = false })
		f.submit("plain")

		next, ok, err := f.s.NextFire(f.ctx, &store.NextFireParams{})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, at(10*time.Second), next, "the earliest enabled job's; a disabled one does not count")
		next, ok, err = f.s.NextFire(f.ctx, &store.NextFireParams{After: at(10 * time.Second)})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, at(time.Minute), next, "strictly after the bound")

		due, err := f.s.DueJobs(f.ctx, &store.DueJobsParams{Now: at(30 * time.Second)})
		require.NoError(t, err)
		require.Len(t, due, 1)
		require.Equal(t, early.ID, due[0].ID)

		due, err = f.s.DueJobs(f.ctx, &store.DueJobsParams{Now: at(time.Hour), Limit: 5})
		require.NoError(t, err)
		require.Equal(t, []string{early.ID, late.ID}, []string{due[0].ID, due[1].ID}, "earliest first")
		due, err = f.s.DueJobs(f.ctx, &store.DueJobsParams{Now: at(time.Hour), Limit: 1})
		require.NoError(t, err)
		require.Len(t, due, 1, "at most Limit")
	})

	t.Run("FireAdvancesAndCreatesRuns", func(t *testing.T) {
		f := setup(t, open)
		j := cronJob(f, "nightly", at(0))
		next := at(time.Minute)
		res, err := f.s.FireJobs(f.ctx, &store.FireJobsParams{Now: at(time.Second), Fires: []store.Fire{{
			JobID: j.ID, Expect: at(0), Next: &next, Runs: []*model.Run{cronRun(f, j, at(0))},
		}}})
		require.NoError(t, err)
		require.Len(t, res, 1)
		require.False(t, res[0].Stale)
		require.Len(t, res[0].Runs, 1)
		require.NoError(t, res[0].Runs[0].Err)
		require.Equal(t, model.RunQueued, res[0].Runs[0].Run.Status)
		require.Equal(t, at(0), f.getRun(res[0].Runs[0].Run.ID).ScheduledFor)

		got, err := f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j.ID})
		require.NoError(t, err)
		require.Equal(t, next, *got.NextFireAt)

		// A second server that read the old next fire: stale, nothing written.
		res, err = f.s.FireJobs(f.ctx, &store.FireJobsParams{Now: at(time.Second), Fires: []store.Fire{{
			JobID: j.ID, Expect: at(0), Next: &next, Runs: []*model.Run{cronRun(f, j, at(0))},
		}}})
		require.NoError(t, err)
		require.True(t, res[0].Stale)
		page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{JobID: j.ID})
		require.NoError(t, err)
		require.Len(t, page.Runs, 1, "a stale fire creates no run")
	})

	t.Run("CronInstantFiresOnce", func(t *testing.T) {
		f := setup(t, open)
		j := cronJob(f, "once", at(0))
		first := f.createRuns(cronRun(f, j, at(0)))[0]
		// The schedule moved on (e.g. PATCH) but the instant was fired: the store answers
		// with the run it has (invariant 4).
		next := at(time.Minute)
		res, err := f.s.FireJobs(f.ctx, &store.FireJobsParams{Now: at(time.Second), Fires: []store.Fire{{
			JobID: j.ID, Expect: at(0), Next: &next, Runs: []*model.Run{cronRun(f, j, at(0)), cronRun(f, j, at(30*time.Second))},
		}}})
		require.NoError(t, err)
		require.False(t, res[0].Stale)
		require.True(t, res[0].Runs[0].Existing)
		require.Equal(t, first.ID, res[0].Runs[0].Run.ID)
		require.False(t, res[0].Runs[1].Existing)
		page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{JobID: j.ID})
		require.NoError(t, err)
		require.Len(t, page.Runs, 2)
	})

	t.Run("CronRunRetriedAtOnceKeepsItsInstant", func(t *testing.T) {
		// A cron run queued again at once, its attempt lost (a disruption: the worker
		// died) or failed with no backoff, still holds its instant: the job's fired
		// instants list it, and firing the instant again answers with that run rather
		// than making a second one (invariant 4).
		for _, status := range []model.AttemptStatus{model.AttemptLost, model.AttemptFailed} {
			t.Run(string(status), func(t *testing.T) {
				f := setup(t, open)
				j := cronJob(f, "kept", at(time.Minute), func(j *model.Job) { j.Spec.Retry.MaxAttempts = 2 })
				run := f.createRuns(cronRun(f, j, at(0)))[0]
				l := f.leaseOne("w", at(time.Second))
				require.Equal(t, run.ID, l.Run.ID)
				again := f.finish(l, status, nil, at(5*time.Second))
				require.Equal(t, model.RunQueued, again.Status)
				require.Equal(t, at(0), again.ScheduledFor, "the run keeps its due time")
				require.Equal(t, at(0), *again.Instant, "and its instant")

				fired, err := f.s.FiredInstants(f.ctx, &store.FiredInstantsParams{JobID: j.ID, From: at(-time.Minute), To: at(time.Minute)})
				require.NoError(t, err)
				require.Equal(t, []time.Time{at(0)}, fired)
				res, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{cronRun(f, j, at(0))}, Now: at(6 * time.Second)})
				require.NoError(t, err)
				require.True(t, res[0].Existing, "the instant fired once")
				require.Equal(t, run.ID, res[0].Run.ID)
			})
		}
	})

	t.Run("CronRunRetriedLaterKeepsItsInstant", func(t *testing.T) {
		// A cron run retried after a backoff, then by hand, is due later each time, but it
		// goes on holding the instant it was fired for (invariant 4): the job's fired
		// instants list that instant, not the due time; a backfill of the instant answers
		// with the run rather than making a second; and the schedule's instant equal to the
		// moved due time fires a run of its own.
		f := setup(t, open)
		j := cronJob(f, "retried", at(0), func(j *model.Job) {
			j.Spec.Retry = model.RetryPolicy{MaxAttempts: 2, InitialDelay: 30 * time.Second}
		})
		fire := func(instant time.Time) store.CreateRunResult {
			t.Helper()
			next := instant.Add(time.Minute)
			res, err := f.s.FireJobs(f.ctx, &store.FireJobsParams{Now: instant, Fires: []store.Fire{{
				JobID: j.ID, Expect: instant, Next: &next, Runs: []*model.Run{cronRun(f, j, instant)},
			}}})
			require.NoError(t, err)
			require.False(t, res[0].Stale)
			require.NoError(t, res[0].Runs[0].Err)
			return res[0].Runs[0]
		}
		firedIn := func(from, to time.Time) []time.Time {
			t.Helper()
			fired, err := f.s.FiredInstants(f.ctx, &store.FiredInstantsParams{JobID: j.ID, From: from, To: to})
			require.NoError(t, err)
			return fired
		}
		run := fire(at(0)).Run
		l := f.leaseOne("w", at(time.Second))
		require.Equal(t, run.ID, l.Run.ID)
		// Failed at 0:30, retried after 30 s: due at 1:00, the schedule's next instant.
		again := f.finish(l, model.AttemptFailed, nil, at(30*time.Second))
		require.Equal(t, model.RunScheduled, again.Status)
		require.Equal(t, model.PendingRetryBackoff, again.PendingCode)
		require.Equal(t, at(time.Minute), again.ScheduledFor, "the retry moved the due time")
		got := f.getRun(run.ID)
		require.Equal(t, at(time.Minute), got.ScheduledFor)
		require.Equal(t, at(0), *got.Instant, "but not the instant")
		require.Equal(t, []time.Time{at(0)}, firedIn(at(-time.Hour), at(time.Hour)))

		// A backfill of the range: the instant has its run.
		res, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{cronRun(f, j, at(0))}, Now: at(40 * time.Second)})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		require.True(t, res[0].Existing, "the instant fired once")
		require.Equal(t, run.ID, res[0].Run.ID)

		// The schedule's next instant, the retry's due time, gets its own run.
		next := fire(at(time.Minute))
		require.False(t, next.Existing, "a later instant is not taken by the retried run")
		require.NotEqual(t, run.ID, next.Run.ID)
		require.Equal(t, at(time.Minute), *next.Run.Instant)
		require.Equal(t, []time.Time{at(0), at(time.Minute)}, firedIn(at(-time.Hour), at(time.Hour)))
		require.Equal(t, []time.Time{at(time.Minute)}, firedIn(at(30*time.Second), at(time.Hour)), "the range is on the instant")

		// The retry fails for good; a manual retry makes it due now, still at its instant.
		n, err := f.s.PromoteDue(f.ctx, &store.PromoteDueParams{Now: at(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, 1, n, "the retry is due")
		for _, l := range f.lease("w", 2, at(61*time.Second)) {
			if l.Run.ID == run.ID {
				require.Equal(t, model.RunFailed, f.finish(l, model.AttemptFailed, nil, at(62*time.Second)).Status)
			}
		}
		retried, err := f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: run.ID, Now: at(5 * time.Minute)})
		require.NoError(t, err)
		require.Equal(t, at(5*time.Minute), retried.ScheduledFor)
		require.Equal(t, at(0), *retried.Instant)
		require.Equal(t, at(0), *f.getRun(run.ID).Instant)
		require.Equal(t, []time.Time{at(0), at(time.Minute)}, firedIn(at(-time.Hour), at(time.Hour)))
		res, err = f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{cronRun(f, j, at(0)), cronRun(f, j, at(time.Minute))},
			Now: at(5 * time.Minute)})
		require.NoError(t, err)
		require.True(t, res[0].Existing)
		require.Equal(t, run.ID, res[0].Run.ID)
		require.True(t, res[1].Existing)
		require.Equal(t, next.Run.ID, res[1].Run.ID)
		page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{JobID: j.ID})
		require.NoError(t, err)
		require.Len(t, page.Runs, 2, "one run per instant")
		for _, r := range page.Runs {
			require.NotNil(t, r.Instant, "lists carry the instant")
		}
	})

	t.Run("CronRunWithoutInstantIsRefused", func(t *testing.T) {
		// One run per (job, instant) is kept on the instant: a cron run without one would
		// escape it, so the store refuses it and writes nothing.
		f := setup(t, open)
		j := cronJob(f, "bare", at(0))
		bare := func() *model.Run {
			return f.run(j, func(r *model.Run) { r.Trigger, r.ScheduledFor = model.TriggerCron, at(0) })
		}
		_, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{bare()}, Now: t0})
		require.ErrorContains(t, err, "holds no instant")
		next := at(time.Minute)
		_, err = f.s.FireJobs(f.ctx, &store.FireJobsParams{Now: at(0), Fires: []store.Fire{{
			JobID: j.ID, Expect: at(0), Next: &next, Runs: []*model.Run{cronRun(f, j, at(0)), bare()},
		}}})
		require.ErrorContains(t, err, "holds no instant")
		got, err := f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j.ID})
		require.NoError(t, err)
		require.Equal(t, at(0), *got.NextFireAt, "the schedule did not move")
		page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{JobID: j.ID})
		require.NoError(t, err)
		require.Empty(t, page.Runs)
	})

	t.Run("FireOfDisabledOrDeletedJobIsStale", func(t *testing.T) {
		f := setup(t, open)
		off := cronJob(f, "off", at(0), func(j *model.Job) { j.Enabled = false })
		gone := cronJob(f, "gone", at(0))
		_, err := f.s.DeleteJob(f.ctx, &store.DeleteJobParams{ID: gone.ID, Now: t0})
		require.NoError(t, err)
		res, err := f.s.FireJobs(f.ctx, &store.FireJobsParams{Now: at(time.Second), Fires: []store.Fire{
			{JobID: off.ID, Expect: at(0), Runs: []*model.Run{cronRun(f, off, at(0))}},
			{JobID: gone.ID, Expect: at(0), Runs: []*model.Run{cronRun(f, gone, at(0))}},
		}})
		require.NoError(t, err)
		require.True(t, res[0].Stale)
		require.True(t, res[1].Stale)
	})

	t.Run("LastFireClearsNextFire", func(t *testing.T) {
		f := setup(t, open)
		j := cronJob(f, "last", at(0))
		_, err := f.s.FireJobs(f.ctx, &store.FireJobsParams{Now: at(time.Second), Fires: []store.Fire{
			{JobID: j.ID, Expect: at(0), Runs: []*model.Run{cronRun(f, j, at(0))}},
		}})
		require.NoError(t, err)
		_, ok, err := f.s.NextFire(f.ctx, &store.NextFireParams{})
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("WebhookSecret", func(t *testing.T) {
		f := setup(t, open)
		j, _ := f.submit("hooked")
		_, err := f.s.WebhookSecret(f.ctx, &store.WebhookSecretParams{JobID: j.ID})
		require.ErrorIs(t, err, model.ErrNotFound, "no secret until one is set")
		require.NoError(t, f.s.SetWebhookSecret(f.ctx, &store.SetWebhookSecretParams{JobID: j.ID, Secret: "s1", Now: t0}))
		require.NoError(t, f.s.SetWebhookSecret(f.ctx, &store.SetWebhookSecretParams{JobID: j.ID, Secret: "s2", Now: t0}))
		got, err := f.s.WebhookSecret(f.ctx, &store.WebhookSecretParams{JobID: j.ID})
		require.NoError(t, err)
		require.Equal(t, "s2", got, "rotation replaces the secret")
		err = f.s.SetWebhookSecret(f.ctx, &store.SetWebhookSecretParams{JobID: "nope", Secret: "x", Now: t0})
		require.ErrorIs(t, err, model.ErrNotFound)
		_, err = f.s.DeleteJob(f.ctx, &store.DeleteJobParams{ID: j.ID, Now: t0})
		require.NoError(t, err)
		_, err = f.s.WebhookSecret(f.ctx, &store.WebhookSecretParams{JobID: j.ID})
		require.ErrorIs(t, err, model.ErrNotFound, "deleted with its job")
	})

	t.Run("FiredInstants", func(t *testing.T) {
		f := setup(t, open)
		j := cronJob(f, "hist", at(time.Hour))
		f.createRuns(cronRun(f, j, at(0)), cronRun(f, j, at(2*time.Minute)), cronRun(f, j, at(time.Minute)))
		f.createRuns(f.run(j, func(r *model.Run) { r.Trigger = model.TriggerManual; r.ScheduledFor = at(30 * time.Second) }))
		got, err := f.s.FiredInstants(f.ctx, &store.FiredInstantsParams{JobID: j.ID, From: at(0), To: at(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, []time.Time{at(0), at(time.Minute)}, got, "cron runs only, both ends included, ascending")
		page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{JobID: j.ID})
		require.NoError(t, err)
		for _, r := range page.Runs {
			if r.Trigger == model.TriggerCron {
				require.Equal(t, r.ScheduledFor, *r.Instant, "a cron run holds its instant")
			} else {
				require.Nil(t, r.Instant, "only cron runs have an instant")
			}
		}
	})
}
