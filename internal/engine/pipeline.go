package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// PipelineDef is a pipeline as a user writes it.
type PipelineDef struct {
	Namespace string
	Name      string
	Enabled   bool
	Schedule  *model.Schedule
	Args      json.RawMessage // a JSON object, or empty
	Steps     []scheduler.StepDef
}

// PutPipeline creates or replaces a pipeline and the jobs of its steps: each step runs a
// job named pipeline.step in the pipeline's namespace, created or updated here. A job of
// that name that is not already a step of this pipeline is a model.ErrConflict. Steps
// removed from the definition keep their jobs (and history).
func (e *Engine) PutPipeline(ctx context.Context, def *PipelineDef) (*model.Pipeline, bool, error) {
	order, err := scheduler.StepOrder(def.Steps)
	if err != nil {
		return nil, false, fmt.Errorf("pipeline %q: %w", def.Name, err)
	}
	now := e.clock.Now()
	owned := map[string]bool{}
	prev, err := e.store.GetPipeline(ctx, &store.GetPipelineParams{Namespace: def.Namespace, IDOrName: def.Name})
	switch {
	case err == nil:
		for _, s := range prev.Spec.Steps {
			owned[s.JobID] = true
		}
	case !errors.Is(err, model.ErrNotFound):
		return nil, false, fmt.Errorf("pipeline %q: %w", def.Name, err)
	}
	steps := make([]model.PipelineStep, len(order))
	for i, sd := range order {
		j, err := e.putStepJob(ctx, def, sd, owned, now)
		if err != nil {
			return nil, false, err
		}
		steps[i] = model.PipelineStep{Name: sd.Name, JobID: j.ID, DependsOn: sd.DependsOn}
	}
	pl := &model.Pipeline{ID: e.cfg.NewID(now), Namespace: def.Namespace, Name: def.Name, Enabled: def.Enabled,
		Spec:       model.PipelineSpec{Schedule: def.Schedule, Args: def.Args, Steps: steps},
		NextFireAt: scheduleNext(def.Schedule, def.Enabled, now)}
	out, created, err := e.store.PutPipeline(ctx, &store.PutPipelineParams{Pipeline: pl, Now: now})
	if err != nil {
		return nil, false, fmt.Errorf("pipeline %q: %w", def.Name, err)
	}
	e.schedChanged.Notify()
	return out, created, nil
}

// putStepJob creates or updates the job of one step.
func (e *Engine) putStepJob(ctx context.Context, def *PipelineDef, sd scheduler.StepDef, owned map[string]bool, now time.Time) (*model.Job, error) {
	name := scheduler.StepJobName(def.Name, sd.Name)
	spec := sd.Job
	spec.Schedule = nil // the pipeline's schedule triggers it
	j, err := e.store.GetJob(ctx, &store.GetJobParams{Namespace: def.Namespace, IDOrName: name})
	switch {
	case errors.Is(err, model.ErrNotFound):
		j = &model.Job{ID: e.cfg.NewID(now), Namespace: def.Namespace, Name: name, Spec: spec, Enabled: true, CreatedAt: now, UpdatedAt: now}
		res, err := e.store.CreateJobs(ctx, &store.CreateJobsParams{Jobs: []store.NewJob{{Job: j}}, Now: now})
		if err != nil {
			return nil, fmt.Errorf("step %q: create job %q: %w", sd.Name, name, err)
		}
		if res[0].Err != nil {
			return nil, fmt.Errorf("step %q: create job %q: %w", sd.Name, name, res[0].Err)
		}
		return res[0].Job, nil
	case err != nil:
		return nil, fmt.Errorf("step %q: job %q: %w", sd.Name, name, err)
	case !owned[j.ID]:
		return nil, fmt.Errorf("step %q: a job named %q exists and is not a step of pipeline %q: %w", sd.Name, name, def.Name, model.ErrConflict)
	}
	j, err = e.store.UpdateJob(ctx, &store.UpdateJobParams{ID: j.ID, Spec: spec, Enabled: true, Now: now})
	if err != nil {
		return nil, fmt.Errorf("step %q: update job %q: %w", sd.Name, name, err)
	}
	return j, nil
}

// TriggerPipeline starts a run of pipeline pl now: a run per step, with the edges between
// them, created at once. args (a JSON object, or empty) are laid over the pipeline's own,
// and those over each step's job's own args, for the step's run.
func (e *Engine) TriggerPipeline(ctx context.Context, pl *model.Pipeline, trigger model.Trigger, args json.RawMessage) (*model.PipelineRun, error) {
	now := e.clock.Now()
	return e.startPipelineRun(ctx, pl, trigger, args, now, now, nil, 0)
}

// startPipelineRun creates a pipeline run of pl for instant at. fireNext, for a cron fire,
// moves the pipeline's next fire in the same transaction, fenced by the leader's term (see
// store.CreateGraphParams).
func (e *Engine) startPipelineRun(ctx context.Context, pl *model.Pipeline, trigger model.Trigger, args json.RawMessage,
	at, now time.Time, fireNext *time.Time, term int64) (*model.PipelineRun, error) {
	merged, err := mergeArgs(pl.Spec.Args, args)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", pl.Name, err)
	}
	pr := &model.PipelineRun{ID: e.cfg.NewID(now), PipelineID: pl.ID, PipelineName: pl.Name, Namespace: pl.Namespace,
		Trigger: trigger, ScheduledFor: at, Args: merged, CreatedAt: now}
	p := &store.CreateGraphParams{PipelineRun: pr, FireNext: fireNext, Term: term, Now: now}
	byStep := make(map[string]*model.Run, len(pl.Spec.Steps))
	for _, st := range pl.Spec.Steps {
		j, err := e.store.GetJob(ctx, &store.GetJobParams{IDOrName: st.JobID})
		if err != nil {
			return nil, fmt.Errorf("pipeline %s: step %q: %w", pl.Name, st.Name, err)
		}
		stepArgs, err := mergeArgs(j.Spec.Args, merged) // the step's own, under the pipeline's and the trigger's
		if err != nil {
			return nil, fmt.Errorf("pipeline %s: step %q: %w", pl.Name, st.Name, err)
		}
		r := scheduler.NewRun(e.cfg.NewID(now), j, model.TriggerPipeline, stepArgs, at, now)
		for _, d := range st.DependsOn {
			r.DependsOn = append(r.DependsOn, model.Dependency{RunID: byStep[d.Step].ID, Condition: d.Condition})
		}
		byStep[st.Name] = r
		p.Runs, p.Steps = append(p.Runs, r), append(p.Steps, st.Name)
	}
	g, err := e.store.CreateGraph(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", pl.Name, err)
	}
	pr.Steps = make(map[string]*model.Run, len(g.Runs))
	for i, r := range g.Runs {
		pr.Steps[p.Steps[i]] = r
	}
	e.wakeFor(g.Runs)
	return pr, nil
}

// mergeArgs lays over's keys over base's (both JSON objects, or empty).
func mergeArgs(base, over json.RawMessage) (json.RawMessage, error) {
	if len(over) == 0 {
		return base, nil
	}
	if len(base) == 0 {
		return over, nil
	}
	var b, o map[string]json.RawMessage
	if err := json.Unmarshal(base, &b); err != nil {
		return nil, fmt.Errorf("pipeline args: %w", err)
	}
	if err := json.Unmarshal(over, &o); err != nil {
		return nil, fmt.Errorf("trigger args: %w", err)
	}
	maps.Copy(b, o)
	out, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	return out, nil
}

// CancelPipelineRun cancels the steps of a pipeline run that have not ended (running ones
// are stopped by their workers); steps waiting on them are skipped. It returns the
// pipeline run after.
func (e *Engine) CancelPipelineRun(ctx context.Context, id string) (*model.PipelineRun, error) {
	pr, err := e.store.GetPipelineRun(ctx, &store.GetPipelineRunParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("cancel pipeline run: %w", err)
	}
	var ids []string
	for _, r := range pr.Steps {
		if !r.Status.Final() {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) > 0 {
		if _, err := e.CancelRuns(ctx, &store.CancelRunsParams{RunIDs: ids, Reason: scheduler.PipelineCancelled(id)}); err != nil {
			return nil, fmt.Errorf("cancel pipeline run %s: %w", id, err)
		}
	}
	return e.store.GetPipelineRun(ctx, &store.GetPipelineRunParams{ID: id})
}

// RetryPipelineRun runs steps of an ended pipeline run again, with everything downstream of
// them: from step when it is given, else from every step that failed or was cancelled
// (nothing to retry is model.ErrInvalidState). Steps run
// again as the store's ReopenRuns says (upstream first, fresh attempt budgets; a step
// waits again for its upstream steps that run again). It returns the pipeline run after.
func (e *Engine) RetryPipelineRun(ctx context.Context, id, step string) (*model.PipelineRun, error) {
	pr, err := e.store.GetPipelineRun(ctx, &store.GetPipelineRunParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("retry pipeline run: %w", err)
	}
	if step != "" && pr.Steps[step] == nil {
		return nil, fmt.Errorf("retry pipeline run %s: no step %q: %w", id, step, model.ErrNotFound)
	}
	// The steps' edges, as the run's dependencies recorded them.
	names := slices.Sorted(maps.Keys(pr.Steps))
	byRun := make(map[string]int, len(names))
	for i, n := range names {
		byRun[pr.Steps[n].ID] = i
	}
	entries := make([]scheduler.GraphEntry, len(names))
	for i, n := range names {
		r, err := e.store.GetRun(ctx, &store.GetRunParams{ID: pr.Steps[n].ID})
		if err != nil {
			return nil, fmt.Errorf("retry pipeline run %s: step %q: %w", id, n, err)
		}
		for _, d := range r.DependsOn {
			if j, ok := byRun[d.RunID]; ok {
				entries[i].Deps = append(entries[i].Deps, scheduler.GraphDep{Entry: j, Condition: d.Condition})
			}
		}
	}
	order, err := scheduler.OrderGraph(entries)
	if err != nil {
		return nil, fmt.Errorf("retry pipeline run %s: %w", id, err)
	}
	// Mark the starting steps, then, in upstream-first order, every step downstream of a
	// marked one.
	again := make([]bool, len(names))
	for i, n := range names {
		st := pr.Steps[n].Status
		again[i] = n == step || step == "" && (st == model.RunFailed || st == model.RunCancelled)
	}
	var ids []string
	for _, i := range order {
		for _, d := range entries[i].Deps {
			again[i] = again[i] || again[d.Entry]
		}
		if again[i] {
			ids = append(ids, pr.Steps[names[i]].ID)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("retry pipeline run %s: no step failed or was cancelled: %w", id, model.ErrInvalidState)
	}
	runs, err := e.store.ReopenRuns(ctx, &store.ReopenRunsParams{RunIDs: ids, Now: e.clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("retry pipeline run %s: %w", id, err)
	}
	e.wakeFor(runs)
	return e.store.GetPipelineRun(ctx, &store.GetPipelineRunParams{ID: id})
}
