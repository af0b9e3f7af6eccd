package api

import (
	"errors"
	"net/http"

	"github.com/stint-dev/stint/internal/auth"
)

// bodySize selects a route's body cap.
type bodySize int

const (
	bodyDefault bodySize = iota // Limits.MaxBodyBytes
	bodyBatch                   // Limits.MaxBatchBodyBytes: POST /v1/jobs/batch, POST /v1/dags
	bodyLogs                    // Limits.MaxLogBodyBytes: POST /v1/attempts/logs
	bodyStream                  // Limits.MaxStreamBodyBytes: POST /v1/jobs/stream
	bodyHeld                    // heldBodyBytes (at least MaxBodyBytes): a worker's register and heartbeat
)

// route is one entry of the route table.
type route struct {
	Method string
	Path   string    // a ServeMux pattern path; also the OpenAPI path
	Perm   auth.Perm // what the caller needs (auth.Allows); every route declares one
	Body   bodySize
	Submit bool // creates jobs or runs: counts against the client's submission rate
	// Audit is the action a successful call records in the audit log ("job.update"); every
	// route that changes something but the worker protocol has one. AuditSecret: the
	// answer carries a secret, so the entry keeps only what the handler notes.
	Audit       string
	AuditSecret bool
	// Stream: the handler answers as it goes, so its answer is not held for the audit log:
	// it records an entry for each part of its change as it commits it (noteCommit).
	Stream bool
	Handle func(a *API, w http.ResponseWriter, r *http.Request) error
}

// routeTable lists every route the API serves. It is the one place routes are declared, with
// the permission each needs: New registers them (and refuses a route without a permission),
// a test checks that the OpenAPI document describes exactly these, and another walks every
// one with every role.
func routeTable() []route {
	return []route{
		{Method: "GET", Path: "/healthz", Perm: auth.Open, Handle: (*API).healthz},
		{Method: "GET", Path: "/readyz", Perm: auth.Open, Handle: (*API).readyz},
		{Method: "GET", Path: "/metrics", Perm: auth.Open, Handle: (*API).metrics},
		{Method: "GET", Path: "/v1/openapi.json", Perm: auth.Open, Handle: (*API).openAPI},
		{Method: "GET", Path: "/v1/whoami", Perm: auth.Read, Handle: (*API).whoami},
		{Method: "GET", Path: "/v1/version", Perm: auth.Read, Handle: (*API).version},

		{Method: "POST", Path: "/v1/jobs", Perm: auth.Operate, Submit: true, Audit: "job.create", Handle: (*API).createJob},
		{Method: "POST", Path: "/v1/jobs/batch", Perm: auth.Operate, Body: bodyBatch, Submit: true, Audit: "job.create_batch", Handle: (*API).createJobs},
		{Method: "POST", Path: "/v1/jobs/stream", Perm: auth.Operate, Body: bodyStream, Submit: true, Audit: "job.create_stream", Stream: true, Handle: (*API).createJobStream},
		{Method: "GET", Path: "/v1/jobs", Perm: auth.Read, Handle: (*API).listJobs},
		{Method: "GET", Path: "/v1/jobs/{id}", Perm: auth.Read, Handle: (*API).getJob},
		{Method: "PATCH", Path: "/v1/jobs/{id}", Perm: auth.Operate, Audit: "job.update", Handle: (*API).patchJob},
		{Method: "DELETE", Path: "/v1/jobs/{id}", Perm: auth.Operate, Audit: "job.delete", Handle: (*API).deleteJob},
		{Method: "POST", Path: "/v1/jobs/{id}/trigger", Perm: auth.Operate, Submit: true, Audit: "job.trigger", Handle: (*API).triggerJob},
		{Method: "POST", Path: "/v1/jobs/{id}/cancel", Perm: auth.Operate, Audit: "job.cancel", Handle: (*API).cancelJob},
		{Method: "PUT", Path: "/v1/jobs/{id}", Perm: auth.Operate, Submit: true, Audit: "job.apply", Handle: (*API).applyJob},
		{Method: "POST", Path: "/v1/jobs/{id}/backfill", Perm: auth.Operate, Submit: true, Audit: "job.backfill", Handle: (*API).backfill},
		{Method: "POST", Path: "/v1/jobs/{id}/webhook", Perm: auth.Operate, Audit: "job.webhook_rotate", AuditSecret: true, Handle: (*API).rotateWebhookSecret},
		{Method: "POST", Path: "/v1/hooks/{id}", Perm: auth.Open, Submit: true, Audit: "job.webhook_trigger", Handle: (*API).hook},
		{Method: "POST", Path: "/v1/hooks/pipelines/{name}", Perm: auth.Open, Submit: true, Audit: "pipeline.webhook_trigger", Handle: (*API).pipelineHook},
		{Method: "POST", Path: "/v1/jobs/{id}/pause", Perm: auth.Operate, Audit: "job.pause", Handle: (*API).pauseJob},
		{Method: "POST", Path: "/v1/jobs/{id}/resume", Perm: auth.Operate, Audit: "job.resume", Handle: (*API).resumeJob},
		{Method: "POST", Path: "/v1/plan", Perm: auth.Read, Handle: (*API).plan},
		{Method: "POST", Path: "/v1/dags", Perm: auth.Operate, Body: bodyBatch, Submit: true, Audit: "dag.create", Handle: (*API).createDAG},
		{Method: "GET", Path: "/v1/dags", Perm: auth.Read, Handle: (*API).listDAGs},
		{Method: "GET", Path: "/v1/dags/{id}", Perm: auth.Read, Handle: (*API).getDAG},

		{Method: "GET", Path: "/v1/pipelines", Perm: auth.Read, Handle: (*API).listPipelines},
		{Method: "PUT", Path: "/v1/pipelines/{name}", Perm: auth.Operate, Submit: true, Audit: "pipeline.apply", Handle: (*API).putPipeline},
		{Method: "GET", Path: "/v1/pipelines/{name}", Perm: auth.Read, Handle: (*API).getPipeline},
		{Method: "DELETE", Path: "/v1/pipelines/{name}", Perm: auth.Operate, Audit: "pipeline.delete", Handle: (*API).deletePipeline},
		{Method: "POST", Path: "/v1/pipelines/{name}/trigger", Perm: auth.Operate, Submit: true, Audit: "pipeline.trigger", Handle: (*API).triggerPipeline},
		{Method: "POST", Path: "/v1/pipelines/{name}/webhook", Perm: auth.Operate, Audit: "pipeline.webhook_rotate", AuditSecret: true, Handle: (*API).rotatePipelineWebhookSecret},
		{Method: "GET", Path: "/v1/pipelines/{name}/runs", Perm: auth.Read, Handle: (*API).listPipelineRuns},
		{Method: "GET", Path: "/v1/pipelines/{name}/runs/{id}", Perm: auth.Read, Handle: (*API).getPipelineRun},
		{Method: "POST", Path: "/v1/pipelines/{name}/runs/{id}/cancel", Perm: auth.Operate, Audit: "pipeline_run.cancel", Handle: (*API).cancelPipelineRun},
		{Method: "POST", Path: "/v1/pipelines/{name}/runs/{id}/retry", Perm: auth.Operate, Submit: true, Audit: "pipeline_run.retry", Handle: (*API).retryPipelineRun},

		{Method: "GET", Path: "/v1/runs", Perm: auth.Read, Handle: (*API).listRuns},
		{Method: "GET", Path: "/v1/runs/{id}", Perm: auth.Read, Handle: (*API).getRun},
		{Method: "POST", Path: "/v1/runs/{id}/cancel", Perm: auth.Operate, Audit: "run.cancel", Handle: (*API).cancelRun},
		{Method: "POST", Path: "/v1/runs/{id}/retry", Perm: auth.Operate, Submit: true, Audit: "run.retry", Handle: (*API).retryRun},
		{Method: "GET", Path: "/v1/runs/{id}/logs", Perm: auth.Read, Handle: (*API).runLogs},

		{Method: "GET", Path: "/v1/cluster", Perm: auth.Read, Handle: (*API).getCluster},
		{Method: "GET", Path: "/v1/doctor", Perm: auth.Read, Handle: (*API).doctor},
		{Method: "GET", Path: "/v1/workers", Perm: auth.Read, Handle: (*API).listWorkers},
		{Method: "GET", Path: "/v1/workers/{id}", Perm: auth.Read, Handle: (*API).getWorker},
		{Method: "POST", Path: "/v1/workers/{id}/drain", Perm: auth.Operate, Audit: "worker.drain", Handle: (*API).drainWorker},

		{Method: "GET", Path: "/v1/queues", Perm: auth.Read, Handle: (*API).listQueues},
		{Method: "GET", Path: "/v1/queues/{name}", Perm: auth.Read, Handle: (*API).getQueue},
		{Method: "PATCH", Path: "/v1/queues/{name}", Perm: auth.Operate, Audit: "queue.update", Handle: (*API).patchQueue},

		{Method: "GET", Path: "/v1/alerts", Perm: auth.Read, Handle: (*API).listAlerts},
		{Method: "GET", Path: "/v1/audit", Perm: auth.Read, Handle: (*API).listAudit},

		{Method: "GET", Path: "/v1/tokens", Perm: auth.Admin, Handle: (*API).listTokens},
		{Method: "POST", Path: "/v1/tokens", Perm: auth.Admin, Audit: "token.create", AuditSecret: true, Handle: (*API).createToken},
		{Method: "POST", Path: "/v1/tokens/{id}/revoke", Perm: auth.Admin, Audit: "token.revoke", Handle: (*API).revokeToken},

		{Method: "POST", Path: "/v1/workers/register", Perm: auth.Worker, Body: bodyHeld, Handle: (*API).registerWorker},
		{Method: "POST", Path: "/v1/workers/{id}/lease", Perm: auth.Worker, Handle: (*API).lease},
		{Method: "POST", Path: "/v1/workers/{id}/heartbeat", Perm: auth.Worker, Body: bodyHeld, Handle: (*API).heartbeat},
		{Method: "POST", Path: "/v1/workers/{id}/leave", Perm: auth.Worker, Handle: (*API).leave},
		{Method: "POST", Path: "/v1/attempts/logs", Perm: auth.Worker, Body: bodyLogs, Handle: (*API).appendLogs},
		{Method: "POST", Path: "/v1/attempts/complete", Perm: auth.Worker, Handle: (*API).complete},
	}
}

// endpoint wraps a route's handler: it authenticates the caller and checks the route's
// permission (auth.go), takes a turn of the client's submission rate (routes marked Submit;
// ratelimit.go), caps the body, and answers the handler's error with a problem document.
func (a *API) endpoint(rt route) http.Handler {
	limit := a.bodyLimit(rt.Body)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, ok := a.authorize(w, r, rt.Perm)
		if !ok {
			return
		}
		if rt.Submit && a.submits != nil {
			if ok, wait := a.submits.take(a.cfg.ClientKey(r), a.clock.Now()); !ok {
				a.writeError(w, r, tooMany(a.cfg.SubmitRate, wait))
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		serve := func(w http.ResponseWriter, r *http.Request) {
			err := rt.Handle(a, w, r)
			if writes(r) {
				a.ready.noteWrite(err, a.clock.Now())
			}
			if err != nil && !errors.As(err, new(*answeredError)) {
				a.writeError(w, r, err)
			}
		}
		switch {
		case rt.Audit != "" && rt.Stream:
			a.auditedStream(rt, w, r, serve)
		case rt.Audit != "":
			a.audited(rt, w, r, serve)
		default:
			serve(w, r)
		}
	})
}
