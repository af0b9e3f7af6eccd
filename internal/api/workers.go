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
	if err := unscoped(r.Context(), "a worker"); err != nil {
		return err
	}
	workerID := r.PathValue("id")
	if before, err := a.eng.Worker(r.Context(), workerID); err == nil {
		noteAudit(r.Context(), "", workerToAPI(before))
	}
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
	resp, err := a.proto.Register(r.Context(), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// lease serves POST /v1/workers/{id}/lease, a long poll: it answers when runs are leased,
// something is pushed to the worker, the wait ends, or the client goes away.
func (a *API) lease(w http.ResponseWriter, r *http.Request) error {
	if err := actAs(r.Context(), r.PathValue("id")); err != nil {
		return err // before the body is read, as the route's permission is
	}
	var req apitype.LeaseRequest
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	resp, err := a.proto.Lease(r.Context(), r.PathValue("id"), &req)
	a.writeWindow(w)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// heartbeat serves POST /v1/workers/{id}/heartbeat.
func (a *API) heartbeat(w http.ResponseWriter, r *http.Request) error {
	if err := actAs(r.Context(), r.PathValue("id")); err != nil {
		return err // before the body is read, as the route's permission is
	}
	var req apitype.HeartbeatRequest
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	resp, err := a.proto.Heartbeat(r.Context(), r.PathValue("id"), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// leave serves POST /v1/workers/{id}/leave; it answers 204.
func (a *API) leave(w http.ResponseWriter, r *http.Request) error {
	if err := actAs(r.Context(), r.PathValue("id")); err != nil {
		return err // before the body is read, as the route's permission is
	}
	var req apitype.LeaveRequest
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	if err := a.proto.Leave(r.Context(), r.PathValue("id"), &req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// appendLogs serves POST /v1/attempts/logs; it answers 204.
func (a *API) appendLogs(w http.ResponseWriter, r *http.Request) error {
	var req apitype.LogChunksRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	if err := a.proto.AppendLogs(r.Context(), &req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// complete serves POST /v1/attempts/complete.
func (a *API) complete(w http.ResponseWriter, r *http.Request) error {
	var req apitype.CompleteRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	resp, err := a.proto.Complete(r.Context(), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}
