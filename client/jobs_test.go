package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// created is what CreateJob returns, for checks.
type created struct {
	resp    *apitype.CreateJobResponse
	created bool
}

func TestJobCalls(t *testing.T) {
	t.Parallel()
	runAt := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	timeout := apitype.Duration(90 * time.Second)
	runCalls(t, []callCase{
		{
			name: "create job",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				resp, ok, err := c.CreateJob(ctx, &apitype.JobSpec{
					Name: "backup", Command: []string{"tar", "c", "/data"}, Args: json.RawMessage(`{"k":"v"}`),
					Queue: "io", Priority: ptr(3), Timeout: &timeout, RunAt: &runAt,
					Retry:        &apitype.RetryPolicy{MaxAttempts: 3},
					Requirements: &apitype.Requirements{CPU: 0.5, MemoryMB: 256},
				})
				return created{resp, ok}, err
			},
			method: http.MethodPost, path: "/v1/jobs",
			body: `{"name":"backup","command":["tar","c","/data"],"args":{"k":"v"},"queue":"io","priority":3,
				"timeout":"1m30s","run_at":"2030-01-02T03:04:05Z","retry":{"max_attempts":3},
				"requirements":{"cpu":0.5,"memory_mb":256}}`,
			answer: answer{Status: http.StatusCreated, Body: `{"job":{"id":"j1","name":"backup"},"run":{"id":"r1","status":"scheduled"}}`},
			check: func(t *testing.T, got any) {
				c := got.(created)
				require.True(t, c.created)
				require.Equal(t, "j1", c.resp.Job.ID)
				require.Equal(t, "scheduled", c.resp.Run.Status)
			},
		},
		{
			name: "create job again with the same idempotency key",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				resp, ok, err := c.CreateJob(ctx, &apitype.JobSpec{Shell: "echo hi", IdempotencyKey: "k1"})
				return created{resp, ok}, err
			},
			method: http.MethodPost, path: "/v1/jobs",
			body:   `{"shell":"echo hi","idempotency_key":"k1"}`,
			answer: answer{Status: http.StatusOK, Body: `{"job":{"id":"j1"},"run":null}`},
			check: func(t *testing.T, got any) {
				c := got.(created)
				require.False(t, c.created)
				require.Nil(t, c.resp.Run)
			},
		},
		{
			name: "create job refused",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				resp, ok, err := c.CreateJob(ctx, &apitype.JobSpec{})
				return created{resp, ok}, err
			},
			method: http.MethodPost, path: "/v1/jobs", body: `{}`,
			answer:    answer{Status: 400, ContentType: "application/problem+json", Body: `{"title":"invalid job","status":400}`},
			wantError: "invalid job",
			check: func(t *testing.T, got any) {
				require.Nil(t, got.(created).resp)
			},
		},
		{
			name: "create jobs",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.CreateJobs(ctx, &apitype.BatchCreateJobsRequest{Jobs: []apitype.JobSpec{{Shell: "a"}, {Handler: "email"}}})
			},
			method: http.MethodPost, path: "/v1/jobs/batch",
			body:   `{"jobs":[{"shell":"a"},{"handler":"email"}]}`,
			answer: answer{Status: http.StatusCreated, Body: `{"items":[{"job":{"id":"j1"},"run":{"id":"r1"}},{"job":{"id":"j2"},"run":{"id":"r2"}}]}`},
			check: func(t *testing.T, got any) {
				items := got.(*apitype.BatchCreateJobsResponse).Items
				require.Len(t, items, 2)
				require.Equal(t, "r2", items[1].Run.ID)
			},
		},
		{
			name:   "get job by name with a slash",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.GetJob(ctx, "team/backup") },
			method: http.MethodGet, path: "/v1/jobs/team%2Fbackup",
			answer: answer{Body: `{"id":"j1","name":"team/backup","next_fire_times":["2030-01-01T00:00:00Z"],"last_run":{"id":"r9","status":"failed"}}`},
			check: func(t *testing.T, got any) {
				j := got.(*apitype.Job)
				require.Equal(t, "team/backup", j.Name)
				require.Equal(t, "failed", j.LastRun.Status)
				require.Len(t, j.NextFireTimes, 1)
			},
		},
		{
			name: "list jobs",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.ListJobs(ctx, client.ListJobsOptions{Queue: "io", Enabled: ptr(false), Limit: 10, Cursor: "c1"})
			},
			method: http.MethodGet, path: "/v1/jobs", query: "queue=io&enabled=false&limit=10&cursor=c1",
			answer: answer{Body: `{"items":[{"id":"j1"}],"next_cursor":"c2"}`},
			check: func(t *testing.T, got any) {
				l := got.(*apitype.JobList)
				require.Len(t, l.Items, 1)
				require.Equal(t, "c2", l.NextCursor)
			},
		},
		{
			name: "list jobs without filters",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.ListJobs(ctx, client.ListJobsOptions{})
			},
			method: http.MethodGet, path: "/v1/jobs",
			answer: answer{Body: `{"items":[]}`},
		},
		{
			name: "update job",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.UpdateJob(ctx, "backup", &apitype.JobPatch{Enabled: ptr(false), Schedule: &apitype.Schedule{Cron: "0 * * * *"}})
			},
			method: http.MethodPatch, path: "/v1/jobs/backup",
			body:   `{"enabled":false,"schedule":{"cron":"0 * * * *"}}`,
			answer: answer{Body: `{"id":"j1","enabled":false}`},
			check:  func(t *testing.T, got any) { require.Equal(t, "j1", got.(*apitype.Job).ID) },
		},
		{
			name:   "delete job",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.DeleteJob(ctx, "backup") },
			method: http.MethodDelete, path: "/v1/jobs/backup",
			answer: answer{Body: `{"items":[{"id":"r1","status":"cancelled"}]}`},
			check: func(t *testing.T, got any) {
				require.Len(t, got.(*apitype.CancelResponse).Items, 1)
			},
		},
		{
			name:   "delete job answered with no body",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.DeleteJob(ctx, "backup") },
			method: http.MethodDelete, path: "/v1/jobs/backup",
			answer: answer{Status: http.StatusNoContent},
			check: func(t *testing.T, got any) {
				require.Empty(t, got.(*apitype.CancelResponse).Items)
			},
		},
		{
			name: "trigger job with args",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.TriggerJob(ctx, "backup", &apitype.TriggerRequest{Args: json.RawMessage(`{"full":true}`)})
			},
			method: http.MethodPost, path: "/v1/jobs/backup/trigger",
			body:   `{"args":{"full":true}}`,
			answer: answer{Status: http.StatusCreated, Body: `{"run":{"id":"r2","trigger":"manual"}}`},
			check:  func(t *testing.T, got any) { require.Equal(t, "manual", got.(*apitype.Run).Trigger) },
		},
		{
			name:   "trigger job without a body",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.TriggerJob(ctx, "backup", nil) },
			method: http.MethodPost, path: "/v1/jobs/backup/trigger",
			answer: answer{Status: http.StatusCreated, Body: `{"run":{"id":"r2"}}`},
		},
		{
			name:   "cancel job",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.CancelJob(ctx, "backup") },
			method: http.MethodPost, path: "/v1/jobs/backup/cancel",
			answer: answer{Body: `{"items":[{"id":"r1","status":"cancelled"},{"id":"r2","status":"running","cancel_requested":true}]}`},
			check: func(t *testing.T, got any) {
				items := got.(*apitype.CancelResponse).Items
				require.Len(t, items, 2)
				require.True(t, items[1].CancelRequested)
			},
		},
	})
}
