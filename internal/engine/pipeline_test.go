package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// etl is a pipeline extract -> transform -> load (and alert on a failed extract) of noop
// handler jobs, listed out of order.
func etl(schedule *model.Schedule) *PipelineDef {
	noop := model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Retry: model.RetryPolicy{MaxAttempts: 1}}
	return &PipelineDef{
		Namespace: model.DefaultNamespace, Name: "etl", Enabled: true, Schedule: schedule,
		Args: json.RawMessage(`{"day": "today", "env": "prod"}`),
		Steps: []scheduler.StepDef{
			{Name: "load", Job: noop, DependsOn: []model.StepDependency{{Step: "transform", Condition: model.CondSucceeded}}},
			{Name: "transform", Job: noop, DependsOn: []model.StepDependency{{Step: "extract", Condition: model.CondSucceeded}}},
			{Name: "extract", Job: noop},
			{Name: "alert", Job: noop, DependsOn: []model.StepDependency{{Step: "extract", Condition: model.CondFailed}}},
		},
	}
}

func stepNames(pl *model.Pipeline) []string {
	var out []string
	for _, s := range pl.Spec.Steps {
		out = append(out, s.Name)
	}
	return out
}

func TestPutPipeline(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	pl, created, err := e.PutPipeline(ctx, etl(nil))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, []string{"extract", "transform", "alert", "load"}, stepNames(pl), "upstream steps first")
	for _, s := range pl.Spec.Steps {
		j, err := b.store.GetJob(ctx, &store.GetJobParams{IDOrName: s.JobID})
		require.NoError(t, err)
		require.Equal(t, "etl."+s.Name, j.Name)
	}
	require.Nil(t, pl.NextFireAt)

	// Again: the same jobs, updated; a schedule gives a next fire.
	def := etl(&model.Schedule{Cron: "*/5 * * * *"})
	def.Steps[2].Job.Priority = 7
	again, created, err := e.PutPipeline(ctx, def)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, pl.ID, again.ID)
	require.Equal(t, pl.Spec.Steps[0].JobID, again.Spec.Steps[0].JobID)
	j, err := b.store.GetJob(ctx, &store.GetJobParams{IDOrName: again.Spec.Steps[0].JobID})
	require.NoError(t, err)
	require.Equal(t, 7, j.Spec.Priority)
	require.Equal(t, t0.Add(5*time.Minute), *again.NextFireAt)

	// A job of a step's name that the pipeline does not own is a conflict.
	other := etl(nil)
	other.Name = "other"
	submitNamed(t, e, b, "other.extract")
	_, _, err = e.PutPipeline(ctx, other)
	require.ErrorIs(t, err, model.ErrConflict)

	cyclic := etl(nil)
	cyclic.Name = "cyclic"
	cyclic.Steps[2].DependsOn = []model.StepDependency{{Step: "load", Condition: model.CondSucceeded}}
	_, _, err = e.PutPipeline(ctx, cyclic)
	require.ErrorContains(t, err, "cycle: ")
}

// submitNamed creates a noop job named name with a run.
func submitNamed(t *testing.T, e *Engine, b *testBundle, name string) {
	t.Helper()
	now := b.clk.Now()
	job := &model.Job{ID: name + "-id", Namespace: model.DefaultNamespace, Name: name, Enabled: true,
		Spec: model.JobSpec{Handler: "noop", Queue: model.DefaultQueue}, CreatedAt: now, UpdatedAt: now}
	res, err := e.SubmitJobs(context.Background(), []store.NewJob{{Job: job, Run: scheduler.NewRun(id.New(now), job, model.TriggerSubmit, nil, time.Time{}, now)}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
}

func TestTriggerPipelineRunsStepsInOrder(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	register(t, e, "w")
	def := etl(nil)
	def.Steps[2].Job.Args = json.RawMessage(`{"day": "step's", "mine": 1}`) // extract's own
	pl, _, err := e.PutPipeline(ctx, def)
	require.NoError(t, err)
	pr, err := e.TriggerPipeline(ctx, pl, model.TriggerManual, json.RawMessage(`{"day": "2026-03-01"}`))
	require.NoError(t, err)
	require.Equal(t, model.TriggerManual, pr.Trigger)
	require.JSONEq(t, `{"day": "2026-03-01", "env": "prod"}`, string(pr.Args), "trigger args over the pipeline's")
	for step, r := range pr.Steps {
		want := string(pr.Args)
		if step == "extract" {
			want = `{"day": "2026-03-01", "env": "prod", "mine": 1}` // and both over the step's own
		}
		require.JSONEq(t, want, string(r.Args), step)
		require.Equal(t, model.TriggerPipeline, r.Trigger)
	}
	// Step by step: only what is released leases.
	for _, step := range []string{"extract", "transform", "load"} {
		resp := lease(t, e, "w", 10, 0)
		require.Len(t, resp.Leases, 1, "step %s", step)
		require.Equal(t, pr.Steps[step].ID, resp.Leases[0].Run.ID)
		complete(t, e, resp.Leases[0], model.AttemptSucceeded)
	}
	got, err := b.store.GetPipelineRun(ctx, &store.GetPipelineRunParams{ID: pr.ID})
	require.NoError(t, err)
	require.Equal(t, model.RunSkipped, got.Steps["alert"].Status, "the failure alert does not run when extract succeeds")
	require.Equal(t, model.PipelineSucceeded, got.Status())
}

func TestPipelineCronFiresEachInstantOnce(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	pl, _, err := e.PutPipeline(ctx, etl(&model.Schedule{Cron: "*/5 * * * *"}))
	require.NoError(t, err)
	first := t0.Add(5 * time.Minute)
	waitTimer(t, b, first)
	b.clk.Set(first)
	var page *store.PipelineRunPage
	waitFor(t, func() bool {
		page, err = b.store.ListPipelineRuns(ctx, &store.ListPipelineRunsParams{PipelineID: pl.ID})
		require.NoError(t, err)
		return len(page.Runs) == 1
	}, "the pipeline fired at its instant")
	require.Equal(t, model.TriggerCron, page.Runs[0].Trigger)
	require.Equal(t, first, page.Runs[0].ScheduledFor)
	require.Len(t, page.Runs[0].Steps, 4)
	// The loop sleeps until the next instant; the first is not fired again.
	waitTimer(t, b, t0.Add(10*time.Minute))
	page, err = b.store.ListPipelineRuns(ctx, &store.ListPipelineRunsParams{PipelineID: pl.ID})
	require.NoError(t, err)
	require.Len(t, page.Runs, 1)
	got, err := b.store.GetPipeline(ctx, &store.GetPipelineParams{IDOrName: pl.ID})
	require.NoError(t, err)
	require.Equal(t, t0.Add(10*time.Minute), *got.NextFireAt)
}

// leaseAndEnd leases the one run w gets and ends it with status.
func leaseAndEnd(t *testing.T, e *Engine, want *model.Run, status model.AttemptStatus) {
	t.Helper()
	resp := lease(t, e, "w", 10, 0)
	require.Len(t, resp.Leases, 1)
	require.Equal(t, want.ID, resp.Leases[0].Run.ID)
	completeWith(t, e, resp.Leases[0], status)
}

func TestRetryPipelineRunFromStep(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	register(t, e, "w")
	pl, _, err := e.PutPipeline(ctx, etl(nil))
	require.NoError(t, err)
	pr, err := e.TriggerPipeline(ctx, pl, model.TriggerManual, nil)
	require.NoError(t, err)
	leaseAndEnd(t, e, pr.Steps["extract"], "failed")
	leaseAndEnd(t, e, pr.Steps["alert"], "succeeded") // the failure alert ran
	got, err := b.store.GetPipelineRun(ctx, &store.GetPipelineRunParams{ID: pr.ID})
	require.NoError(t, err)
	require.Equal(t, model.PipelineFailed, got.Status())
	require.Equal(t, model.RunSkipped, got.Steps["load"].Status)

	_, err = e.RetryPipelineRun(ctx, pr.ID, "nope")
	require.ErrorIs(t, err, model.ErrNotFound)
	got, err = e.RetryPipelineRun(ctx, pr.ID, "extract")
	require.NoError(t, err)
	require.Equal(t, model.PipelineRunning, got.Status())
	require.Equal(t, model.RunQueued, got.Steps["extract"].Status)
	for _, s := range []string{"transform", "load", "alert"} {
		require.Equal(t, model.RunWaiting, got.Steps[s].Status, "%s runs again after extract", s)
	}
	for _, s := range []string{"extract", "transform", "load"} {
		leaseAndEnd(t, e, pr.Steps[s], "succeeded")
	}
	got, err = b.store.GetPipelineRun(ctx, &store.GetPipelineRunParams{ID: pr.ID})
	require.NoError(t, err)
	require.Equal(t, model.RunSkipped, got.Steps["alert"].Status, "no alert: extract succeeded this time")
	require.Equal(t, model.PipelineSucceeded, got.Status())
	_, err = e.RetryPipelineRun(ctx, pr.ID, "")
	require.ErrorIs(t, err, model.ErrInvalidState, "nothing failed")
}

func TestCancelPipelineRun(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	register(t, e, "w")
	pl, _, err := e.PutPipeline(ctx, etl(nil))
	require.NoError(t, err)
	pr, err := e.TriggerPipeline(ctx, pl, model.TriggerManual, nil)
	require.NoError(t, err)
	resp := lease(t, e, "w", 10, 0) // extract runs
	require.Len(t, resp.Leases, 1)
	got, err := e.CancelPipelineRun(ctx, pr.ID)
	require.NoError(t, err)
	require.True(t, got.Steps["extract"].CancelRequested, "the running step is asked to stop")
	for _, s := range []string{"transform", "load", "alert"} {
		require.True(t, got.Steps[s].Status.Final(), s)
	}
	complete(t, e, resp.Leases[0], model.AttemptCancelled)
	got, err = b.store.GetPipelineRun(ctx, &store.GetPipelineRunParams{ID: pr.ID})
	require.NoError(t, err)
	require.Equal(t, model.PipelineCancelled, got.Status())

	// Retrying the whole runs every step again.
	got, err = e.RetryPipelineRun(ctx, pr.ID, "")
	require.NoError(t, err)
	require.Equal(t, model.RunQueued, got.Steps["extract"].Status)
	require.Equal(t, model.RunWaiting, got.Steps["load"].Status)
}
