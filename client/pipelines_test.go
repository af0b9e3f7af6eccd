package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

const pipelineAnswer = `{"id":"p1","namespace":"default","name":"etl","enabled":true,
	"steps":[{"name":"extract","job_id":"j1","job_name":"etl.extract"},
		{"name":"load","job_id":"j2","job_name":"etl.load","depends_on":[{"ref":"extract","condition":"succeeded"}]}],
	"created_at":"2030-01-02T03:04:05Z","updated_at":"2030-01-02T03:04:05Z"}`

const pipelineRunAnswer = `{"id":"pr1","pipeline_id":"p1","pipeline_name":"etl","namespace":"default","status":"running",
	"trigger":"manual","scheduled_for":"2030-01-02T03:04:05Z","created_at":"2030-01-02T03:04:05Z",
	"steps":{"extract":{"id":"r1","status":"queued"},"load":{"id":"r2","status":"waiting"}}}`

func TestPipelineCalls(t *testing.T) {
	t.Parallel()
	spec := &apitype.PipelineSpec{
		Name:     "etl",
		Schedule: &apitype.Schedule{Cron: "0 2 * * *"},
		Args:     json.RawMessage(`{"day":"mon"}`),
		Steps: map[string]apitype.JobSpec{
			"extract": {Command: []string{"./extract"}},
			"load":    {Shell: "./load", DependsOn: []apitype.Dependency{{Ref: "extract"}}},
		},
	}
	specBody := `{"name":"etl","schedule":{"cron":"0 2 * * *"},"args":{"day":"mon"},"steps":{
		"extract":{"command":["./extract"]},"load":{"shell":"./load","depends_on":[{"ref":"extract"}]}}}`
	type applied struct {
		pl      *apitype.Pipeline
		created bool
	}
	checkRun := func(t *testing.T, got any) {
		pr := got.(*apitype.PipelineRun)
		require.Equal(t, "pr1", pr.ID)
		require.Equal(t, "running", pr.Status)
		require.Equal(t, "r2", pr.Steps["load"].ID)
	}
	runCalls(t, []callCase{
		{
			name:   "put pipeline",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.PutPipeline(ctx, "etl", spec) },
			method: http.MethodPut, path: "/v1/pipelines/etl", body: specBody,
			answer: answer{Status: http.StatusCreated, Body: pipelineAnswer},
			check: func(t *testing.T, got any) {
				pl := got.(*apitype.Pipeline)
				require.Equal(t, "p1", pl.ID)
				require.Equal(t, "etl.load", pl.Steps[1].JobName)
				require.Equal(t, []apitype.Dependency{{Ref: "extract", Condition: "succeeded"}}, pl.Steps[1].DependsOn)
			},
		},
		{
			name: "apply pipeline: created",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				pl, created, err := c.ApplyPipeline(ctx, "etl-ns", spec, false)
				return applied{pl, created}, err
			},
			method: http.MethodPut, path: "/v1/pipelines/etl", query: "namespace=etl-ns", body: specBody,
			answer: answer{Status: http.StatusCreated, Body: pipelineAnswer},
			check:  func(t *testing.T, got any) { require.True(t, got.(applied).created) },
		},
		{
			name: "apply pipeline: replaced",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				pl, created, err := c.ApplyPipeline(ctx, "", spec, false)
				return applied{pl, created}, err
			},
			method: http.MethodPut, path: "/v1/pipelines/etl", body: specBody,
			answer: answer{Status: http.StatusOK, Body: pipelineAnswer},
			check:  func(t *testing.T, got any) { require.False(t, got.(applied).created) },
		},
		{
			name: "apply pipeline: dry run of a new one",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				pl, created, err := c.ApplyPipeline(ctx, "", spec, true)
				return applied{pl, created}, err
			},
			method: http.MethodPut, path: "/v1/pipelines/etl", query: "dry_run=true", body: specBody,
			answer: answer{Status: http.StatusOK, Body: `{"id":"","name":"etl","steps":[]}`},
			check:  func(t *testing.T, got any) { require.True(t, got.(applied).created) },
		},
		{
			name:   "get pipeline",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.GetPipeline(ctx, "etl") },
			method: http.MethodGet, path: "/v1/pipelines/etl",
			answer: answer{Body: pipelineAnswer},
			check:  func(t *testing.T, got any) { require.Len(t, got.(*apitype.Pipeline).Steps, 2) },
		},
		{
			name:   "list pipelines",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.ListPipelines(ctx) },
			method: http.MethodGet, path: "/v1/pipelines",
			answer: answer{Body: `{"items":[` + pipelineAnswer + `]}`},
			check:  func(t *testing.T, got any) { require.Len(t, got.(*apitype.PipelineList).Items, 1) },
		},
		{
			name:   "list pipelines in a namespace",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.ListPipelinesIn(ctx, "ml") },
			method: http.MethodGet, path: "/v1/pipelines", query: "namespace=ml",
			answer: answer{Body: `{"items":[]}`},
		},
		{
			name:   "delete pipeline",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return nil, c.DeletePipeline(ctx, "etl") },
			method: http.MethodDelete, path: "/v1/pipelines/etl",
			answer: answer{Status: http.StatusNoContent},
		},
		{
			name: "trigger pipeline with args",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.TriggerPipeline(ctx, "etl", &apitype.PipelineTrigger{Args: json.RawMessage(`{"day":"tue"}`)})
			},
			method: http.MethodPost, path: "/v1/pipelines/etl/trigger", body: `{"args":{"day":"tue"}}`,
			answer: answer{Status: http.StatusCreated, Body: pipelineRunAnswer},
			check:  checkRun,
		},
		{
			name:   "trigger pipeline without a body",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.TriggerPipeline(ctx, "etl", nil) },
			method: http.MethodPost, path: "/v1/pipelines/etl/trigger",
			answer: answer{Status: http.StatusCreated, Body: pipelineRunAnswer},
			check:  checkRun,
		},
		{
			name: "list pipeline runs",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.ListPipelineRuns(ctx, "etl", 2, "c1")
			},
			method: http.MethodGet, path: "/v1/pipelines/etl/runs", query: "limit=2&cursor=c1",
			answer: answer{Body: `{"items":[` + pipelineRunAnswer + `],"next_cursor":"c2"}`},
			check: func(t *testing.T, got any) {
				list := got.(*apitype.PipelineRunList)
				require.Len(t, list.Items, 1)
				require.Equal(t, "c2", list.NextCursor)
			},
		},
		{
			name:   "get pipeline run",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.GetPipelineRun(ctx, "etl", "pr1") },
			method: http.MethodGet, path: "/v1/pipelines/etl/runs/pr1",
			answer: answer{Body: pipelineRunAnswer},
			check:  checkRun,
		},
		{
			name: "cancel pipeline run",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.CancelPipelineRun(ctx, "etl", "pr1")
			},
			method: http.MethodPost, path: "/v1/pipelines/etl/runs/pr1/cancel",
			answer: answer{Body: pipelineRunAnswer},
			check:  checkRun,
		},
		{
			name: "retry pipeline run from a step",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.RetryPipelineRun(ctx, "etl", "pr1", "load")
			},
			method: http.MethodPost, path: "/v1/pipelines/etl/runs/pr1/retry", body: `{"from":"load"}`,
			answer: answer{Body: pipelineRunAnswer},
			check:  checkRun,
		},
		{
			name: "retry pipeline run, nothing to retry",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.RetryPipelineRun(ctx, "etl", "pr1", "")
			},
			method: http.MethodPost, path: "/v1/pipelines/etl/runs/pr1/retry", body: `{}`,
			answer: answer{Status: http.StatusConflict, ContentType: "application/problem+json",
				Body: `{"title":"Conflict","status":409,"detail":"pipeline run pr1: nothing to retry"}`},
			wantError: "nothing to retry",
		},
	})
}

func TestPipelineProblem(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, answer{Status: http.StatusBadRequest, ContentType: "application/problem+json",
		Body: `{"title":"Bad Request","status":400,"errors":[{"field":"steps.load.depends_on[0].ref","message":"cycle: load -> transform -> load"}]}`})
	_, err := newClient(t, f.URL).PutPipeline(context.Background(), "etl", &apitype.PipelineSpec{})
	var p *apitype.Problem
	require.True(t, errors.As(err, &p), "err: %v", err)
	require.Equal(t, "steps.load.depends_on[0].ref", p.Errors[0].Field)

	_, err = newClient(t, f.URL).GetPipeline(context.Background(), "")
	require.ErrorContains(t, err, "empty id")
}

func TestWaitPipelineRun(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, answer{Body: `{"id":"pr1","status":"running","steps":{}}`}, answer{Body: `{"id":"pr1","status":"failed","steps":{}}`})
	c, err := client.New(f.URL, client.WithPollInterval(time.Millisecond))
	require.NoError(t, err)
	pr, err := c.WaitPipelineRun(context.Background(), "etl", "pr1", client.PipelineFinished)
	require.NoError(t, err)
	require.Equal(t, "failed", pr.Status)
	require.Len(t, f.seen(), 2, "asked until it ended")
	require.Equal(t, "/v1/pipelines/etl/runs/pr1", f.seen()[1].Path)
	require.False(t, client.PipelineFinished(&apitype.PipelineRun{Status: "running"}))
}
