package api

import (
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"time"
)

// openAPIDocument is the OpenAPI 3.1 description of every route, served as is.
//
//go:embed openapi.json
var openAPIDocument []byte

// readyTimeout bounds the store ping of GET /readyz.
const readyTimeout = 2 * time.Second

// healthz serves GET /healthz: the process is alive.
func (a *API) healthz(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyz serves GET /readyz: the store is reachable (opening it ran the migrations).
func (a *API) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := a.store.Ping(ctx); err != nil {
		a.log.WarnContext(ctx, "not ready: store unreachable", "err", err)
		writeProblem(w, newProblem(http.StatusServiceUnavailable, "the store is not reachable", nil))
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
