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
		return f.run(j, func(r *model.Run) { r.Trigger = model.TriggerCron; r.ScheduledFor = instant })
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
	})
}
