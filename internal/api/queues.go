package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// Queue states accepted by PATCH /v1/queues/{name} as "state".
const (
	queueActive = "active"
	queuePaused = "paused"
)

// listQueues serves GET /v1/queues.
func (a *API) listQueues(w http.ResponseWriter, r *http.Request) error {
	qs, err := a.store.ListQueues(r.Context())
	if err != nil {
		return fmt.Errorf("list queues: %w", err)
	}
	out := apitype.QueueList{Items: make([]*apitype.Queue, len(qs))}
	for i, q := range qs {
		out.Items[i] = queueToAPI(q)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getQueue serves GET /v1/queues/{name}.
func (a *API) getQueue(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	q, err := a.store.GetQueue(r.Context(), &store.GetQueueParams{Name: name})
	if errors.Is(err, model.ErrNotFound) {
		return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("queue %q not found", name)}
	}
	if err != nil {
		return fmt.Errorf("get queue %s: %w", name, err)
	}
	writeJSON(w, http.StatusOK, queueToAPI(q))
	return nil
}

// patchQueue serves PATCH /v1/queues/{name}: paused (or state active|paused),
// max_concurrency, priority and rate_limit. A queue that does not exist is a 404, so that a
// misspelled name changes nothing, unless ?create=true asks for it (to set up a queue before
// its first job); the default queue always exists.
func (a *API) patchQueue(w http.ResponseWriter, r *http.Request) error {
	var patch apitype.QueuePatch
	if err := decodeBody(r, &patch, false); err != nil {
		return err
	}
	if err := unscoped(r.Context(), "a queue"); err != nil {
		return err
	}
	name := r.PathValue("name")
	fe := &fieldErrors{}
	if !namePattern.MatchString(name) {
		fe.add("name", nameRule)
	}
	create := false
	if s := r.URL.Query().Get("create"); s != "" {
		var err error
		if create, err = strconv.ParseBool(s); err != nil {
			fe.add("create", "must be true or false")
		}
	}
	if patch.MaxConcurrency != nil && *patch.MaxConcurrency < 0 {
		fe.add("max_concurrency", "must not be negative (0 means no limit)")
	}
	if patch.Priority != nil && (*patch.Priority < minPriority || *patch.Priority > maxPriority) {
		fe.add("priority", "must be between %d and %d", minPriority, maxPriority)
	}
	paused := patch.Paused
	if patch.State != nil {
		var p bool
		switch *patch.State {
		case queueActive:
		case queuePaused:
			p = true
		default:
			fe.add("state", "must be active or paused")
		}
		if paused != nil && *paused != p {
			fe.add("state", "contradicts paused")
		}
		paused = &p
	}
	alerts := queueAlertsToModel(patch.Alerts, fe)
	var rate *model.RateLimit
	if rl := patch.RateLimit; rl != nil {
		rate = &model.RateLimit{Rate: rl.Rate, Per: rl.Per.Std()}
		if rl.Rate != 0 { // 0 removes the limit
			checkRate(rl, "rate_limit", fe)
		}
	}
	if len(fe.errs) > 0 {
		return invalidFields(fe.errs)
	}
	before, err := a.store.GetQueue(r.Context(), &store.GetQueueParams{Name: name})
	if err == nil {
		noteAudit(r.Context(), "", queueToAPI(before))
	}
	if !create && name != model.DefaultQueue {
		// Queues are never deleted, so one found here still exists when it is updated.
		if errors.Is(err, model.ErrNotFound) {
			return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf(
				"queue %q not found: a queue exists once a job uses it; PATCH with ?create=true creates it", name)}
		}
		if err != nil {
			return fmt.Errorf("get queue %s: %w", name, err)
		}
	}
	q, err := a.eng.UpdateQueue(r.Context(), &store.UpdateQueueParams{
		Name: name, Priority: patch.Priority, MaxConcurrency: patch.MaxConcurrency, Paused: paused, RateLimit: rate,
		Alerts: alerts,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, queueToAPI(q))
	return nil
}

// queueAlertsToModel checks a queue's alert thresholds; {} removes them.
func queueAlertsToModel(a *apitype.QueueAlerts, fe *fieldErrors) *model.QueueAlerts {
	if a == nil {
		return nil
	}
	out := &model.QueueAlerts{Off: a.Off, MaxBacklog: a.MaxBacklog}
	if a.MaxBacklog < 0 {
		fe.add("alerts.max_backlog", "must not be negative (0: the server's default)")
	}
	if a.MaxAge != nil {
		out.MaxAge = a.MaxAge.Std()
		if out.MaxAge < 0 || out.MaxAge > maxAlertWait {
			fe.add("alerts.max_age", "must be between 0 and %s (0: the server's default)", maxAlertWait)
		}
	}
	return out
}
