package service

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func TestCronFirer(t *testing.T) {
	t.Parallel()
	const idle = 5 * time.Minute

	type fired struct{ created, replaced []*model.Run }
	type testBundle struct {
		clk    *clock.Fake
		store  store.Store
		wake   *wakeup
		fired  *recorder[fired]
		counts *recorder[model.CronStats]
	}

	// startPipelineRun is a pipeline run of no steps, for the pipeline fire tests: the
	// engine's builds the steps' runs, the firer only sequences the call.
	startPipelineRun := func(st store.Store) func(context.Context, *model.Pipeline, time.Time, time.Time, *time.Time) error {
		return func(ctx context.Context, pl *model.Pipeline, at, now time.Time, fireNext *time.Time) error {
			pr := &model.PipelineRun{ID: id.New(now), PipelineID: pl.ID, PipelineName: pl.Name, Namespace: pl.Namespace,
				Trigger: model.TriggerCron, ScheduledFor: at, CreatedAt: now}
			_, err := st.CreateGraph(ctx, &store.CreateGraphParams{PipelineRun: pr, FireNext: fireNext, Now: now})
			return err
		}
	}

	// setup builds a cron firer on a fresh SQLite store and a fake clock at t0, its
	// signals live; mods change its config. It is started by start.
	setup := func(t *testing.T, mods ...func(*CronFirerConfig)) (*CronFirer, *testBundle) {
		t.Helper()
		st := openStore(t)
		b := &testBundle{clk: clock.NewFake(t0), store: st, wake: newWakeup(),
			fired: &recorder[fired]{}, counts: &recorder[model.CronStats]{}}
		cfg := CronFirerConfig{Store: st, Clock: b.clk, Logger: discard, Wake: b.wake.Wait, IdleWait: idle,
			StartPipelineRun: startPipelineRun(st),
			OnFired:          func(created, replaced []*model.Run) { b.fired.add(fired{created, replaced}) },
			OnCount:          b.counts.add}
		for _, m := range mods {
			m(&cfg)
		}
		c := NewCronFirer(cfg)
		c.TestSignals.Fired.Init(t)
		c.TestSignals.Slept.Init(t)
		c.TestSignals.Failed.Init(t)
		return c, b
	}
	start := func(t *testing.T, c *CronFirer) {
		t.Helper()
		require.NoError(t, c.Start(context.Background()))
		t.Cleanup(c.Stop)
	}
	// cronJob stores a job on schedule expr whose next fire is next.
	cronJob := func(t *testing.T, b *testBundle, name, expr string, next time.Time, c model.Concurrency) *model.Job {
		t.Helper()
		return newJob(t, b.store, name, func(j *model.Job) {
			j.Spec.Schedule = &model.Schedule{Cron: expr}
			j.Spec.Concurrency = c
			j.NextFireAt = &next
		})
	}
	runsOf := func(t *testing.T, b *testBundle, jobID string) []*model.Run {
		t.Helper()
		page, err := b.store.ListRuns(context.Background(), &store.ListRunsParams{JobID: jobID, Limit: 100})
		require.NoError(t, err)
		return page.Runs
	}
	nextFireOf := func(t *testing.T, b *testBundle, jobID string) time.Time {
		t.Helper()
		j, err := b.store.GetJob(context.Background(), &store.GetJobParams{IDOrName: jobID})
		require.NoError(t, err)
		require.NotNil(t, j.NextFireAt)
		return *j.NextFireAt
	}

	t.Run("sleeps until the earliest fire and fires each instant once", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t)
		first := t0.Add(7 * time.Minute)
		j := newJob(t, b.store, "every7", func(j *model.Job) {
			j.Spec.Schedule = &model.Schedule{Cron: "*/7 * * * *", Timezone: "Europe/Berlin"}
			j.NextFireAt = &first
		})
		start(t, c)

		for i, at := range []time.Time{first, first.Add(7 * time.Minute), first.Add(14 * time.Minute)} {
			require.Equal(t, at, c.TestSignals.Slept.WaitOrTimeout(), "asleep until exactly the next fire")
			require.Len(t, runsOf(t, b, j.ID), i, "nothing fires before the instant")
			b.clk.Set(at)
			require.Equal(t, CronPass{Now: at, Jobs: 1}, c.TestSignals.Fired.WaitOrTimeout())
			runs := runsOf(t, b, j.ID) // newest first
			require.Len(t, runs, i+1)
			require.Equal(t, model.TriggerCron, runs[0].Trigger)
			require.Equal(t, at, runs[0].ScheduledFor, "the run is due at its instant")
			require.Equal(t, at, *runs[0].Instant, "and holds it")
			require.Equal(t, model.RunQueued, runs[0].Status)
			require.Equal(t, at.Add(7*time.Minute), nextFireOf(t, b, j.ID))
			fired := b.fired.all()
			require.Len(t, fired, i+1)
			require.Equal(t, runs[0].ID, fired[i].created[0].ID)
		}
		require.Equal(t, []model.CronStats{{Runs: 1}, {Runs: 1}, {Runs: 1}}, b.counts.all())
		require.Equal(t, first.Add(21*time.Minute), c.TestSignals.Slept.WaitOrTimeout())
	})

	t.Run("fires a free job Lead ahead and a limited one at its instant", func(t *testing.T) {
		t.Parallel()
		const lead = 2 * time.Second
		c, b := setup(t, func(c *CronFirerConfig) { c.Lead = lead })
		instant := t0.Add(7 * time.Minute)
		free := cronJob(t, b, "free", "*/7 * * * *", instant, model.Concurrency{})
		limited := cronJob(t, b, "limited", "*/7 * * * *", instant, model.Concurrency{Policy: "forbid"})
		start(t, c)

		require.Equal(t, instant.Add(-lead), c.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(instant.Add(-lead))
		require.Equal(t, CronPass{Now: instant.Add(-lead), Jobs: 1}, c.TestSignals.Fired.WaitOrTimeout())
		ahead := runsOf(t, b, free.ID)
		require.Len(t, ahead, 1)
		require.Equal(t, model.RunScheduled, ahead[0].Status, "created ahead, due at its instant")
		require.Equal(t, instant, ahead[0].ScheduledFor)
		require.Empty(t, runsOf(t, b, limited.ID))

		require.Equal(t, instant, c.TestSignals.Slept.WaitOrTimeout(), "the limited job's instant, inside the lead")
		b.clk.Set(instant)
		require.Equal(t, CronPass{Now: instant, Jobs: 1}, c.TestSignals.Fired.WaitOrTimeout())
		require.Len(t, runsOf(t, b, limited.ID), 1)
		require.Equal(t, instant.Add(7*time.Minute-lead), c.TestSignals.Slept.WaitOrTimeout())
	})

	t.Run("fires a pipeline at its instant", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t)
		instant := t0.Add(5 * time.Minute)
		pl, _, err := b.store.PutPipeline(context.Background(), &store.PutPipelineParams{Now: t0, Pipeline: &model.Pipeline{
			ID: id.New(t0), Namespace: model.DefaultNamespace, Name: "etl", Enabled: true,
			Spec: model.PipelineSpec{Schedule: &model.Schedule{Cron: "*/5 * * * *"}}, NextFireAt: &instant}})
		require.NoError(t, err)
		start(t, c)

		require.Equal(t, instant, c.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(instant)
		require.Equal(t, CronPass{Now: instant, Pipelines: 1}, c.TestSignals.Fired.WaitOrTimeout())
		page, err := b.store.ListPipelineRuns(context.Background(), &store.ListPipelineRunsParams{PipelineID: pl.ID})
		require.NoError(t, err)
		require.Len(t, page.Runs, 1)
		require.Equal(t, instant, page.Runs[0].ScheduledFor)
		require.Equal(t, instant.Add(5*time.Minute), c.TestSignals.Slept.WaitOrTimeout(), "the schedule moved on")
	})

	t.Run("woken early by a schedule change", func(t *testing.T) {
		t.Parallel()
		c, b := setup(t)
		start(t, c)
		require.Equal(t, t0.Add(idle), c.TestSignals.Slept.WaitOrTimeout())
		cronJob(t, b, "new", "* * * * *", t0.Add(time.Minute), model.Concurrency{})
		b.wake.Notify()
		require.Equal(t, t0.Add(time.Minute), c.TestSignals.Slept.WaitOrTimeout())
	})

	t.Run("retries after a store error", func(t *testing.T) {
		t.Parallel()
		fake := &fakeStore{nextFire: failOnce(func(context.Context) (time.Time, bool, error) {
			return t0.Add(time.Minute), true, nil
		})}
		c, b := setup(t, func(c *CronFirerConfig) { c.Store = fake })
		start(t, c)
		require.ErrorIs(t, c.TestSignals.Failed.WaitOrTimeout(), errOutage)
		require.Equal(t, t0.Add(DefaultRetryDelay), c.TestSignals.Slept.WaitOrTimeout())
		b.clk.Set(t0.Add(DefaultRetryDelay))
		require.Equal(t, t0.Add(time.Minute), c.TestSignals.Slept.WaitOrTimeout())
	})

	t.Run("Start needs StartPipelineRun", func(t *testing.T) {
		t.Parallel()
		c, _ := setup(t, func(c *CronFirerConfig) { c.StartPipelineRun = nil })
		require.ErrorIs(t, c.Start(context.Background()), errNoPipelineRuns)
	})

	t.Run("Stop ends it", func(t *testing.T) {
		t.Parallel()
		fake := &fakeStore{}
		c, b := setup(t, func(c *CronFirerConfig) { c.Store = fake })
		start(t, c)
		require.Equal(t, t0.Add(idle), c.TestSignals.Slept.WaitOrTimeout())
		c.Stop()
		calls := fake.calls.Load()
		b.wake.Notify()
		b.clk.Set(t0.Add(idle))
		require.Equal(t, calls, fake.calls.Load(), "no store call after Stop")
		require.ErrorIs(t, c.Start(context.Background()), ErrStopped)
	})

	t.Run("DeposedTermFiresNothing", func(t *testing.T) {
		c, b := setup(t, func(cfg *CronFirerConfig) { cfg.Term = 1 })
		l, err := b.store.TryLead(t.Context(), &store.TryLeadParams{Holder: "old", TTL: time.Second, Now: t0})
		require.NoError(t, err)
		require.Equal(t, int64(1), l.Term)
		// The lease passed to another server while this firer's server was paused.
		l, err = b.store.TryLead(t.Context(), &store.TryLeadParams{Holder: "new", TTL: time.Hour, Now: t0.Add(2 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, int64(2), l.Term)
		j := cronJob(t, b, "late", "* * * * *", t0, model.Concurrency{})
		start(t, c)
		require.ErrorIs(t, c.TestSignals.Failed.WaitOrTimeout(), model.ErrNotLeader, "the store refuses the stale term")
		require.Empty(t, runsOf(t, b, j.ID), "nothing fired")
		require.Equal(t, t0, nextFireOf(t, b, j.ID), "the schedule did not move")
		require.Empty(t, b.fired.all())
	})
}
