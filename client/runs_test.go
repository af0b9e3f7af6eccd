package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func TestRunCalls(t *testing.T) {
	t.Parallel()
	runCalls(t, []callCase{
		{
			name:   "get run",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.GetRun(ctx, "r1") },
			method: http.MethodGet, path: "/v1/runs/r1",
			answer: answer{Body: `{"id":"r1","status":"failed","attempt":2,"attempts":[
				{"n":1,"worker_id":"w1","status":"failed","exit_code":3,"started_at":"2030-01-01T00:00:00Z"},
				{"n":2,"worker_id":"w2","status":"timed_out","started_at":"2030-01-01T00:01:00Z"}]}`},
			check: func(t *testing.T, got any) {
				r := got.(*apitype.Run)
				require.Len(t, r.Attempts, 2)
				require.Equal(t, 3, *r.Attempts[0].ExitCode)
				require.Nil(t, r.Attempts[1].ExitCode)
			},
		},
		{
			name: "list runs",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.ListRuns(ctx, client.ListRunsOptions{Job: "backup", Status: "failed", Queue: "io", Worker: "w1", Limit: 5, Cursor: "x"})
			},
			method: http.MethodGet, path: "/v1/runs", query: "job=backup&status=failed&queue=io&worker=w1&limit=5&cursor=x",
			answer: answer{Body: `{"items":[{"id":"r2"},{"id":"r1"}],"next_cursor":"y"}`},
			check: func(t *testing.T, got any) {
				l := got.(*apitype.RunList)
				require.Len(t, l.Items, 2)
				require.Equal(t, "y", l.NextCursor)
			},
		},
		{
			name: "list runs of a namespace",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.ListRuns(ctx, client.ListRunsOptions{Namespace: "etl"})
			},
			method: http.MethodGet, path: "/v1/runs", query: "namespace=etl",
			answer: answer{Body: `{"items":[]}`},
		},
		{
			name:   "cancel run",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.CancelRun(ctx, "r1") },
			method: http.MethodPost, path: "/v1/runs/r1/cancel",
			answer: answer{Body: `{"run":{"id":"r1","status":"running","cancel_requested":true}}`},
			check:  func(t *testing.T, got any) { require.True(t, got.(*apitype.Run).CancelRequested) },
		},
		{
			name:   "cancel final run",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.CancelRun(ctx, "r1") },
			method: http.MethodPost, path: "/v1/runs/r1/cancel",
			answer:    answer{Status: http.StatusConflict, ContentType: "application/problem+json", Body: `{"title":"run is final","status":409}`},
			wantError: "run is final",
			check:     func(t *testing.T, got any) { require.Nil(t, got.(*apitype.Run)) },
		},
		{
			name:   "retry run",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.RetryRun(ctx, "r1") },
			method: http.MethodPost, path: "/v1/runs/r1/retry",
			answer: answer{Body: `{"run":{"id":"r1","status":"queued","attempt":2}}`},
			check:  func(t *testing.T, got any) { require.Equal(t, 2, got.(*apitype.Run).Attempt) },
		},
		{
			name: "logs of an attempt, followed",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				rc, err := c.Logs(ctx, "r1", client.LogsOptions{Attempt: 2, Follow: true, Stream: "stderr"})
				if err != nil {
					return nil, err
				}
				defer rc.Close()
				b, err := io.ReadAll(rc)
				return string(b), err
			},
			method: http.MethodGet, path: "/v1/runs/r1/logs", query: "attempt=2&follow=true&stream=stderr",
			answer: answer{ContentType: "text/plain; charset=utf-8", Body: "hello\nworld\n"},
			check:  func(t *testing.T, got any) { require.Equal(t, "hello\nworld\n", got) },
		},
		{
			name: "logs: the last lines, stamped",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				rc, err := c.Logs(ctx, "r1", client.LogsOptions{Tail: new(0), Timestamps: true, Follow: true})
				if err != nil {
					return nil, err
				}
				defer rc.Close()
				b, err := io.ReadAll(rc)
				return string(b), err
			},
			method: http.MethodGet, path: "/v1/runs/r1/logs", query: "follow=true&tail=0&timestamps=true",
			answer: answer{ContentType: "text/plain; charset=utf-8", Body: "2030-01-02T12:00:00.000000000Z x\n"},
			check:  func(t *testing.T, got any) { require.Equal(t, "2030-01-02T12:00:00.000000000Z x\n", got) },
		},
		{
			name: "logs of a missing run",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Logs(ctx, "nope", client.LogsOptions{})
			},
			method: http.MethodGet, path: "/v1/runs/nope/logs",
			answer:    answer{Status: 404, ContentType: "application/problem+json", Body: `{"title":"run not found","status":404}`},
			wantError: "run not found",
		},
	})
}

func TestLogsStream(t *testing.T) {
	t.Parallel()
	// The server writes a line, then waits for the client to have read it before it writes
	// the next: the client must hand out data as it comes, not at the end.
	read := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		for i := range 3 {
			_, _ = fmt.Fprintf(w, "line %d\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-read:
			case <-r.Context().Done():
				return
			}
		}
	}))
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := newClient(t, srv.URL, client.WithHTTPClient(&http.Client{Timeout: time.Millisecond})).
		Logs(ctx, "r1", client.LogsOptions{Follow: true})
	require.NoError(t, err)
	defer rc.Close()
	buf := make([]byte, 64)
	for i := range 3 {
		n, err := rc.Read(buf)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("line %d\n", i), string(buf[:n]))
		read <- struct{}{}
	}
	_, err = rc.Read(buf)
	require.ErrorIs(t, err, io.EOF)
}

func TestWaitRun(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t,
		answer{Body: `{"id":"r1","status":"queued"}`},
		answer{Body: `{"id":"r1","status":"running"}`},
		answer{Body: `{"id":"r1","status":"succeeded"}`},
	)
	c := newClient(t, f.URL, client.WithPollInterval(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	run, err := c.WaitRun(ctx, "r1", client.Finished)
	require.NoError(t, err)
	require.Equal(t, "succeeded", run.Status)
	require.Len(t, f.seen(), 3)
}

func TestWaitRunErrors(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t,
		answer{Body: `{"id":"r1","status":"queued"}`},
		answer{Status: 404, ContentType: "application/problem+json", Body: `{"title":"run not found","status":404}`},
	)
	c := newClient(t, f.URL, client.WithPollInterval(time.Millisecond))
	_, err := c.WaitRun(context.Background(), "r1", client.Finished)
	require.True(t, client.IsNotFound(err))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.WaitRun(ctx, "r1", client.Finished)
	require.ErrorIs(t, err, context.Canceled)
}

func TestFinished(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]bool{
		"waiting": false, "scheduled": false, "queued": false, "running": false,
		"succeeded": true, "failed": true, "cancelled": true, "skipped": true,
	} {
		require.Equal(t, want, client.Finished(&apitype.Run{Status: status}), status)
	}
}
