package api

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/worker"
)

// The local worker of `stint dev` takes a Protocol as its worker.Server.
var _ worker.Server = (*Protocol)(nil)

// The in-process protocol and the HTTP routes answer a bad or unknown request with the same
// problem, so the agent treats an error alike whether its server is local or remote: 404
// from Lease and Heartbeat makes it register again, other 4xx are not retried.
func TestProtocolErrorsMatchHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	local := NewProtocol(b.eng, nil)
	remote, err := client.New(b.srv.URL)
	require.NoError(t, err)
	ctx := context.Background()
	stale := apitype.Duration(0)
	created := b.createJob(t, `{"command": ["true"]}`)

	tests := []struct {
		name   string
		call   func(srv worker.Server) error
		status int
		fields []string
	}{
		{"lease from an unknown worker", func(srv worker.Server) error {
			_, err := srv.Lease(ctx, "nobody", &apitype.LeaseRequest{Max: 1, Wait: &stale})
			return err
		}, 404, nil},
		{"heartbeat from an unknown worker", func(srv worker.Server) error {
			_, err := srv.Heartbeat(ctx, "nobody", &apitype.HeartbeatRequest{})
			return err
		}, 404, nil},
		{"register with a bad id and capacity", func(srv worker.Server) error {
			_, err := srv.Register(ctx, &apitype.RegisterRequest{ID: "-x", Capacity: apitype.Capacity{Slots: -1}})
			return err
		}, 400, []string{"id", "capacity.slots"}},
		{"lease for too many runs", func(srv worker.Server) error {
			_, err := srv.Lease(ctx, "nobody", &apitype.LeaseRequest{Max: apitype.MaxLeaseBatch + 1})
			return err
		}, 400, []string{"max"}},
		{"log chunk of no stream", func(srv worker.Server) error {
			return srv.AppendLogs(ctx, &apitype.LogChunksRequest{Chunks: []apitype.LogChunk{{RunID: "r", Attempt: 1, Token: "t", Seq: 1, Stream: "stdin"}}})
		}, 400, []string{"chunks[0].stream"}},
		{"log chunk without its lease token", func(srv worker.Server) error {
			return srv.AppendLogs(ctx, &apitype.LogChunksRequest{Chunks: []apitype.LogChunk{{RunID: "r", Attempt: 1, Seq: 1, Stream: "stdout"}}})
		}, 400, []string{"chunks[0].token"}},
		{"log chunk of an attempt not leased", func(srv worker.Server) error {
			return srv.AppendLogs(ctx, &apitype.LogChunksRequest{Chunks: []apitype.LogChunk{{RunID: created.Run.ID, Attempt: 1, Token: "t", Seq: 1, Stream: "stdout"}}})
		}, 409, []string{"chunks[0].token"}},
		{"completion of no status", func(srv worker.Server) error {
			_, err := srv.Complete(ctx, &apitype.CompleteRequest{Completions: []apitype.Completion{{RunID: "r", Token: "t", Status: "done"}}})
			return err
		}, 400, []string{"completions[0].status"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var want, got *apitype.Problem
			require.True(t, errors.As(tt.call(remote), &want), "over HTTP: a problem")
			require.True(t, errors.As(tt.call(local), &got), "in-process: a problem")
			require.Equal(t, tt.status, want.Status)
			require.Equal(t, want, got)
			var fields []string
			for _, f := range got.Errors {
				fields = append(fields, f.Field)
			}
			require.Equal(t, tt.fields, fields)
		})
	}
}

// An in-process caller whose context ended sees its context's error, which the agent
// retries, rather than the 499 problem the HTTP route logs, which it would not.
func TestWireError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		status int // 0: not a problem
	}{
		{"none", nil, 0},
		{"cancelled", fmt.Errorf("complete: %w", context.Canceled), 0},
		{"deadline", fmt.Errorf("log chunks: %w", context.DeadlineExceeded), 0},
		{"unknown worker", workerNotFound("w", fmt.Errorf("lease: %w", engine.ErrUnknownWorker)), 404},
		{"store failure", errors.New("disk on fire"), 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := wireError(tt.err)
			var p *apitype.Problem
			if tt.status == 0 {
				require.Equal(t, tt.err, err)
				return
			}
			require.True(t, errors.As(err, &p))
			require.Equal(t, tt.status, p.Status)
			require.ErrorIs(t, err, tt.err, "the cause is kept for the log")
			require.Equal(t, tt.err.Error(), err.Error())
		})
	}
}
