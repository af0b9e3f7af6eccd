package api

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// authClass says which bearer token a route needs.
type authClass int

const (
	authOpen   authClass = iota // health, readiness, metrics, the OpenAPI document
	authUser                    // the REST API: UserToken when set
	authWorker                  // the worker protocol: WorkerToken or UserToken when either is set
)

// bodySize selects a route's body cap.
type bodySize int

const (
	bodyDefault bodySize = iota // Limits.MaxBodyBytes
	bodyBatch                   // Limits.MaxBatchBodyBytes: POST /v1/jobs/batch, POST /v1/dags
	bodyLogs                    // Limits.MaxLogBodyBytes: POST /v1/attempts/logs
)

// route is one entry of the route table.
type route struct {
	Method string
	Path   string // a ServeMux pattern path; also the OpenAPI path
	Auth   authClass
	Body   bodySize
	Submit bool // creates jobs or runs: counts against the client's submission rate
	Handle func(a *API, w http.ResponseWriter, r *http.Request) error
}

// routeTable lists every route the API serves. It is the one place routes are declared: New
// registers them and a test checks that the OpenAPI document describes exactly these.
func routeTable() []route {
	return []route{
		{Method: "GET", Path: "/healthz", Auth: authOpen, Handle: (*API).healthz},
		{Method: "GET", Path: "/readyz", Auth: authOpen, Handle: (*API).readyz},
		{Method: "GET", Path: "/metrics", Auth: authOpen, Handle: (*API).metrics},
		{Method: "GET", Path: "/v1/openapi.json", Auth: authOpen, Handle: (*API).openAPI},

		{Method: "POST", Path: "/v1/jobs", Auth: authUser, Submit: true, Handle: (*API).createJob},
		{Method: "POST", Path: "/v1/jobs/batch", Auth: authUser, Body: bodyBatch, Submit: true, Handle: (*API).createJobs},
		{Method: "GET", Path: "/v1/jobs", Auth: authUser, Handle: (*API).listJobs},
		{Method: "GET", Path: "/v1/jobs/{id}", Auth: authUser, Handle: (*API).getJob},
		{Method: "PATCH", Path: "/v1/jobs/{id}", Auth: authUser, Handle: (*API).patchJob},
		{Method: "DELETE", Path: "/v1/jobs/{id}", Auth: authUser, Handle: (*API).deleteJob},
		{Method: "POST", Path: "/v1/jobs/{id}/trigger", Auth: authUser, Submit: true, Handle: (*API).triggerJob},
		{Method: "POST", Path: "/v1/jobs/{id}/cancel", Auth: authUser, Handle: (*API).cancelJob},
		{Method: "PUT", Path: "/v1/jobs/{id}", Auth: authUser, Submit: true, Handle: (*API).applyJob},
		{Method: "POST", Path: "/v1/jobs/{id}/backfill", Auth: authUser, Submit: true, Handle: (*API).backfill},
		{Method: "POST", Path: "/v1/jobs/{id}/webhook", Auth: authUser, Handle: (*API).rotateWebhookSecret},
		{Method: "POST", Path: "/v1/hooks/{id}", Auth: authOpen, Submit: true, Handle: (*API).hook},
		{Method: "POST", Path: "/v1/hooks/pipelines/{name}", Auth: authOpen, Submit: true, Handle: (*API).pipelineHook},
		{Method: "POST", Path: "/v1/jobs/{id}/pause", Auth: authUser, Handle: (*API).pauseJob},
		{Method: "POST", Path: "/v1/jobs/{id}/resume", Auth: authUser, Handle: (*API).resumeJob},
		{Method: "POST", Path: "/v1/plan", Auth: authUser, Handle: (*API).plan},
		{Method: "POST", Path: "/v1/dags", Auth: authUser, Body: bodyBatch, Submit: true, Handle: (*API).createDAG},

		{Method: "GET", Path: "/v1/pipelines", Auth: authUser, Handle: (*API).listPipelines},
		{Method: "PUT", Path: "/v1/pipelines/{name}", Auth: authUser, Submit: true, Handle: (*API).putPipeline},
		{Method: "GET", Path: "/v1/pipelines/{name}", Auth: authUser, Handle: (*API).getPipeline},
		{Method: "DELETE", Path: "/v1/pipelines/{name}", Auth: authUser, Handle: (*API).deletePipeline},
		{Method: "POST", Path: "/v1/pipelines/{name}/trigger", Auth: authUser, Submit: true, Handle: (*API).triggerPipeline},
		{Method: "POST", Path: "/v1/pipelines/{name}/webhook", Auth: authUser, Handle: (*API).rotatePipelineWebhookSecret},
		{Method: "GET", Path: "/v1/pipelines/{name}/runs", Auth: authUser, Handle: (*API).listPipelineRuns},
		{Method: "GET", Path: "/v1/pipelines/{name}/runs/{id}", Auth: authUser, Handle: (*API).getPipelineRun},
		{Method: "POST", Path: "/v1/pipelines/{name}/runs/{id}/cancel", Auth: authUser, Handle: (*API).cancelPipelineRun},
		{Method: "POST", Path: "/v1/pipelines/{name}/runs/{id}/retry", Auth: authUser, Submit: true, Handle: (*API).retryPipelineRun},

		{Method: "GET", Path: "/v1/runs", Auth: authUser, Handle: (*API).listRuns},
		{Method: "GET", Path: "/v1/runs/{id}", Auth: authUser, Handle: (*API).getRun},
		{Method: "POST", Path: "/v1/runs/{id}/cancel", Auth: authUser, Handle: (*API).cancelRun},
		{Method: "POST", Path: "/v1/runs/{id}/retry", Auth: authUser, Submit: true, Handle: (*API).retryRun},
		{Method: "GET", Path: "/v1/runs/{id}/logs", Auth: authUser, Handle: (*API).runLogs},

		{Method: "GET", Path: "/v1/cluster", Auth: authUser, Handle: (*API).getCluster},
		{Method: "GET", Path: "/v1/workers", Auth: authUser, Handle: (*API).listWorkers},
		{Method: "GET", Path: "/v1/workers/{id}", Auth: authUser, Handle: (*API).getWorker},
		{Method: "POST", Path: "/v1/workers/{id}/drain", Auth: authUser, Handle: (*API).drainWorker},

		{Method: "GET", Path: "/v1/queues", Auth: authUser, Handle: (*API).listQueues},
		{Method: "GET", Path: "/v1/queues/{name}", Auth: authUser, Handle: (*API).getQueue},
		{Method: "PATCH", Path: "/v1/queues/{name}", Auth: authUser, Handle: (*API).patchQueue},

		{Method: "POST", Path: "/v1/workers/register", Auth: authWorker, Handle: (*API).registerWorker},
		{Method: "POST", Path: "/v1/workers/{id}/lease", Auth: authWorker, Handle: (*API).lease},
		{Method: "POST", Path: "/v1/workers/{id}/heartbeat", Auth: authWorker, Handle: (*API).heartbeat},
		{Method: "POST", Path: "/v1/attempts/logs", Auth: authWorker, Body: bodyLogs, Handle: (*API).appendLogs},
		{Method: "POST", Path: "/v1/attempts/complete", Auth: authWorker, Handle: (*API).complete},
	}
}

// endpoint wraps a route's handler: it checks the bearer token, takes a turn of the
// client's submission rate (routes marked Submit), caps the body, and answers the handler's
// error with a problem document.
func (a *API) endpoint(rt route) http.Handler {
	limit := a.bodyLimit(rt.Body)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := a.authorized(rt.Auth, r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="stint"`)
			writeProblem(w, newProblem(http.StatusUnauthorized, "a valid bearer token is required", nil))
			return
		}
		if token != "" {
			r = withPrincipal(r, token)
		}
		if rt.Submit && a.submits != nil {
			if ok, wait := a.submits.take(a.cfg.ClientKey(r), a.clock.Now()); !ok {
				a.writeError(w, r, tooMany(a.cfg.SubmitRate, wait))
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		err := rt.Handle(a, w, r)
		if writes(r) {
			a.ready.noteWrite(err, a.clock.Now())
		}
		if err != nil {
			a.writeError(w, r, err)
		}
	})
}

// authorized checks the request's bearer token against the tokens the route accepts. It
// returns the token the request was authenticated with ("" when the route checked none).
func (a *API) authorized(class authClass, r *http.Request) (string, bool) {
	var accept []string
	switch class {
	case authOpen:
		return "", true
	case authUser:
		if a.cfg.UserToken == "" {
			return "", true
		}
		accept = []string{a.cfg.UserToken}
	case authWorker:
		if a.cfg.UserToken == "" && a.cfg.WorkerToken == "" {
			return "", true
		}
		accept = []string{a.cfg.UserToken, a.cfg.WorkerToken}
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	good := false
	for _, t := range accept {
		if t != "" && subtle.ConstantTimeCompare([]byte(token), []byte(t)) == 1 {
			good = true
		}
	}
	if !good {
		return "", false
	}
	return token, true
}
