package api

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
)

// workerIDPattern is what worker ids look like (host names, host-pid, user@host). A compiled
// regexp is read-only, so it is safe as a package variable.
var workerIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

// maxLeaseBatch caps the runs one lease request may ask for.
const maxLeaseBatch = 1000

// workerNotFound words a missing worker: for the protocol routes, an unregistered worker
// should register again.
func workerNotFound(workerID string, err error) error {
	if errors.Is(err, engine.ErrUnknownWorker) {
		return &httpError{status: http.StatusNotFound,
			detail: fmt.Sprintf("worker %q is not registered with this server: register again", workerID)}
	}
	if errors.Is(err, model.ErrNotFound) {
		return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("worker %q not found", workerID)}
	}
	return err
}

// listWorkers serves GET /v1/workers.
func (a *API) listWorkers(w http.ResponseWriter, r *http.Request) error {
	ws, err := a.eng.Workers(r.Context())
	if err != nil {
		return err
	}
	out := apitype.WorkerList{Items: make([]*apitype.Worker, len(ws))}
	for i, wk := range ws {
		out.Items[i] = workerToAPI(wk)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getWorker serves GET /v1/workers/{id}.
func (a *API) getWorker(w http.ResponseWriter, r *http.Request) error {
	workerID := r.PathValue("id")
	wk, err := a.eng.Worker(r.Context(), workerID)
	if err != nil {
		return workerNotFound(workerID, err)
	}
	writeJSON(w, http.StatusOK, workerToAPI(wk))
	return nil
}

// drainWorker serves POST /v1/workers/{id}/drain: the worker stops taking work and exits once
// its running attempts end. The answer is the worker, now draining.
func (a *API) drainWorker(w http.ResponseWriter, r *http.Request) error {
	workerID := r.PathValue("id")
	if err := a.eng.DrainWorker(r.Context(), workerID); err != nil {
		return workerNotFound(workerID, err)
	}
	wk, err := a.eng.Worker(r.Context(), workerID)
	if err != nil {
		return workerNotFound(workerID, err)
	}
	writeJSON(w, http.StatusOK, workerToAPI(wk))
	return nil
}

// registerWorker serves POST /v1/workers/register.
func (a *API) registerWorker(w http.ResponseWriter, r *http.Request) error {
	var req apitype.RegisterRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	fe := &fieldErrors{}
	if !workerIDPattern.MatchString(req.ID) {
		fe.add("id", "must be 1 to 128 letters, digits, '.', '_', ':', '@' or '-', starting with a letter or digit")
	}
	if req.Capacity.CPU < 0 {
		fe.add("capacity.cpu", "must not be negative")
	}
	if req.Capacity.MemoryMB < 0 {
		fe.add("capacity.memory_mb", "must not be negative")
	}
	if req.Capacity.GPU < 0 {
		fe.add("capacity.gpu", "must not be negative")
	}
	if req.Capacity.Slots < 0 {
		fe.add("capacity.slots", "must not be negative")
	}
	for _, k := range sortedKeys(req.Labels) {
		if k == "" {
			fe.add("labels", "keys must not be empty")
		}
	}
	for i, h := range req.Handlers {
		if h == "" {
			fe.add(fmt.Sprintf("handlers[%d]", i), "must not be empty")
		}
	}
	if len(fe.errs) > 0 {
		return invalidFields(fe.errs)
	}
	resp, err := a.eng.Register(r.Context(), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// lease serves POST /v1/workers/{id}/lease, a long poll: it answers when runs are leased,
// something is pushed to the worker, the wait ends, or the client goes away.
func (a *API) lease(w http.ResponseWriter, r *http.Request) error {
	var req apitype.LeaseRequest
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	fe := &fieldErrors{}
	if req.Max < 0 || req.Max > maxLeaseBatch {
		fe.add("max", "must be between 0 and %d", maxLeaseBatch)
	}
	if req.Wait != nil && req.Wait.Std() < 0 {
		fe.add("wait", "must not be negative")
	}
	if len(fe.errs) > 0 {
		return invalidFields(fe.errs)
	}
	workerID := r.PathValue("id")
	resp, err := a.eng.Lease(r.Context(), workerID, &req)
	if err != nil {
		return workerNotFound(workerID, err)
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// heartbeat serves POST /v1/workers/{id}/heartbeat.
func (a *API) heartbeat(w http.ResponseWriter, r *http.Request) error {
	var req apitype.HeartbeatRequest
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	fe := &fieldErrors{}
	for i, h := range req.Held {
		if h.RunID == "" {
			fe.add(fmt.Sprintf("held[%d].run_id", i), "is required")
		}
		if h.Token == "" {
			fe.add(fmt.Sprintf("held[%d].token", i), "is required: the lease's fencing token")
		}
	}
	if len(fe.errs) > 0 {
		return invalidFields(fe.errs)
	}
	workerID := r.PathValue("id")
	resp, err := a.eng.Heartbeat(r.Context(), workerID, &req)
	if err != nil {
		return workerNotFound(workerID, err)
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// appendLogs serves POST /v1/attempts/logs; it answers 204.
func (a *API) appendLogs(w http.ResponseWriter, r *http.Request) error {
	var req apitype.LogChunksRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	fe := &fieldErrors{}
	for i, c := range req.Chunks {
		if c.RunID == "" {
			fe.add(fmt.Sprintf("chunks[%d].run_id", i), "is required")
		}
		if c.Attempt < 1 {
			fe.add(fmt.Sprintf("chunks[%d].attempt", i), "must be at least 1")
		}
		if c.Seq < 1 {
			fe.add(fmt.Sprintf("chunks[%d].seq", i), "must be at least 1")
		}
		if c.Stream != string(model.Stdout) && c.Stream != string(model.Stderr) {
			fe.add(fmt.Sprintf("chunks[%d].stream", i), "must be stdout or stderr")
		}
	}
	if len(fe.errs) > 0 {
		return invalidFields(fe.errs)
	}
	if len(req.Chunks) > 0 {
		if err := a.eng.AppendLogs(r.Context(), &req); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// complete serves POST /v1/attempts/complete. A completion with a stale lease token is
// refused in its result (accepted false) and changes nothing; the others are recorded.
func (a *API) complete(w http.ResponseWriter, r *http.Request) error {
	var req apitype.CompleteRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	fe := &fieldErrors{}
	for i, c := range req.Completions {
		if c.RunID == "" {
			fe.add(fmt.Sprintf("completions[%d].run_id", i), "is required")
		}
		if c.Token == "" {
			fe.add(fmt.Sprintf("completions[%d].token", i), "is required")
		}
		if !model.AttemptStatus(c.Status).Valid() {
			fe.add(fmt.Sprintf("completions[%d].status", i), "must be one of succeeded, failed, timed_out, lost, cancelled")
		}
	}
	if len(fe.errs) > 0 {
		return invalidFields(fe.errs)
	}
	resp := &apitype.CompleteResponse{Results: []apitype.CompletionResult{}}
	if len(req.Completions) > 0 {
		var err error
		if resp, err = a.eng.Complete(r.Context(), &req); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}
