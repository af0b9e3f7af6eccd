package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/stint-dev/stint/apitype"
)

// pipelineCall sends in (nil: no body) to /v1/pipelines/{name}{suffix} with method, in the
// client's namespace, and decodes the answer into a new T.
func pipelineCall[T any](ctx context.Context, c *Client, what, method, name, suffix string, query url.Values, in any) (*T, error) {
	path, err := pathOf(what, "/v1/pipelines/", name, suffix)
	if err != nil {
		return nil, err
	}
	q := c.jobQuery()
	for k, v := range query {
		if q == nil {
			q = url.Values{}
		}
		q[k] = v
	}
	var out T
	if _, err := c.do(ctx, nil, method, path, q, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutPipeline creates the pipeline name or replaces its definition (PUT
// /v1/pipelines/{name}), creating or updating the jobs of its steps.
func (c *Client) PutPipeline(ctx context.Context, name string, spec *apitype.PipelineSpec) (*apitype.Pipeline, error) {
	return pipelineCall[apitype.Pipeline](ctx, c, "put pipeline", http.MethodPut, name, "", nil, spec)
}

// ApplyPipeline makes the pipeline named spec.Name in namespace ("": the client's) match
// spec (PUT /v1/pipelines/{name}), and reports whether it was created. With dryRun the
// server checks everything and writes nothing: the answer is the pipeline as it would be,
// and created says whether it would be created.
func (c *Client) ApplyPipeline(ctx context.Context, namespace string, spec *apitype.PipelineSpec, dryRun bool) (*apitype.Pipeline, bool, error) {
	path, err := pathOf("apply pipeline", "/v1/pipelines/", spec.Name, "")
	if err != nil {
		return nil, false, err
	}
	q := c.jobQuery()
	if namespace != "" {
		q = url.Values{"namespace": {namespace}}
	}
	if dryRun {
		if q == nil {
			q = url.Values{}
		}
		q.Set("dry_run", "true")
	}
	var out apitype.Pipeline
	status, err := c.do(ctx, nil, http.MethodPut, path, q, spec, &out)
	if err != nil {
		return nil, false, err
	}
	if dryRun {
		return &out, out.ID == "", nil
	}
	return &out, status == http.StatusCreated, nil
}

// GetPipeline returns a pipeline by id or name (GET /v1/pipelines/{name}).
func (c *Client) GetPipeline(ctx context.Context, name string) (*apitype.Pipeline, error) {
	return pipelineCall[apitype.Pipeline](ctx, c, "get pipeline", http.MethodGet, name, "", nil, nil)
}

// ListPipelines lists the pipelines of the client's namespace (GET /v1/pipelines).
func (c *Client) ListPipelines(ctx context.Context) (*apitype.PipelineList, error) {
	var out apitype.PipelineList
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/pipelines", c.jobQuery(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListPipelinesIn lists the pipelines of namespace (GET /v1/pipelines?namespace=); "" is
// the client's namespace.
func (c *Client) ListPipelinesIn(ctx context.Context, namespace string) (*apitype.PipelineList, error) {
	if namespace == "" {
		return c.ListPipelines(ctx)
	}
	var out apitype.PipelineList
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/pipelines", url.Values{"namespace": {namespace}}, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeletePipeline deletes a pipeline and the jobs of its steps, cancelling their active runs
// (DELETE /v1/pipelines/{name}); the runs stay, as history.
func (c *Client) DeletePipeline(ctx context.Context, name string) error {
	_, err := pipelineCall[struct{}](ctx, c, "delete pipeline", http.MethodDelete, name, "", nil, nil)
	return err
}

// TriggerPipeline starts a run of a pipeline now (POST /v1/pipelines/{name}/trigger); args
// (may be nil) reach every step's run, over the pipeline's own.
func (c *Client) TriggerPipeline(ctx context.Context, name string, req *apitype.PipelineTrigger) (*apitype.PipelineRun, error) {
	var in any // a nil *PipelineTrigger would be sent as "null"
	if req != nil {
		in = req
	}
	return pipelineCall[apitype.PipelineRun](ctx, c, "trigger pipeline", http.MethodPost, name, "/trigger", nil, in)
}

// ListPipelineRuns pages a pipeline's runs, newest first (GET /v1/pipelines/{name}/runs);
// limit <= 0 is the server's default.
func (c *Client) ListPipelineRuns(ctx context.Context, name string, limit int, cursor string) (*apitype.PipelineRunList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return pipelineCall[apitype.PipelineRunList](ctx, c, "list pipeline runs", http.MethodGet, name, "/runs", q, nil)
}

// GetPipelineRun returns one run of a pipeline with each step's run and the state of the
// whole (GET /v1/pipelines/{name}/runs/{id}).
func (c *Client) GetPipelineRun(ctx context.Context, name, id string) (*apitype.PipelineRun, error) {
	return pipelineCall[apitype.PipelineRun](ctx, c, "get pipeline run", http.MethodGet, name, "/runs/"+url.PathEscape(id), nil, nil)
}

// CancelPipelineRun cancels the steps of a pipeline run that have not ended (POST
// /v1/pipelines/{name}/runs/{id}/cancel).
func (c *Client) CancelPipelineRun(ctx context.Context, name, id string) (*apitype.PipelineRun, error) {
	return pipelineCall[apitype.PipelineRun](ctx, c, "cancel pipeline run", http.MethodPost, name, "/runs/"+url.PathEscape(id)+"/cancel", nil, nil)
}

// RetryPipelineRun runs steps of an ended pipeline run again with what is downstream of
// them (POST /v1/pipelines/{name}/runs/{id}/retry): from step when given, else from every
// step that failed or was cancelled.
func (c *Client) RetryPipelineRun(ctx context.Context, name, id, from string) (*apitype.PipelineRun, error) {
	return pipelineCall[apitype.PipelineRun](ctx, c, "retry pipeline run", http.MethodPost, name, "/runs/"+url.PathEscape(id)+"/retry",
		nil, &apitype.PipelineRetry{From: from})
}

// WaitPipelineRun asks for a pipeline run every poll interval (see WithPollInterval) until
// done holds for it, and returns that run. It returns early with the error of a failed
// GetPipelineRun, or with ctx's error.
func (c *Client) WaitPipelineRun(ctx context.Context, name, id string, done func(*apitype.PipelineRun) bool) (*apitype.PipelineRun, error) {
	return poll(ctx, c, func(ctx context.Context) (*apitype.PipelineRun, error) { return c.GetPipelineRun(ctx, name, id) }, done)
}

// PipelineFinished reports whether a pipeline run as a whole has ended (every step's run
// is final): a predicate for WaitPipelineRun.
func PipelineFinished(pr *apitype.PipelineRun) bool { return pr.Status != "" && pr.Status != "running" }

// RotatePipelineWebhookSecret gives a pipeline a new webhook secret (POST
// /v1/pipelines/{name}/webhook); the answer is the only place it is shown. A call to its
// path signed with it starts a pipeline run.
func (c *Client) RotatePipelineWebhookSecret(ctx context.Context, name string) (*apitype.WebhookSecret, error) {
	return pipelineCall[apitype.WebhookSecret](ctx, c, "rotate pipeline webhook secret", http.MethodPost, name, "/webhook", nil, nil)
}
