package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func TestSubmitDAGCall(t *testing.T) {
	t.Parallel()
	runCalls(t, []callCase{
		{
			name: "submit dag",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.SubmitDAG(ctx, &apitype.DAGRequest{Namespace: "etl", Runs: map[string]apitype.JobSpec{
					"extract": {Command: []string{"./extract"}},
					"load": {Shell: "./load", DependsOn: []apitype.Dependency{
						{Ref: "extract"}, {Run: "r0", Condition: "finished"},
					}},
				}})
			},
			method: http.MethodPost, path: "/v1/dags",
			body: `{"namespace":"etl","runs":{"extract":{"command":["./extract"]},
				"load":{"shell":"./load","depends_on":[{"ref":"extract"},{"run":"r0","condition":"finished"}]}}}`,
			answer: answer{Status: http.StatusCreated, Body: `{"runs":{"extract":"r1","load":"r2"},"jobs":{"extract":"j1","load":"j2"}}`},
			check: func(t *testing.T, got any) {
				resp := got.(*apitype.DAGResponse)
				require.Equal(t, map[string]string{"extract": "r1", "load": "r2"}, resp.Runs)
				require.Equal(t, map[string]string{"extract": "j1", "load": "j2"}, resp.Jobs)
			},
		},
		{
			name: "submit dag with a cycle",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.SubmitDAG(ctx, &apitype.DAGRequest{Runs: map[string]apitype.JobSpec{
					"a": {Handler: "noop", DependsOn: []apitype.Dependency{{Ref: "a"}}},
				}})
			},
			method: http.MethodPost, path: "/v1/dags",
			body: `{"runs":{"a":{"handler":"noop","depends_on":[{"ref":"a"}]}}}`,
			answer: answer{Status: http.StatusBadRequest, ContentType: "application/problem+json",
				Body: `{"title":"Bad Request","status":400,"errors":[{"field":"runs.a.depends_on[0].ref","message":"self-edge"}]}`},
			wantError: "runs.a.depends_on[0].ref",
			check: func(t *testing.T, got any) {
				require.Nil(t, got.(*apitype.DAGResponse))
			},
		},
	})
}

func TestSubmitDAGProblem(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, answer{Status: http.StatusBadRequest, ContentType: "application/problem+json",
		Body: `{"title":"Bad Request","status":400,"errors":[{"field":"runs.load.depends_on[0].ref","message":"cycle: load -> transform -> load"}]}`})
	_, err := newClient(t, f.URL).SubmitDAG(context.Background(), &apitype.DAGRequest{})
	var p *apitype.Problem
	require.True(t, errors.As(err, &p), "err: %v", err)
	require.Equal(t, "runs.load.depends_on[0].ref", p.Errors[0].Field)
	require.Equal(t, "cycle: load -> transform -> load", p.Errors[0].Message)
}

func TestGetAndListDAGsCall(t *testing.T) {
	t.Parallel()
	runCalls(t, []callCase{
		{
			name:   "get dag",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.GetDAG(ctx, "r1") },
			method: http.MethodGet, path: "/v1/dags/r1",
			answer: answer{Status: http.StatusOK, Body: `{"id":"r1","namespace":"default","status":"running","created_at":"2026-05-01T10:00:00Z",
				"entries":[{"name":"a","run":{"id":"r1","status":"succeeded"}},{"name":"b","run":{"id":"r2","status":"running"},"depends_on":[{"ref":"a","condition":"succeeded"}]}]}`},
			check: func(t *testing.T, got any) {
				d := got.(*apitype.DAG)
				require.Equal(t, "running", d.Status)
				require.Len(t, d.Entries, 2)
				require.Equal(t, []apitype.Dependency{{Ref: "a", Condition: "succeeded"}}, d.Entries[1].DependsOn)
			},
		},
		{
			name:   "list dags",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.ListDAGs(ctx, "etl", 2, "0.c") },
			method: http.MethodGet, path: "/v1/dags", query: "cursor=0.c&limit=2&namespace=etl",
			answer: answer{Status: http.StatusOK, Body: `{"items":[{"id":"r1","namespace":"etl","entries":3,"created_at":"2026-05-01T10:00:00Z"}],"next_cursor":"1.c"}`},
			check: func(t *testing.T, got any) {
				l := got.(*apitype.DAGList)
				require.Equal(t, 3, l.Items[0].Entries)
				require.Equal(t, "1.c", l.NextCursor)
			},
		},
	})
}

func TestWaitDAG(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, answer{Body: `{"id":"r1","status":"running","entries":[]}`},
		answer{Body: `{"id":"r1","status":"running","entries":[]}`}, answer{Body: `{"id":"r1","status":"succeeded","entries":[]}`})
	c, err := client.New(f.URL, client.WithPollInterval(time.Millisecond))
	require.NoError(t, err)
	d, err := c.WaitDAG(context.Background(), "r2", client.DAGFinished)
	require.NoError(t, err)
	require.Equal(t, "succeeded", d.Status)
	require.Len(t, f.seen(), 3, "asked until it ended")
	require.Equal(t, "/v1/dags/r2", f.seen()[2].Path)
	require.False(t, client.DAGFinished(&apitype.DAG{Status: "running"}))
	require.True(t, client.DAGFinished(&apitype.DAG{Status: "failed"}))
}
