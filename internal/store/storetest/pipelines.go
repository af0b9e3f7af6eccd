package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// testPipelines checks pipeline definitions and pipeline runs: a run per step with the
// edges between them, created with the pipeline run all or nothing, a cron instant fired
// at most once, and the state of the whole from its steps.
func testPipelines(t *testing.T, open OpenFunc) {
	pipeline := func(f *fx, name string, mods ...func(*model.Pipeline)) *model.Pipeline {
		p := &model.Pipeline{ID: f.id(), Namespace: model.DefaultNamespace, Name: name, Enabled: true,
			Spec: model.PipelineSpec{Steps: []model.PipelineStep{{Name: "only", JobID: "j"}}}}
		for _, m := range mods {
			m(p)
		}
		return p
	}
	// trigger starts a pipeline run of three steps (extract -> transform -> load) over new
	// jobs, and returns it with the runs by step.
	trigger := func(f *fx, pl *model.Pipeline, mods ...func(*store.CreateGraphParams)) (*model.PipelineRun, map[string]*model.Run, error) {
		f.t.Helper()
		pr := &model.PipelineRun{ID: f.id(), PipelineID: pl.ID, PipelineName: pl.Name, Namespace: pl.Namespace,
			Trigger: model.TriggerManual, ScheduledFor: t0, CreatedAt: t0, Args: []byte(`{"day":"2026-01-02"}`)}
		steps := []string{"extract", "transform", "load"}
		runs := map[string]*model.Run{}
		p := &store.CreateGraphParams{PipelineRun: pr, Steps: steps, Now: t0}
		var prev *model.Run
		for _, s := range steps {
			j := f.job(fmt.Sprintf("%s.%s.%s", pl.Name, s, pr.ID[len(pr.ID)-6:]))
			f.createJob(j, nil)
			r := f.run(j, func(r *model.Run) { r.Trigger, r.Args = model.TriggerPipeline, pr.Args })
			if prev != nil {
				r.DependsOn = []model.Dependency{{RunID: prev.ID, Condition: model.CondSucceeded}}
			}
			runs[s], prev = r, r
			p.Runs = append(p.Runs, r)
		}
		for _, m := range mods {
			m(p)
		}
		_, err := f.s.CreateGraph(f.ctx, p)
		return pr, runs, err
	}

	t.Run("PutGetListDelete", func(t *testing.T) {
		f := setup(t, open)
		pl := pipeline(f, "etl")
		got, created, err := f.s.PutPipeline(f.ctx, &store.PutPipelineParams{Pipeline: pl, Now: t0})
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, pl.ID, got.ID)
		require.Equal(t, t0, got.CreatedAt)

		// Put again under the same name: the spec changes, the id and creation time stay.
		again := pipeline(f, "etl", func(p *model.Pipeline) {
			p.Spec.Schedule = &model.Schedule{Cron: "0 2 * * *"}
			p.NextFireAt = timep(at(time.Hour))
		})
		got, created, err = f.s.PutPipeline(f.ctx, &store.PutPipelineParams{Pipeline: again, Now: at(time.Minute)})
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, pl.ID, got.ID)
		require.Equal(t, t0, got.CreatedAt)
		require.Equal(t, at(time.Minute), got.UpdatedAt)
		require.Equal(t, "0 2 * * *", got.Spec.Schedule.Cron)

		for _, key := range []string{pl.ID, "etl"} {
			byKey, err := f.s.GetPipeline(f.ctx, &store.GetPipelineParams{Namespace: model.DefaultNamespace, IDOrName: key})
			require.NoError(t, err)
			require.Equal(t, got, byKey)
		}
		_, _, err = f.s.PutPipeline(f.ctx, &store.PutPipelineParams{Pipeline: pipeline(f, "backup"), Now: t0})
		require.NoError(t, err)
		list, err := f.s.ListPipelines(f.ctx, &store.ListPipelinesParams{Namespace: model.DefaultNamespace})
		require.NoError(t, err)
		require.Equal(t, []string{"backup", "etl"}, []string{list[0].Name, list[1].Name})

		// A pipeline has a webhook secret like a job, deleted with it.
		require.NoError(t, f.s.SetWebhookSecret(f.ctx, &store.SetWebhookSecretParams{JobID: pl.ID, Secret: "s3cret", Now: t0}))
		secret, err := f.s.WebhookSecret(f.ctx, &store.WebhookSecretParams{JobID: pl.ID})
		require.NoError(t, err)
		require.Equal(t, "s3cret", secret)

		require.NoError(t, f.s.DeletePipeline(f.ctx, &store.DeletePipelineParams{ID: pl.ID}))
		_, err = f.s.WebhookSecret(f.ctx, &store.WebhookSecretParams{JobID: pl.ID})
		require.ErrorIs(t, err, model.ErrNotFound)
		_, err = f.s.GetPipeline(f.ctx, &store.GetPipelineParams{IDOrName: "etl"})
		require.ErrorIs(t, err, model.ErrNotFound)
		require.ErrorIs(t, f.s.DeletePipeline(f.ctx, &store.DeletePipelineParams{ID: pl.ID}), model.ErrNotFound)
	})

	t.Run("RunAsAWhole", func(t *testing.T) {
		f := setup(t, open)
		pl, _, err := f.s.PutPipeline(f.ctx, &store.PutPipelineParams{Pipeline: pipeline(f, "etl"), Now: t0})
		require.NoError(t, err)
		pr, runs, err := trigger(f, pl)
		require.NoError(t, err)
		got, err := f.s.GetPipelineRun(f.ctx, &store.GetPipelineRunParams{ID: pr.ID})
		require.NoError(t, err)
		require.Equal(t, model.TriggerManual, got.Trigger)
		require.JSONEq(t, `{"day":"2026-01-02"}`, string(got.Args))
		require.Len(t, got.Steps, 3)
		require.Equal(t, runs["load"].ID, got.Steps["load"].ID)
		require.Equal(t, model.RunQueued, got.Steps["extract"].Status)
		require.Equal(t, model.RunWaiting, got.Steps["load"].Status)
		require.Equal(t, model.PipelineRunning, got.Status())

		// The first step fails for good: the rest are skipped, the whole failed.
		l := f.leaseOne("w", t0)
		require.Equal(t, runs["extract"].ID, l.Run.ID)
		f.complete(store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptFailed, ExitCode: intp(2)}, at(time.Second), nil)
		got, err = f.s.GetPipelineRun(f.ctx, &store.GetPipelineRunParams{ID: pr.ID})
		require.NoError(t, err)
		require.Equal(t, model.RunSkipped, got.Steps["load"].Status)
		require.Equal(t, model.PipelineFailed, got.Status())

		// Another run of the same pipeline succeeds step after step.
		pr2, runs2, err := trigger(f, pl)
		require.NoError(t, err)
		for i, s := range []string{"extract", "transform", "load"} {
			l := f.leaseOne("w", at(time.Duration(i+2)*time.Second))
			require.Equal(t, runs2[s].ID, l.Run.ID, "step %s runs when its upstream succeeded", s)
			f.finish(l, model.AttemptSucceeded, intp(0), at(time.Duration(i+2)*time.Second))
		}
		got, err = f.s.GetPipelineRun(f.ctx, &store.GetPipelineRunParams{ID: pr2.ID})
		require.NoError(t, err)
		require.Equal(t, model.PipelineSucceeded, got.Status())

		page, err := f.s.ListPipelineRuns(f.ctx, &store.ListPipelineRunsParams{PipelineID: pl.ID, Limit: 1})
		require.NoError(t, err)
		require.Len(t, page.Runs, 1)
		require.Equal(t, pr2.ID, page.Runs[0].ID, "newest first")
		require.Len(t, page.Runs[0].Steps, 3)
		page, err = f.s.ListPipelineRuns(f.ctx, &store.ListPipelineRunsParams{PipelineID: pl.ID, Cursor: page.NextCursor})
		require.NoError(t, err)
		require.Len(t, page.Runs, 1)
		require.Equal(t, pr.ID, page.Runs[0].ID)
		require.Empty(t, page.NextCursor)
		_, err = f.s.GetPipelineRun(f.ctx, &store.GetPipelineRunParams{ID: "nope"})
		require.ErrorIs(t, err, model.ErrNotFound)
	})

	t.Run("CronInstantFiresOnce", func(t *testing.T) {
		f := setup(t, open)
		pl, _, err := f.s.PutPipeline(f.ctx, &store.PutPipelineParams{Pipeline: pipeline(f, "nightly", func(p *model.Pipeline) {
			p.Spec.Schedule = &model.Schedule{Cron: "0 2 * * *"}
			p.NextFireAt = timep(at(time.Hour))
		}), Now: t0})
		require.NoError(t, err)
		next, ok, err := f.s.NextFire(f.ctx, &store.NextFireParams{})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, at(time.Hour), next)
		due, err := f.s.DuePipelines(f.ctx, &store.DuePipelinesParams{Now: at(time.Hour)})
		require.NoError(t, err)
		require.Len(t, due, 1)
		due, err = f.s.DuePipelines(f.ctx, &store.DuePipelinesParams{Now: at(time.Hour - time.Second)})
		require.NoError(t, err)
		require.Empty(t, due)

		fire := func(p *store.CreateGraphParams) {
			p.PipelineRun.Trigger, p.PipelineRun.ScheduledFor = model.TriggerCron, at(time.Hour)
			p.FireNext = timep(at(25 * time.Hour))
		}
		_, _, err = trigger(f, pl, fire)
		require.NoError(t, err)
		got, err := f.s.GetPipeline(f.ctx, &store.GetPipelineParams{IDOrName: pl.ID})
		require.NoError(t, err)
		require.Equal(t, at(25*time.Hour), *got.NextFireAt)
		before := f.countJobs()
		_, _, err = trigger(f, pl, fire) // another server, with what it read before the first fire
		require.ErrorIs(t, err, store.ErrStale)
		// The second trigger's jobs were made before it; its runs were not.
		page, err := f.s.ListPipelineRuns(f.ctx, &store.ListPipelineRunsParams{PipelineID: pl.ID})
		require.NoError(t, err)
		require.Len(t, page.Runs, 1, "one pipeline run for the instant")
		require.Equal(t, before+3, f.countJobs())
	})

	t.Run("CronFireFencedByTerm", func(t *testing.T) {
		f := setup(t, open)
		pl := pipeline(f, "fenced", func(p *model.Pipeline) {
			p.Spec.Schedule = &model.Schedule{Cron: "0 * * * *"}
			p.NextFireAt = timep(at(time.Hour))
		})
		_, _, err := f.s.PutPipeline(f.ctx, &store.PutPipelineParams{Pipeline: pl, Now: t0})
		require.NoError(t, err)
		old := f.lead("a", time.Millisecond, t0)
		cur := f.takeOver("b", at(time.Second))
		fire := func(term int64) func(p *store.CreateGraphParams) {
			return func(p *store.CreateGraphParams) {
				p.PipelineRun.Trigger, p.PipelineRun.ScheduledFor = model.TriggerCron, at(time.Hour)
				p.FireNext, p.Term, p.Now = timep(at(2*time.Hour)), term, at(time.Hour)
			}
		}
		_, _, err = trigger(f, pl, fire(old.Term))
		require.ErrorIs(t, err, model.ErrNotLeader, "the deposed leader's late fire is refused")
		page, err := f.s.ListPipelineRuns(f.ctx, &store.ListPipelineRunsParams{PipelineID: pl.ID})
		require.NoError(t, err)
		require.Empty(t, page.Runs, "nothing written")
		_, _, err = trigger(f, pl, fire(cur.Term))
		require.NoError(t, err, "the leader fires")
		got, err := f.s.GetPipeline(f.ctx, &store.GetPipelineParams{IDOrName: pl.ID})
		require.NoError(t, err)
		require.Equal(t, at(2*time.Hour), *got.NextFireAt)
	})
}
