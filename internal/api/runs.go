package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// findRun returns the run named by the path's {id}, with its attempts. A run in a namespace
// the caller's token does not see is not found, as if absent.
func (a *API) findRun(ctx context.Context, runID string) (*model.Run, error) {
	run, err := a.store.GetRun(ctx, &store.GetRunParams{ID: runID})
	if err == nil && !sees(ctx, run.Namespace) {
		err = model.ErrNotFound
	}
	if errors.Is(err, model.ErrNotFound) {
		return nil, &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("run %q not found", runID)}
	}
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", runID, err)
	}
	noteAudit(ctx, "run:"+run.ID, runToAPI(run))
	return run, nil
}

// getRun serves GET /v1/runs/{id}: the run with its attempts.
func (a *API) getRun(w http.ResponseWriter, r *http.Request) error {
	run, err := a.findRun(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := a.eng.ExplainPending(r.Context(), []*model.Run{run}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, runToAPI(run))
	return nil
}

// listRuns serves GET /v1/runs, newest first, filtered by ?status=, ?queue=, ?worker=,
// ?namespace= and ?job= (a job id, or a name in ?namespace=, default "default").
func (a *API) listRuns(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p := &store.ListRunsParams{Queue: q.Get("queue"), WorkerID: q.Get("worker"), Cursor: q.Get("cursor")}
	var errs []apitype.FieldError
	if s := q.Get("status"); s != "" {
		p.Status = model.RunStatus(s)
		if !p.Status.Valid() {
			errs = append(errs, apitype.FieldError{Field: "status",
				Message: "must be one of waiting, scheduled, queued, running, succeeded, failed, cancelled, skipped"})
		}
	}
	if p.Queue != "" && !namePattern.MatchString(p.Queue) {
		errs = append(errs, apitype.FieldError{Field: "queue", Message: nameRule})
	}
	limit, fe := a.limitParam(q)
	errs = append(errs, fe...)
	ns := q.Get("namespace")
	if ns == "" {
		ns = model.DefaultNamespace
	} else if !namePattern.MatchString(ns) {
		errs = append(errs, apitype.FieldError{Field: "namespace", Message: nameRule})
	}
	if len(errs) > 0 {
		return invalidFields(errs)
	}
	p.Limit = limit
	p.Namespaces = scopeOf(r.Context())
	if s := q.Get("namespace"); s != "" {
		if !sees(r.Context(), s) {
			writeJSON(w, http.StatusOK, apitype.RunList{Items: []*apitype.Run{}})
			return nil
		}
		p.Namespaces = []string{s}
	}
	if job := q.Get("job"); job != "" {
		j, err := a.lookupJob(r.Context(), ns, job)
		if err != nil {
			return err
		}
		p.JobID = j.ID
	}
	page, err := a.store.ListRuns(r.Context(), p)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	if err := a.eng.ExplainPending(r.Context(), page.Runs); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apitype.RunList{Items: runsToAPI(page.Runs), NextCursor: page.NextCursor})
	return nil
}

// cancelRun serves POST /v1/runs/{id}/cancel. A run that is not running yet ends cancelled
// at once; a running one is asked to stop (cancel_requested) and ends cancelled when its
// worker has stopped it. Cancelling a cancelled run again is a no-op; any other final run is
// a 409.
func (a *API) cancelRun(w http.ResponseWriter, r *http.Request) error {
	runID := r.PathValue("id")
	if err := a.runInScope(r.Context(), runID); err != nil {
		return err
	}
	runs, err := a.eng.CancelRuns(r.Context(), &store.CancelRunsParams{RunIDs: []string{runID}})
	if err != nil && !errors.Is(err, model.ErrNotFound) {
		return err
	}
	for _, run := range runs {
		if run.ID == runID {
			writeJSON(w, http.StatusOK, apitype.RunResponse{Run: runToAPI(run)})
			return nil
		}
	}
	// Nothing changed: the run is missing, already final, or already stopping.
	run, err := a.findRun(r.Context(), runID)
	if err != nil {
		return err
	}
	if run.Status.Final() && run.Status != model.RunCancelled {
		return &httpError{status: http.StatusConflict, detail: fmt.Sprintf("run %s already ended %s", runID, run.Status)}
	}
	writeJSON(w, http.StatusOK, apitype.RunResponse{Run: runToAPI(run)})
	return nil
}

// retryRun serves POST /v1/runs/{id}/retry: a failed or cancelled run is queued again for a
// new attempt.
func (a *API) retryRun(w http.ResponseWriter, r *http.Request) error {
	runID := r.PathValue("id")
	if err := a.runInScope(r.Context(), runID); err != nil {
		return err
	}
	run, err := a.eng.RetryRun(r.Context(), runID)
	switch {
	case errors.Is(err, model.ErrNotFound):
		return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("run %q not found", runID)}
	case errors.Is(err, model.ErrInvalidState):
		detail := fmt.Sprintf("run %s cannot be retried: only failed or cancelled runs can", runID)
		if cur, gerr := a.store.GetRun(r.Context(), &store.GetRunParams{ID: runID}); gerr == nil {
			detail = fmt.Sprintf("run %s is %s: only failed or cancelled runs can be retried", runID, cur.Status)
		}
		return &httpError{status: http.StatusConflict, detail: detail}
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, apitype.RunResponse{Run: runToAPI(run)})
	return nil
}

// runInScope answers 404 for a run a scoped token does not see, before an action on it: as
// if it were absent. An unscoped caller is not asked to wait for a read.
func (a *API) runInScope(ctx context.Context, runID string) error {
	if len(scopeOf(ctx)) == 0 {
		return nil
	}
	_, err := a.findRun(ctx, runID)
	return err
}
