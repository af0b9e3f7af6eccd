package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// maxPipelineSteps caps the steps of one pipeline: each is a job that PUT creates or
// updates.
const maxPipelineSteps = 1000

// stepEntry names step name of a pipeline in field paths: "steps.load.".
func stepEntry(name string) string { return "steps." + name + "." }

// validPipeline is a PUT /v1/pipelines/{name} body that passed validation.
type validPipeline struct {
	def      *engine.PipelineDef
	jobNames map[string]string // step -> the name of its job
}

// putPipeline serves PUT /v1/pipelines/{name}: create the pipeline or replace its
// definition, creating or updating the job of each step (named pipeline.step). Every step
// is a job spec validated as POST /v1/jobs validates it (fields named steps.<step>.), whose
// depends_on names other steps with ref. Everything is checked before anything is written:
// bad fields (400, every one named), a cycle (400 naming one of its edges), a step job name
// taken by a job the pipeline does not own (409). 201 when created, 200 when replaced;
// ?dry_run=true checks the same and writes nothing (200, the pipeline as it would be; its
// id is empty when it would be created).
func (a *API) putPipeline(w http.ResponseWriter, r *http.Request) error {
	var spec apitype.PipelineSpec
	if err := decodeBody(r, &spec, false); err != nil {
		return err
	}
	q := r.URL.Query()
	ns, err := namespaceParam(q)
	if err != nil {
		return err
	}
	if err := actIn(r.Context(), "namespace", ns); err != nil {
		return err
	}
	dryRun := false
	if s := q.Get("dry_run"); s != "" {
		if dryRun, err = strconv.ParseBool(s); err != nil {
			return invalidField("dry_run", "must be true or false")
		}
	}
	now := a.clock.Now()
	kept, err := a.keptStepSecrets(r.Context(), r.PathValue("name"), ns, &spec)
	if err != nil {
		return err
	}
	vp, errs := buildPipeline(r.PathValue("name"), ns, &spec, now, a.lim, func(step string) sealing {
		return sealing{keys: a.keys, prev: kept[step]}
	})
	if len(errs) > 0 {
		return batchErrors(http.StatusBadRequest, errs)
	}
	def := vp.def
	prev, err := a.store.GetPipeline(r.Context(), &store.GetPipelineParams{Namespace: ns, IDOrName: def.Name})
	switch {
	case errors.Is(err, model.ErrNotFound) || err == nil && (prev.Name != def.Name || prev.Namespace != ns):
		prev = nil // none, or the name is another pipeline's id
	case err != nil:
		return fmt.Errorf("put pipeline %s: %w", def.Name, err)
	}
	jobIDs, errs, err := a.stepJobs(r.Context(), vp, prev)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return batchErrors(http.StatusConflict, errs)
	}
	if dryRun {
		writeJSON(w, http.StatusOK, a.wouldBe(def, prev, jobIDs, now))
		return nil
	}

	if prev != nil {
		noteAudit(r.Context(), "", pipelineToAPI(prev))
	}
	pl, created, err := a.eng.PutPipeline(r.Context(), def)
	switch {
	case errors.Is(err, model.ErrConflict):
		// A job of a step's name created since the check above.
		return &httpError{status: http.StatusConflict, detail: err.Error()}
	case err != nil:
		return fmt.Errorf("put pipeline %s: %w", def.Name, err)
	}
	a.log.InfoContext(r.Context(), "pipeline stored", "pipeline", pl.Name, "namespace", pl.Namespace,
		"id", pl.ID, "steps", len(pl.Spec.Steps), "created", created)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	noteAudit(r.Context(), "pipeline:"+pl.ID, nil)
	writeJSON(w, status, pipelineToAPI(pl))
	return nil
}

// keptStepSecrets are the stored secret env of the step jobs of pipeline name whose step
// in spec keeps a secret value (apitype.SecretMask), by step. Whether such a job is the
// pipeline's own is stepJobs' check, which refuses the request when it is not.
func (a *API) keptStepSecrets(ctx context.Context, name, ns string, spec *apitype.PipelineSpec) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for step, js := range spec.Steps {
		if !keepsSecret(js.SecretEnv) {
			continue
		}
		jobName := scheduler.StepJobName(name, step)
		j, err := a.store.GetJob(ctx, &store.GetJobParams{Namespace: ns, IDOrName: jobName})
		switch {
		case errors.Is(err, model.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("step %s: %w", step, err)
		case j.Name == jobName && j.Namespace == ns:
			out[step] = j.Spec.SecretEnv
		}
	}
	return out, nil
}

// buildPipeline validates a pipeline definition named name in namespace ns and returns it
// with its steps' jobs built, or every bad field; sealFor seals the secret env of a step.
func buildPipeline(name, ns string, spec *apitype.PipelineSpec, now time.Time, lim *Limits, sealFor func(step string) sealing) (*validPipeline, []apitype.FieldError) {
	fe := &fieldErrors{}
	if !namePattern.MatchString(name) {
		fe.add("name", "%s", nameRule)
	}
	if spec.Name != "" && spec.Name != name {
		fe.add("name", "must be the name in the path (%q) or left out", name)
	}
	if spec.Namespace != "" && spec.Namespace != ns {
		fe.add("namespace", "must be the ?namespace= of the call (%q) or left out", ns)
	}
	var args json.RawMessage
	if b := bytes.TrimSpace(spec.Args); len(b) > 0 && !bytes.Equal(b, []byte("null")) {
		if b[0] != '{' {
			fe.add("args", "must be a JSON object")
		}
		args = spec.Args
	}
	checkArgsSize(spec.Args, "args", lim, fe)
	sched := scheduleToModel(spec.Schedule, fe)
	switch {
	case len(spec.Steps) == 0:
		fe.add("steps", "must hold at least one step")
	case len(spec.Steps) > maxPipelineSteps:
		fe.add("steps", "must hold at most %d steps, got %d", maxPipelineSteps, len(spec.Steps))
	}
	if len(fe.errs) > 0 {
		return nil, fe.errs
	}

	// Steps in name order, so that answers (which cycle, which error first) and the order of
	// the stored steps do not depend on the order of a map.
	names := sortedKeys(spec.Steps)
	index := make(map[string]int, len(names))
	for i, n := range names {
		index[n] = i
	}
	vp := &validPipeline{jobNames: make(map[string]string, len(names))}
	steps := make([]scheduler.StepDef, len(names))
	entries := make([]scheduler.GraphEntry, len(names))
	for i, step := range names {
		jobName := scheduler.StepJobName(name, step)
		switch {
		case !namePattern.MatchString(step):
			fe.add(mapPath("steps", step), "step names %s", nameRule)
			continue
		case !namePattern.MatchString(jobName):
			fe.add(mapPath("steps", step), "the step's job would be named %q, which %s", jobName, nameRule)
			continue
		}
		prefix := stepEntry(step)
		js := spec.Steps[step]
		if js.Name != "" {
			fe.add(prefix+"name", "a step's job is named %q (pipeline.step): leave name out", jobName)
		}
		if js.IdempotencyKey != "" {
			fe.add(prefix+"idempotency_key", "a step runs once per pipeline run: it takes no idempotency_key")
		}
		if js.RunAt != nil || js.Delay != nil {
			fe.add(prefix+"run_at", "a step runs when its pipeline is triggered and its dependencies allow: run_at and delay do not apply")
		}
		if js.Namespace != "" && js.Namespace != ns {
			fe.add(prefix+"namespace", "must be the pipeline's namespace (%q) or left out", ns)
		}
		js.Name, js.Namespace, js.IdempotencyKey, js.RunAt, js.Delay = jobName, ns, "", nil, nil
		vj, errs := buildJobIn(&js, prefix, now, depsOfStep, lim, sealFor(step))
		if len(errs) > 0 {
			fe.errs = append(fe.errs, errs...)
			continue
		}
		deps := make([]model.StepDependency, len(vj.Deps))
		for j, d := range vj.Deps {
			up, ok := index[d.Ref]
			switch {
			case !ok:
				fe.add(fmt.Sprintf("%sdepends_on[%d].ref", prefix, j), "no step named %q", d.Ref)
			case up == i:
				fe.add(fmt.Sprintf("%sdepends_on[%d].ref", prefix, j), "self-edge: step %q cannot depend on itself", step)
			}
			deps[j] = model.StepDependency{Step: d.Ref, Condition: d.Condition}
			entries[i].Deps = append(entries[i].Deps, scheduler.GraphDep{Entry: up, Condition: d.Condition})
		}
		steps[i] = scheduler.StepDef{Name: step, Job: vj.Job.Spec, DependsOn: deps}
		vp.jobNames[step] = jobName
	}
	if len(fe.errs) > 0 {
		return nil, fe.errs
	}
	if _, err := scheduler.OrderGraph(entries); err != nil {
		var ce *scheduler.CycleError
		if !errors.As(err, &ce) {
			return nil, []apitype.FieldError{{Field: "steps", Message: err.Error()}}
		}
		path := make([]string, len(ce.Path))
		for k, i := range ce.Path {
			path[k] = names[i]
		}
		return nil, []apitype.FieldError{{
			Field:   fmt.Sprintf("%sdepends_on[%d].ref", stepEntry(names[ce.Path[0]]), ce.Dep),
			Message: "cycle: " + strings.Join(path, " -> "),
		}}
	}
	vp.def = &engine.PipelineDef{Namespace: ns, Name: name, Enabled: spec.Enabled == nil || *spec.Enabled,
		Schedule: sched, Args: args, Steps: steps}
	return vp, nil
}

// stepJobs looks up the job of each step by name: it returns the ids of those that exist
// (by step), and a field error for each that exists without being a step of prev (the
// pipeline as stored, nil when there is none), which PutPipeline would refuse.
func (a *API) stepJobs(ctx context.Context, vp *validPipeline, prev *model.Pipeline) (map[string]string, []apitype.FieldError, error) {
	owned := map[string]bool{}
	if prev != nil {
		for _, s := range prev.Spec.Steps {
			owned[s.JobID] = true
		}
	}
	ids := make(map[string]string, len(vp.def.Steps))
	var errs []apitype.FieldError
	for _, s := range vp.def.Steps {
		name := vp.jobNames[s.Name]
		j, err := a.store.GetJob(ctx, &store.GetJobParams{Namespace: vp.def.Namespace, IDOrName: name})
		switch {
		case errors.Is(err, model.ErrNotFound):
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("check step jobs: %w", err)
		case j.Name != name || j.Namespace != vp.def.Namespace:
			continue // matched an id, not the name
		case !owned[j.ID]:
			errs = append(errs, apitype.FieldError{Field: mapPath("steps", s.Name),
				Message: fmt.Sprintf("the step's job would be named %q, and a job of that name exists in namespace %q that is not a step of this pipeline "+
					"(a step dropped from it keeps its job): rename the step, or delete it (stint jobs delete %s)", name, vp.def.Namespace, name)})
		}
		ids[s.Name] = j.ID
	}
	return ids, errs, nil
}

// wouldBe is the pipeline that def would store, for a dry run: prev's id and times when it
// replaces prev, none when it would be created; the ids of the step jobs that exist.
func (a *API) wouldBe(def *engine.PipelineDef, prev *model.Pipeline, jobIDs map[string]string, now time.Time) *apitype.Pipeline {
	pl := &model.Pipeline{Namespace: def.Namespace, Name: def.Name, Enabled: def.Enabled,
		Spec:       model.PipelineSpec{Schedule: def.Schedule, Args: def.Args},
		NextFireAt: engine.NextFireAt(&model.Job{Spec: model.JobSpec{Schedule: def.Schedule}, Enabled: def.Enabled}, now)}
	if prev != nil {
		pl.ID, pl.CreatedAt, pl.UpdatedAt = prev.ID, prev.CreatedAt, prev.UpdatedAt
	}
	order, err := scheduler.StepOrder(def.Steps)
	if err != nil { // cannot happen: buildPipeline ordered them
		order = def.Steps
	}
	for _, s := range order {
		pl.Spec.Steps = append(pl.Spec.Steps, model.PipelineStep{Name: s.Name, JobID: jobIDs[s.Name], DependsOn: s.DependsOn})
	}
	return pipelineToAPI(pl)
}

// findPipeline resolves the {name} of a path, a pipeline id or name in the namespace of
// ?namespace=.
func (a *API) findPipeline(r *http.Request) (*model.Pipeline, error) {
	ns, err := namespaceParam(r.URL.Query())
	if err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	pl, err := a.store.GetPipeline(r.Context(), &store.GetPipelineParams{Namespace: ns, IDOrName: name})
	if err == nil && !sees(r.Context(), pl.Namespace) {
		err = model.ErrNotFound // another namespace's pipeline is absent to a scoped token
	}
	if errors.Is(err, model.ErrNotFound) {
		return nil, &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("pipeline %q not found in namespace %q", name, ns)}
	}
	if err != nil {
		return nil, fmt.Errorf("get pipeline %s: %w", name, err)
	}
	noteAudit(r.Context(), "pipeline:"+pl.ID, pipelineToAPI(pl))
	return pl, nil
}

// findPipelineRun returns the pipeline of the path and its run {id}: a run of another
// pipeline is a 404 like a missing one.
func (a *API) findPipelineRun(r *http.Request) (*model.Pipeline, *model.PipelineRun, error) {
	pl, err := a.findPipeline(r)
	if err != nil {
		return nil, nil, err
	}
	runID := r.PathValue("id")
	pr, err := a.store.GetPipelineRun(r.Context(), &store.GetPipelineRunParams{ID: runID})
	switch {
	case errors.Is(err, model.ErrNotFound) || err == nil && pr.PipelineID != pl.ID:
		return nil, nil, &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("pipeline %q has no run %q", pl.Name, runID)}
	case err != nil:
		return nil, nil, fmt.Errorf("get pipeline run %s: %w", runID, err)
	}
	noteAudit(r.Context(), "pipeline_run:"+pr.ID, pipelineRunToAPI(pr))
	return pl, pr, nil
}

// getPipeline serves GET /v1/pipelines/{name}.
func (a *API) getPipeline(w http.ResponseWriter, r *http.Request) error {
	pl, err := a.findPipeline(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pipelineToAPI(pl))
	return nil
}

// listPipelines serves GET /v1/pipelines: the pipelines of ?namespace= (every namespace's
// when it is not given), by name.
func (a *API) listPipelines(w http.ResponseWriter, r *http.Request) error {
	ns := r.URL.Query().Get("namespace")
	if ns != "" && !namePattern.MatchString(ns) {
		return invalidField("namespace", nameRule)
	}
	pls, err := a.store.ListPipelines(r.Context(), &store.ListPipelinesParams{Namespace: ns})
	if err != nil {
		return fmt.Errorf("list pipelines: %w", err)
	}
	out := apitype.PipelineList{Items: make([]*apitype.Pipeline, 0, len(pls))}
	for _, pl := range pls {
		if sees(r.Context(), pl.Namespace) {
			out.Items = append(out.Items, pipelineToAPI(pl))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deletePipeline serves DELETE /v1/pipelines/{name}: the pipeline and the jobs of its steps
// are deleted (their active runs cancelled); the runs stay, as history. 204.
func (a *API) deletePipeline(w http.ResponseWriter, r *http.Request) error {
	pl, err := a.findPipeline(r)
	if err != nil {
		return err
	}
	cancelled, err := a.eng.DeletePipeline(r.Context(), pl)
	if err != nil {
		return err
	}
	a.log.InfoContext(r.Context(), "pipeline deleted", "pipeline", pl.Name, "namespace", pl.Namespace,
		"id", pl.ID, "cancelled_runs", len(cancelled))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// triggerPipeline serves POST /v1/pipelines/{name}/trigger: a pipeline run now, a run per
// step; the body's args (optional, an object) are laid over the pipeline's. 201.
func (a *API) triggerPipeline(w http.ResponseWriter, r *http.Request) error {
	var req apitype.PipelineTrigger
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	var args json.RawMessage
	if b := bytes.TrimSpace(req.Args); len(b) > 0 && !bytes.Equal(b, []byte("null")) {
		if b[0] != '{' {
			return invalidField("args", "must be a JSON object")
		}
		args = req.Args
	}
	fe := &fieldErrors{}
	if checkArgsSize(req.Args, "args", a.lim, fe); len(fe.errs) > 0 {
		return invalidFields(fe.errs)
	}
	pl, err := a.findPipeline(r)
	if err != nil {
		return err
	}
	pr, err := a.eng.TriggerPipeline(r.Context(), pl, model.TriggerManual, args)
	if err != nil {
		return fmt.Errorf("trigger pipeline %s: %w", pl.Name, err)
	}
	return a.writePipelineRun(w, r, http.StatusCreated, pr)
}

// listPipelineRuns serves GET /v1/pipelines/{name}/runs: the pipeline's runs, newest first.
func (a *API) listPipelineRuns(w http.ResponseWriter, r *http.Request) error {
	limit, errs := a.limitParam(r.URL.Query())
	if len(errs) > 0 {
		return invalidFields(errs)
	}
	pl, err := a.findPipeline(r)
	if err != nil {
		return err
	}
	page, err := a.store.ListPipelineRuns(r.Context(), &store.ListPipelineRunsParams{
		PipelineID: pl.ID, Limit: limit, Cursor: r.URL.Query().Get("cursor"),
	})
	if err != nil {
		return fmt.Errorf("list runs of pipeline %s: %w", pl.Name, err)
	}
	var steps []*model.Run
	for _, pr := range page.Runs {
		for _, run := range pr.Steps {
			steps = append(steps, run)
		}
	}
	if err := a.eng.ExplainPending(r.Context(), steps); err != nil {
		return err
	}
	out := apitype.PipelineRunList{Items: make([]*apitype.PipelineRun, len(page.Runs)), NextCursor: page.NextCursor}
	for i, pr := range page.Runs {
		out.Items[i] = pipelineRunToAPI(pr)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getPipelineRun serves GET /v1/pipelines/{name}/runs/{id}: the state of the whole and
// each step's run.
func (a *API) getPipelineRun(w http.ResponseWriter, r *http.Request) error {
	_, pr, err := a.findPipelineRun(r)
	if err != nil {
		return err
	}
	return a.writePipelineRun(w, r, http.StatusOK, pr)
}

// cancelPipelineRun serves POST /v1/pipelines/{name}/runs/{id}/cancel: the steps that
// have not ended are cancelled (running ones stopped by their workers).
func (a *API) cancelPipelineRun(w http.ResponseWriter, r *http.Request) error {
	_, pr, err := a.findPipelineRun(r)
	if err != nil {
		return err
	}
	pr, err = a.eng.CancelPipelineRun(r.Context(), pr.ID)
	if err != nil {
		return err
	}
	return a.writePipelineRun(w, r, http.StatusOK, pr)
}

// retryPipelineRun serves POST /v1/pipelines/{name}/runs/{id}/retry: an ended pipeline
// run's steps run again with what is downstream of them, from the body's step (optional),
// else from every step that failed or was cancelled. 404 for an unknown step, 409 for a
// run that has not ended or has nothing to retry.
func (a *API) retryPipelineRun(w http.ResponseWriter, r *http.Request) error {
	var req apitype.PipelineRetry
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	pl, pr, err := a.findPipelineRun(r)
	if err != nil {
		return err
	}
	if req.From != "" && pr.Steps[req.From] == nil {
		return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("pipeline %q has no step %q in run %s", pl.Name, req.From, pr.ID),
			fields: []apitype.FieldError{{Field: "from", Message: fmt.Sprintf("no step named %q", req.From)}}}
	}
	if st := pr.Status(); st == model.PipelineRunning {
		return &httpError{status: http.StatusConflict, detail: fmt.Sprintf("pipeline run %s is %s: only an ended run can be retried", pr.ID, st)}
	}
	pr, err = a.eng.RetryPipelineRun(r.Context(), pr.ID, req.From)
	switch {
	case errors.Is(err, model.ErrInvalidState):
		return &httpError{status: http.StatusConflict, detail: fmt.Sprintf("pipeline run %s: nothing to retry: no step failed or was cancelled", r.PathValue("id"))}
	case err != nil:
		return err
	}
	a.log.InfoContext(r.Context(), "pipeline run retried", "pipeline", pl.Name, "run", pr.ID, "from", req.From)
	return a.writePipelineRun(w, r, http.StatusOK, pr)
}

// writePipelineRun answers with a pipeline run, each step's run read whole (its attempts
// and the runs it depends on, as GET /v1/runs/{id} shows them) with its pending reason.
func (a *API) writePipelineRun(w http.ResponseWriter, r *http.Request, status int, pr *model.PipelineRun) error {
	steps := make([]*model.Run, 0, len(pr.Steps))
	for name, run := range pr.Steps {
		full, err := a.store.GetRun(r.Context(), &store.GetRunParams{ID: run.ID})
		if err != nil {
			return fmt.Errorf("pipeline run %s: step %q: %w", pr.ID, name, err)
		}
		pr.Steps[name] = full
		steps = append(steps, full)
	}
	if err := a.eng.ExplainPending(r.Context(), steps); err != nil {
		return err
	}
	writeJSON(w, status, pipelineRunToAPI(pr))
	return nil
}

// pipelineToAPI turns a pipeline into its wire form. Times are UTC.
func pipelineToAPI(pl *model.Pipeline) *apitype.Pipeline {
	out := &apitype.Pipeline{
		ID:         pl.ID,
		Namespace:  pl.Namespace,
		Name:       pl.Name,
		Enabled:    pl.Enabled,
		Schedule:   scheduleToAPI(pl.Spec.Schedule),
		Args:       pl.Spec.Args,
		Steps:      make([]apitype.PipelineStep, len(pl.Spec.Steps)),
		NextFireAt: utcPtr(pl.NextFireAt),
		CreatedAt:  pl.CreatedAt.UTC(),
		UpdatedAt:  pl.UpdatedAt.UTC(),
	}
	for i, s := range pl.Spec.Steps {
		st := apitype.PipelineStep{Name: s.Name, JobID: s.JobID, JobName: scheduler.StepJobName(pl.Name, s.Name)}
		for _, d := range s.DependsOn {
			st.DependsOn = append(st.DependsOn, apitype.Dependency{Ref: d.Step, Condition: string(d.Condition)})
		}
		out.Steps[i] = st
	}
	j := &model.Job{Spec: model.JobSpec{Schedule: pl.Spec.Schedule}, Enabled: pl.Enabled, NextFireAt: pl.NextFireAt}
	for _, t := range engine.NextFireTimes(j, nextFireCount) {
		out.NextFireTimes = append(out.NextFireTimes, t.UTC())
	}
	return out
}

// pipelineRunToAPI turns a pipeline run into its wire form, with the state of the whole.
func pipelineRunToAPI(pr *model.PipelineRun) *apitype.PipelineRun {
	out := &apitype.PipelineRun{
		ID:           pr.ID,
		PipelineID:   pr.PipelineID,
		PipelineName: pr.PipelineName,
		Namespace:    pr.Namespace,
		Status:       string(pr.Status()),
		Trigger:      string(pr.Trigger),
		ScheduledFor: pr.ScheduledFor.UTC(),
		Args:         pr.Args,
		CreatedAt:    pr.CreatedAt.UTC(),
		Steps:        make(map[string]*apitype.Run, len(pr.Steps)),
	}
	for name, run := range pr.Steps {
		out.Steps[name] = runToAPI(run)
	}
	return out
}
