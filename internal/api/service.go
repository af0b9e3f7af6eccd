package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/version"
)

// openAPIDocument is the OpenAPI 3.1 description of every route, served as is.
//
//go:embed openapi.json
var openAPIDocument []byte

// version serves GET /v1/version: the server's build and the store schema it knows.
func (a *API) version(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, version.Get().Wire(store.SchemaVersion))
	return nil
}

// healthz serves GET /healthz: the process is alive.
func (a *API) healthz(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz serves GET /readyz: the store is reachable (opening it ran the migrations) and
// takes writes (see readiness).
func (a *API) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	err := a.store.Ping(ctx)
	cancel()
	if err != nil {
		a.log.WarnContext(r.Context(), "not ready: store unreachable", "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(int(unavailableRetryAfter/time.Second)))
		writeProblem(w, newProblem(http.StatusServiceUnavailable, "the store is not reachable", nil))
		return nil
	}
	if err := a.checkWrites(r.Context()); err != nil {
		a.log.WarnContext(r.Context(), "not ready: the store cannot take writes", "err", err)
		detail := "the store cannot take writes"
		var ue *model.UnavailableError
		if errors.As(err, &ue) {
			detail += " (" + ue.What + ")"
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(unavailableRetryAfter/time.Second)))
		writeProblem(w, newProblem(http.StatusServiceUnavailable, detail, nil))
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

// metrics serves GET /metrics with the configured handler.
func (a *API) metrics(w http.ResponseWriter, r *http.Request) error {
	if a.cfg.Metrics == nil {
		return &httpError{status: http.StatusNotFound, detail: "metrics are not enabled on this server"}
	}
	a.cfg.Metrics.ServeHTTP(w, r)
	return nil
}

// openAPI serves GET /v1/openapi.json.
func (a *API) openAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(openAPIDocument)))
	_, _ = w.Write(openAPIDocument)
	return nil
}
