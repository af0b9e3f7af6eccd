package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// RunInstantMigration checks migration 0011 (cron_instant) on an engine. It stores cron
// runs and a run of another trigger in s, a store at the newest schema; then before(t)
// takes that database back to its schema before 0011 (without the instant column, one cron
// run per job and scheduled_for) and opens it again, which applies 0011. The cron runs made
// before hold their scheduled_for as their instant, the other run none, and the new index
// keeps one cron run per (job, instant).
//
// oldFire, when the engine serves a cluster (PostgreSQL), writes a cron run of job for
// instant at as a server of the release before 0011 does during a rolling upgrade, without
// an instant, and reports whether the row went in (false: the key was taken). Both
// releases must keep one run per instant between them. nil: the engine has one server
// (SQLite), so no two releases share a database.
func RunInstantMigration(t *testing.T, s store.Store, before func(t *testing.T) store.Store,
	oldFire func(t *testing.T, job *model.Job, runID string, at time.Time) bool) {
	t.Helper()
	f := &fx{t: t, ctx: t.Context(), s: s}
	j := f.job("migrated", func(j *model.Job) {
		j.Spec.Schedule = &model.Schedule{Cron: "* * * * *"}
		j.NextFireAt = timep(at(2 * time.Minute))
	})
	f.createJob(j, nil)
	runs := f.createRuns(f.run(j, cronAt(at(0))), f.run(j, cronAt(at(time.Minute))), f.run(j, func(r *model.Run) {
		r.Trigger, r.ScheduledFor = model.TriggerManual, at(90*time.Second)
	}))

	f.s = before(t)
	fired, err := f.s.FiredInstants(f.ctx, &store.FiredInstantsParams{JobID: j.ID, From: at(-time.Hour), To: at(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, []time.Time{at(0), at(time.Minute)}, fired, "the cron runs' instants, from their scheduled_for")
	require.Equal(t, at(time.Minute), *f.getRun(runs[1].ID).Instant)
	require.Nil(t, f.getRun(runs[2].ID).Instant, "a manual run has no instant")
	res, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{f.run(j, cronAt(at(0)))}, Now: at(2 * time.Minute)})
	require.NoError(t, err)
	require.True(t, res[0].Existing, "an instant fired before the migration stays fired")
	require.Equal(t, runs[0].ID, res[0].Run.ID)
	if oldFire == nil {
		return
	}

	require.False(t, oldFire(t, j, f.id(), at(0)), "the old release finds the instant fired")
	old := f.id()
	require.True(t, oldFire(t, j, old, at(3*time.Minute)))
	require.False(t, oldFire(t, j, f.id(), at(3*time.Minute)), "nor does it fire an instant twice")
	got := f.getRun(old)
	require.Equal(t, at(3*time.Minute), *got.Instant, "its run is read with its instant")
	res, err = f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{f.run(j, cronAt(at(3*time.Minute)))}, Now: at(4 * time.Minute)})
	require.NoError(t, err)
	require.True(t, res[0].Existing, "the new release finds an instant the old one fired")
	require.Equal(t, old, res[0].Run.ID)
	fired, err = f.s.FiredInstants(f.ctx, &store.FiredInstantsParams{JobID: j.ID, From: at(-time.Hour), To: at(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, []time.Time{at(0), at(time.Minute), at(3 * time.Minute)}, fired)
}
