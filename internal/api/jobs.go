package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// Paging.
const (
	defaultLimit = 50
	// maxListedErrors caps the field errors of one answer, so a batch of 10,000 bad entries
	// does not get a 10,000-entry problem document.
	maxListedErrors = 1000
)

// createJob serves POST /v1/jobs.
func (a *API) createJob(w http.ResponseWriter, r *http.Request) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	var spec apitype.JobSpec
	if err := decodeSpec(b, &spec); err != nil {
		return err
	}
	vj, errs := buildJob(&spec, "", a.clock.Now(), a.lim, sealing{keys: a.keys})
	if len(errs) > 0 {
		return invalidFields(errs)
	}
	if err := actIn(r.Context(), "namespace", vj.Job.Namespace); err != nil {
		return err
	}
	if errs, err := a.missingUpstream(r.Context(), upstreamOf(vj.Run, "")); err != nil {
		return err
	} else if len(errs) > 0 {
		return invalidFields(errs)
	}
	res, err := a.eng.SubmitJobs(r.Context(), []store.NewJob{{Job: vj.Job, Run: vj.Run}})
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return fmt.Errorf("create job: %d results for 1 job", len(res))
	}
	item, created, err := createResult(res[0], "", vj.Job)
	if err != nil {
		return err
	}
	noteAudit(r.Context(), "job:"+item.Job.ID, nil)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, item)
	return nil
}

// createResult turns the store's answer for one submitted job into the API's. It returns an
// error (409) for a duplicate name or an idempotency key reused with another request; prefix
// names the entry in a batch.
func createResult(res store.CreateJobResult, prefix string, job *model.Job) (apitype.CreateJobResponse, bool, error) {
	switch {
	case res.Err != nil:
		if errors.Is(res.Err, model.ErrConflict) {
			return apitype.CreateJobResponse{}, false, conflict(prefix+"name",
				fmt.Sprintf("a job named %q already exists in namespace %q", job.Name, job.Namespace))
		}
		if errors.Is(res.Err, model.ErrNotFound) { // an upstream run gone since it was checked
			return apitype.CreateJobResponse{}, false, invalidField(prefix+"depends_on", res.Err.Error())
		}
		return apitype.CreateJobResponse{}, false, res.Err
	case res.Conflict:
		return apitype.CreateJobResponse{}, false, conflict(prefix+"idempotency_key",
			fmt.Sprintf("idempotency key %q was used before for a different request", job.IdempotencyKey))
	}
	out := apitype.CreateJobResponse{Job: jobToAPI(res.Job, nil)}
	if res.Run != nil {
		out.Run = runToAPI(res.Run)
	}
	return out, !res.Existing, nil
}

// batchRoom is how many entries a batch's body b is likely to list, at most most+1: its
// opening braces but the request's own. Every entry opens one, and its args, retry or
// requirements more, so the guess is rarely short. Decoding into a slice with that room
// spares encoding/json growing it from empty, a copy of every entry (304 bytes each) at
// each doubling: 12% of the route's CPU for 10,000 jobs.
func batchRoom(b []byte, most int) int {
	return min(max(bytes.Count(b, []byte{'{'})-1, 0), most+1)
}

// createJobs serves POST /v1/jobs/batch: every entry is validated first and nothing is
// created unless all are valid; then all are submitted in one group commit.
func (a *API) createJobs(w http.ResponseWriter, r *http.Request) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	room := batchRoom(b, a.lim.MaxBatchJobs)
	req := apitype.BatchCreateJobsRequest{Jobs: make([]apitype.JobSpec, 0, room)}
	if !readBatch(b, &req) {
		req.Jobs = make([]apitype.JobSpec, 0, room) // encoding/json reuses what it finds there
		if err := decodeRead(b, &req, false); err != nil {
			return err
		}
	}
	switch {
	case len(req.Jobs) == 0:
		return invalidField("jobs", "must list at least one job")
	case len(req.Jobs) > a.lim.MaxBatchJobs:
		return invalidField("jobs", fmt.Sprintf("must list at most %d jobs, got %d", a.lim.MaxBatchJobs, len(req.Jobs)))
	}
	now := a.clock.Now()
	jobs := make([]store.NewJob, len(req.Jobs))
	var errs []apitype.FieldError
	type nsKey struct{ ns, key string }
	names := make(map[nsKey]int)
	keys := make(map[nsKey]int)
	for i := range req.Jobs {
		prefix := batchEntry(i)
		vj, fe := buildJob(&req.Jobs[i], prefix, now, a.lim, sealing{keys: a.keys})
		if len(fe) > 0 {
			errs = append(errs, fe...)
			continue
		}
		jobs[i] = store.NewJob{Job: vj.Job, Run: vj.Run}
		if req.Jobs[i].Name != "" {
			k := nsKey{vj.Job.Namespace, vj.Job.Name}
			if j, dup := names[k]; dup {
				errs = append(errs, apitype.FieldError{Field: prefix + "name", Message: fmt.Sprintf("repeats the name of jobs[%d]", j)})
			} else {
				names[k] = i
			}
		}
		// A key repeated with the same request is a replay (the store answers it with the
		// earlier entry's job); with another request it can only be a mistake.
		if key := vj.Job.IdempotencyKey; key != "" {
			k := nsKey{vj.Job.Namespace, key}
			if j, dup := keys[k]; !dup {
				keys[k] = i
			} else if jobs[j].Job.RequestHash != vj.Job.RequestHash {
				errs = append(errs, apitype.FieldError{Field: prefix + "idempotency_key",
					Message: fmt.Sprintf("repeats the idempotency_key of jobs[%d] with a different request", j)})
			}
		}
	}
	if len(errs) > 0 {
		return batchErrors(http.StatusBadRequest, errs)
	}
	for i, nj := range jobs {
		if !mayActIn(r.Context(), nj.Job.Namespace) {
			return actIn(r.Context(), batchEntry(i)+"namespace", nj.Job.Namespace)
		}
	}
	var ups []upstreamRef
	for i, nj := range jobs {
		if nj.Run != nil && len(nj.Run.DependsOn) > 0 {
			ups = append(ups, upstreamOf(nj.Run, batchEntry(i))...)
		}
	}
	if errs, err := a.missingUpstream(r.Context(), ups); err != nil {
		return err
	} else if len(errs) > 0 {
		return batchErrors(http.StatusBadRequest, errs)
	}
	// Names already taken: refuse the whole batch rather than create part of it. (A name
	// taken between this check and the commit fails that entry alone; its item says so.)
	if errs, err := a.takenNames(r.Context(), jobs, batchEntry); err != nil {
		return err
	} else if len(errs) > 0 {
		return batchErrors(http.StatusConflict, errs)
	}

	res, err := a.eng.SubmitJobs(r.Context(), jobs)
	if err != nil {
		return err
	}
	if len(res) != len(jobs) {
		return fmt.Errorf("create jobs: %d results for %d jobs", len(res), len(jobs))
	}
	if preferMinimal(r) {
		return a.createJobsMinimal(w, r, jobs, res)
	}
	out := apitype.BatchCreateJobsResponse{Items: make([]apitype.CreateJobResponse, len(res))}
	anyCreated := false
	for i, rr := range res {
		item, created, err := createResult(rr, batchEntry(i), jobs[i].Job)
		if err != nil {
			item = apitype.CreateJobResponse{Error: problemFor(err)}
			if item.Error.Status >= 500 {
				a.log.ErrorContext(r.Context(), "create job in batch", "index", i, "err", err)
			}
		}
		anyCreated = anyCreated || created
		out.Items[i] = item
	}
	status := http.StatusOK
	if anyCreated {
		status = http.StatusCreated
	}
	writeJSON(w, status, out)
	return nil
}

// preferMinimal reports whether the request asks for a minimal answer (RFC 7240: a Prefer
// header, possibly one of several, holding return=minimal).
func preferMinimal(r *http.Request) bool {
	for _, h := range r.Header.Values("Prefer") {
		for pref := range strings.SplitSeq(h, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(pref), "=")
			if strings.EqualFold(strings.TrimSpace(name), "return") &&
				strings.EqualFold(strings.Trim(strings.TrimSpace(val), `"`), "minimal") {
				return true
			}
		}
	}
	return false
}

// createJobsMinimal answers a batch with the ids of what it created (apitype.CreatedIDs): a
// client that only needs to know that its jobs were created spares the server converting
// and encoding a job and a run per entry.
func (a *API) createJobsMinimal(w http.ResponseWriter, r *http.Request, jobs []store.NewJob, res []store.CreateJobResult) error {
	items := make([]apitype.CreatedIDs, len(res))
	anyCreated := false
	for i, rr := range res {
		if rr.Err != nil || rr.Conflict {
			_, _, err := createResult(rr, batchEntry(i), jobs[i].Job)
			items[i].Error = problemFor(err)
			if items[i].Error.Status >= 500 {
				a.log.ErrorContext(r.Context(), "create job in batch", "index", i, "err", err)
			}
			continue
		}
		items[i] = apitype.CreatedIDs{JobID: rr.Job.ID, Existing: rr.Existing}
		if rr.Run != nil {
			items[i].RunID = rr.Run.ID
		}
		anyCreated = anyCreated || !rr.Existing
	}
	status := http.StatusOK
	if anyCreated {
		status = http.StatusCreated
	}
	w.Header().Set("Preference-Applied", "return=minimal")
	b, ok := appendMinimal(make([]byte, 0, 16+len(items)*80), items) // an entry of two ids: 79 bytes
	if !ok {
		writeJSON(w, status, apitype.BatchCreateJobsMinimalResponse{Items: items})
		return nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return nil
}

// appendMinimal appends what writeJSON writes of a minimal batch answer of items, by hand
// (encoding/json's reflection was a tenth of the route's CPU). It reports false where an
// entry has an error, or ids that JSON would escape: encoding/json writes that answer.
func appendMinimal(b []byte, items []apitype.CreatedIDs) ([]byte, bool) {
	b = append(b, `{"items":[`...)
	for i, it := range items {
		if it.Error != nil || !plainID(it.JobID) || !plainID(it.RunID) {
			return nil, false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		sep := false
		if it.JobID != "" {
			b = append(append(append(b, `"job_id":"`...), it.JobID...), '"')
			sep = true
		}
		if it.RunID != "" {
			if sep {
				b = append(b, ',')
			}
			b = append(append(append(b, `"run_id":"`...), it.RunID...), '"')
			sep = true
		}
		if it.Existing {
			if sep {
				b = append(b, ',')
			}
			b = append(b, `"existing":true`...)
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...), true
}

// plainID reports whether JSON writes s as it is: letters, digits, - and _ (an id).
func plainID(s string) bool {
	for i := range len(s) {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// batchEntry names entry i of a batch: "jobs[3].".
func batchEntry(i int) string { return "jobs[" + strconv.Itoa(i) + "]." }

// takenNames returns a field error for every entry whose name already belongs to a job,
// unless the entry's idempotency key is that job's (a replay). prefix names entry i.
func (a *API) takenNames(ctx context.Context, jobs []store.NewJob, prefix func(i int) string) ([]apitype.FieldError, error) {
	var errs []apitype.FieldError
	for i, nj := range jobs {
		j := nj.Job
		if j.Name == j.ID {
			continue // unnamed: the name is the new id
		}
		got, err := a.store.GetJob(ctx, &store.GetJobParams{Namespace: j.Namespace, IDOrName: j.Name})
		if errors.Is(err, model.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("check job names: %w", err)
		}
		if got.Name != j.Name || got.Namespace != j.Namespace {
			continue // matched an id, not the name
		}
		if j.IdempotencyKey != "" && got.IdempotencyKey == j.IdempotencyKey {
			continue
		}
		errs = append(errs, apitype.FieldError{
			Field:   prefix(i) + "name",
			Message: fmt.Sprintf("a job named %q already exists in namespace %q", j.Name, j.Namespace),
		})
	}
	return errs, nil
}

// upstreamRef is a run id that a request names as an upstream run, and the field naming it.
type upstreamRef struct{ field, runID string }

// upstreamOf lists the upstream runs of a job's first run (nil: none); prefix names the job
// within the request.
func upstreamOf(run *model.Run, prefix string) []upstreamRef {
	if run == nil {
		return nil
	}
	out := make([]upstreamRef, len(run.DependsOn))
	for i, d := range run.DependsOn {
		out[i] = upstreamRef{field: fmt.Sprintf("%sdepends_on[%d].run", prefix, i), runID: d.RunID}
	}
	return out
}

// missingUpstream returns a field error for each upstream run that does not exist, asking
// the store once per distinct run.
func (a *API) missingUpstream(ctx context.Context, refs []upstreamRef) ([]apitype.FieldError, error) {
	found := make(map[string]bool, len(refs))
	var errs []apitype.FieldError
	for _, u := range refs {
		ok, known := found[u.runID]
		if !known {
			run, err := a.store.GetRun(ctx, &store.GetRunParams{ID: u.runID})
			switch {
			case err == nil:
				ok = sees(ctx, run.Namespace) // another namespace's run is absent to a scoped token
			case !errors.Is(err, model.ErrNotFound):
				return nil, fmt.Errorf("check upstream run %s: %w", u.runID, err)
			}
			found[u.runID] = ok
		}
		if !ok {
			errs = append(errs, apitype.FieldError{Field: u.field, Message: "no run with this id"})
		}
	}
	return errs, nil
}

// batchErrors is a problem listing a batch's bad entries, at most maxListedErrors of them.
func batchErrors(status int, errs []apitype.FieldError) error {
	detail := fmt.Sprintf("%d invalid field(s); nothing was created", len(errs))
	if status == http.StatusConflict {
		detail = fmt.Sprintf("%d job name(s) already taken; nothing was created", len(errs))
	}
	if len(errs) > maxListedErrors {
		detail += fmt.Sprintf(" (the first %d are listed)", maxListedErrors)
		errs = errs[:maxListedErrors]
	}
	return &httpError{status: status, detail: detail, fields: errs}
}

// findJob resolves the {id} of a path, a job id or name in the namespace of ?namespace=.
func (a *API) findJob(r *http.Request) (*model.Job, error) {
	ns, err := namespaceParam(r.URL.Query())
	if err != nil {
		return nil, err
	}
	return a.lookupJob(r.Context(), ns, r.PathValue("id"))
}

// lookupJob finds a job by id or by name in ns. A job in a namespace the caller's token does
// not see is not found, as if absent.
func (a *API) lookupJob(ctx context.Context, ns, idOrName string) (*model.Job, error) {
	j, err := a.store.GetJob(ctx, &store.GetJobParams{Namespace: ns, IDOrName: idOrName})
	if err == nil && !sees(ctx, j.Namespace) {
		err = model.ErrNotFound
	}
	if errors.Is(err, model.ErrNotFound) {
		return nil, &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("job %q not found in namespace %q", idOrName, ns)}
	}
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", idOrName, err)
	}
	noteAudit(ctx, "job:"+j.ID, jobToAPI(j, nil))
	return j, nil
}

func namespaceParam(q url.Values) (string, error) {
	ns := q.Get("namespace")
	if ns == "" {
		return model.DefaultNamespace, nil
	}
	if !namePattern.MatchString(ns) {
		return "", invalidField("namespace", nameRule)
	}
	return ns, nil
}

// lastRun returns the newest run of a job, or nil.
func (a *API) lastRun(ctx context.Context, jobID string) (*model.Run, error) {
	last, err := a.store.LastRuns(ctx, &store.LastRunsParams{JobIDs: []string{jobID}})
	if err != nil {
		return nil, fmt.Errorf("last run of %s: %w", jobID, err)
	}
	return last[jobID], nil
}

// getJob serves GET /v1/jobs/{id}.
func (a *API) getJob(w http.ResponseWriter, r *http.Request) error {
	j, err := a.findJob(r)
	if err != nil {
		return err
	}
	last, err := a.lastRun(r.Context(), j.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobToAPI(j, last))
	return nil
}

// listJobs serves GET /v1/jobs.
func (a *API) listJobs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := &store.ListJobsParams{Queue: q.Get("queue"), Cursor: q.Get("cursor")}
	var errs []apitype.FieldError
	if ns := q.Get("namespace"); ns != "" {
		if !namePattern.MatchString(ns) {
			errs = append(errs, apitype.FieldError{Field: "namespace", Message: nameRule})
		}
		p.Namespace = ns
	}
	if p.Queue != "" && !namePattern.MatchString(p.Queue) {
		errs = append(errs, apitype.FieldError{Field: "queue", Message: nameRule})
	}
	if s := q.Get("enabled"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, apitype.FieldError{Field: "enabled", Message: "must be true or false"})
		}
		p.Enabled = &b
	}
	limit, fe := a.limitParam(q)
	errs = append(errs, fe...)
	if len(errs) > 0 {
		return invalidFields(errs)
	}
	p.Limit = limit
	p.Namespaces = scopeOf(r.Context())
	page, err := a.store.ListJobs(r.Context(), p)
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	ids := make([]string, len(page.Jobs))
	for i, j := range page.Jobs {
		ids[i] = j.ID
	}
	last, err := a.store.LastRuns(r.Context(), &store.LastRunsParams{JobIDs: ids})
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	out := apitype.JobList{Items: make([]*apitype.Job, len(page.Jobs)), NextCursor: page.NextCursor}
	for i, j := range page.Jobs {
		out.Items[i] = jobToAPI(j, last[j.ID])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// limitParam reads ?limit=: default 50 (or the page size limit when lower), 1 to
// Limits.MaxPageSize.
func (a *API) limitParam(q url.Values) (int, []apitype.FieldError) {
	s := q.Get("limit")
	if s == "" {
		return min(defaultLimit, a.lim.MaxPageSize), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > a.lim.MaxPageSize {
		return 0, []apitype.FieldError{{Field: "limit", Message: fmt.Sprintf("must be an integer from 1 to %d", a.lim.MaxPageSize)}}
	}
	return n, nil
}

// patchJob serves PATCH /v1/jobs/{id}: the patch is applied to the job's spec and the result
// validated like a new job.
func (a *API) patchJob(w http.ResponseWriter, r *http.Request) error {
	var patch apitype.JobPatch
	if err := decodeBody(r, &patch, false); err != nil {
		return err
	}
	j, err := a.findJob(r)
	if err != nil {
		return err
	}
	spec := specFromJob(j)
	applyPatch(spec, &patch)
	fe := &fieldErrors{}
	ms := specToModel(spec, fe, a.lim, sealing{keys: a.keys, prev: j.Spec.SecretEnv})
	if len(fe.errs) > 0 {
		return invalidFields(fe.errs)
	}
	// A changed schedule (or enabled flag) follows its new rule at once; any other change
	// leaves the next fire where it was.
	if ms.Concurrency.Key != "" && ms.Schedule != nil {
		if _, err := scheduler.RenderKey(&model.Job{Spec: ms}, nil); err != nil {
			return invalidField("concurrency.key", err.Error()+" (over the job's args)")
		}
	}
	scheduleChanged := patch.Schedule != nil || patch.Enabled != nil
	return a.updateJob(w, r, j, ms, *spec.Enabled, scheduleChanged)
}

// updateJob stores a job's new spec and answers with the job; reschedule recomputes its
// next fire from now.
func (a *API) updateJob(w http.ResponseWriter, r *http.Request, j *model.Job, spec model.JobSpec, enabled, reschedule bool) error {
	updated, err := a.storeUpdate(r.Context(), j, spec, enabled, reschedule)
	if err != nil {
		return err
	}
	last, err := a.lastRun(r.Context(), j.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobToAPI(updated, last))
	return nil
}

// storeUpdate stores a job's new spec and enabled flag. With reschedule (the schedule or the
// enabled flag changed) the next fire is worked out from now by the new rule; otherwise it
// stays where it was.
func (a *API) storeUpdate(ctx context.Context, j *model.Job, spec model.JobSpec, enabled, reschedule bool) (*model.Job, error) {
	next := j.NextFireAt
	if reschedule || spec.Schedule == nil {
		next = engine.NextFireAt(&model.Job{Spec: spec, Enabled: enabled}, a.clock.Now())
	}
	updated, err := a.eng.UpdateJob(ctx, &store.UpdateJobParams{
		ID: j.ID, Spec: spec, Enabled: enabled, NextFireAt: next, Reschedule: reschedule,
	})
	if errors.Is(err, model.ErrNotFound) {
		return nil, &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("job %q not found", j.ID)}
	}
	return updated, err
}

// pauseJob serves POST /v1/jobs/{id}/pause: the schedule stops firing.
func (a *API) pauseJob(w http.ResponseWriter, r *http.Request) error { return a.setPaused(w, r, true) }

// resumeJob serves POST /v1/jobs/{id}/resume: the schedule fires again from now on (the
// instants passed while paused are not misfires: they were switched off).
func (a *API) resumeJob(w http.ResponseWriter, r *http.Request) error {
	return a.setPaused(w, r, false)
}

func (a *API) setPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	j, err := a.findJob(r)
	if err != nil {
		return err
	}
	if j.Spec.Schedule == nil {
		return &httpError{status: http.StatusConflict, detail: fmt.Sprintf("job %q has no schedule to pause or resume", j.Name)}
	}
	spec := j.Spec
	sched := *spec.Schedule
	sched.Paused = paused
	spec.Schedule = &sched
	return a.updateJob(w, r, j, spec, j.Enabled, sched.Paused != j.Spec.Schedule.Paused)
}

// deleteJob serves DELETE /v1/jobs/{id}; the answer lists the runs it cancelled.
func (a *API) deleteJob(w http.ResponseWriter, r *http.Request) error {
	j, err := a.findJob(r)
	if err != nil {
		return err
	}
	runs, err := a.eng.DeleteJob(r.Context(), j.ID)
	if errors.Is(err, model.ErrNotFound) {
		return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("job %q not found", j.ID)}
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apitype.CancelResponse{Items: runsToAPI(runs)})
	return nil
}

// triggerJob serves POST /v1/jobs/{id}/trigger: a manual run, due now.
func (a *API) triggerJob(w http.ResponseWriter, r *http.Request) error {
	var req apitype.TriggerRequest
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	fe := &fieldErrors{}
	var args []byte
	if b := bytes.TrimSpace(req.Args); len(b) > 0 && !bytes.Equal(b, []byte("null")) {
		if b[0] != '{' {
			fe.add("args", "must be a JSON object")
		}
		args = req.Args
	}
	checkArgsSize(req.Args, "args", a.lim, fe)
	if len(req.IdempotencyKey) > maxKeyLen || hasControl(req.IdempotencyKey) {
		fe.add("idempotency_key", "must be at most %d bytes without control characters", maxKeyLen)
	}
	if len(fe.errs) > 0 {
		return invalidFields(fe.errs)
	}
	j, err := a.findJob(r)
	if err != nil {
		return err
	}
	return a.runNow(w, r, j, model.TriggerManual, args, req.IdempotencyKey)
}

// runNow creates a run of j due now and answers with it: 201, or 200 when the idempotency
// key names an earlier run.
func (a *API) runNow(w http.ResponseWriter, r *http.Request, j *model.Job, trigger model.Trigger, args []byte, key string) error {
	if j.Spec.Concurrency.Key != "" {
		if _, err := scheduler.RenderKey(j, args); err != nil {
			return invalidField("args", err.Error()+" (the job's concurrency key)")
		}
	}
	now := a.clock.Now()
	run := scheduler.NewRun(id.New(now), j, trigger, args, now, now)
	run.IdempotencyKey = key
	res, err := a.eng.Trigger(r.Context(), []*model.Run{run})
	if err != nil {
		return err
	}
	if len(res) != 1 {
		return fmt.Errorf("trigger job: %d results for 1 run", len(res))
	}
	switch {
	case errors.Is(res[0].Err, model.ErrConflict):
		return conflict("idempotency_key", fmt.Sprintf("idempotency key %q belongs to another run", key))
	case errors.Is(res[0].Err, model.ErrNotFound):
		return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("job %q not found", j.ID)}
	case res[0].Err != nil:
		return res[0].Err
	}
	status := http.StatusCreated
	if res[0].Existing {
		status = http.StatusOK
	}
	writeJSON(w, status, apitype.RunResponse{Run: runToAPI(res[0].Run)})
	return nil
}

// cancelJob serves POST /v1/jobs/{id}/cancel.
func (a *API) cancelJob(w http.ResponseWriter, r *http.Request) error {
	j, err := a.findJob(r)
	if err != nil {
		return err
	}
	runs, err := a.eng.CancelRuns(r.Context(), &store.CancelRunsParams{JobID: j.ID})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apitype.CancelResponse{Items: runsToAPI(runs)})
	return nil
}
