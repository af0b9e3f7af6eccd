package client_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func TestWorkerCalls(t *testing.T) {
	t.Parallel()
	wait := apitype.Duration(30 * time.Second)
	runCalls(t, []callCase{
		{
			name:   "list workers",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.ListWorkers(ctx) },
			method: http.MethodGet, path: "/v1/workers",
			answer: answer{Body: `{"items":[{"id":"w1","state":"active","capacity":{"cpu":4,"memory_mb":8192,"gpu":0,"slots":8}}]}`},
			check: func(t *testing.T, got any) {
				l := got.(*apitype.WorkerList)
				require.Equal(t, 8, l.Items[0].Capacity.Slots)
			},
		},
		{
			name:   "get worker",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.GetWorker(ctx, "host-1") },
			method: http.MethodGet, path: "/v1/workers/host-1",
			answer: answer{Body: `{"id":"host-1","state":"draining"}`},
			check:  func(t *testing.T, got any) { require.Equal(t, "draining", got.(*apitype.Worker).State) },
		},
		{
			name:   "drain worker",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.DrainWorker(ctx, "host-1") },
			method: http.MethodPost, path: "/v1/workers/host-1/drain",
			answer: answer{Body: `{"id":"host-1","state":"draining"}`},
			check:  func(t *testing.T, got any) { require.Equal(t, "draining", got.(*apitype.Worker).State) },
		},
		{
			name: "register",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Register(ctx, &apitype.RegisterRequest{ID: "w1", Capacity: apitype.Capacity{CPU: 2, Slots: 4}, Commands: true, Handlers: []string{"email"}})
			},
			method: http.MethodPost, path: "/v1/workers/register",
			body:   `{"id":"w1","capacity":{"cpu":2,"memory_mb":0,"gpu":0,"slots":4},"handlers":["email"],"commands":true}`,
			answer: answer{Body: `{"worker":{"id":"w1"},"session":"s1","heartbeat_interval":"5s","lease_ttl":"30s"}`},
			check: func(t *testing.T, got any) {
				r := got.(*apitype.RegisterResponse)
				require.Equal(t, "s1", r.Session)
				require.Equal(t, 5*time.Second, r.HeartbeatInterval.Std())
			},
		},
		{
			name: "lease",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Lease(ctx, "w1", &apitype.LeaseRequest{Max: 2, Wait: &wait})
			},
			method: http.MethodPost, path: "/v1/workers/w1/lease",
			body:   `{"max":2,"wait":"30s"}`,
			answer: answer{Body: `{"leases":[{"run_id":"r1","attempt":1,"token":"t1","expires_at":"2030-01-01T00:00:00Z","shell":"echo hi"}],"cancel":["r0"]}`},
			check: func(t *testing.T, got any) {
				l := got.(*apitype.LeaseResponse)
				require.Equal(t, "t1", l.Leases[0].Token)
				require.Equal(t, []string{"r0"}, l.Cancel)
			},
		},
		{
			name: "heartbeat",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Heartbeat(ctx, "w1", &apitype.HeartbeatRequest{Held: []apitype.LeaseRef{{RunID: "r1", Token: "t1"}}})
			},
			method: http.MethodPost, path: "/v1/workers/w1/heartbeat",
			body:   `{"held":[{"run_id":"r1","token":"t1"}]}`,
			answer: answer{Body: `{"lost":["r7"],"drain":true}`},
			check: func(t *testing.T, got any) {
				h := got.(*apitype.HeartbeatResponse)
				require.Equal(t, []string{"r7"}, h.Lost)
				require.True(t, h.Drain)
			},
		},
		{
			name: "append logs",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return nil, c.AppendLogs(ctx, &apitype.LogChunksRequest{Chunks: []apitype.LogChunk{{RunID: "r1", Attempt: 1, Token: "t1", Seq: 1, Stream: "stdout", Data: "hi\n"}}})
			},
			method: http.MethodPost, path: "/v1/attempts/logs",
			body:   `{"chunks":[{"run_id":"r1","attempt":1,"token":"t1","seq":1,"stream":"stdout","data":"hi\n"}]}`,
			answer: answer{Status: http.StatusNoContent},
		},
		{
			name: "complete",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Complete(ctx, &apitype.CompleteRequest{Completions: []apitype.Completion{{RunID: "r1", Token: "t1", Status: "failed", ExitCode: ptr(2)}}})
			},
			method: http.MethodPost, path: "/v1/attempts/complete",
			body:   `{"completions":[{"run_id":"r1","token":"t1","status":"failed","exit_code":2}]}`,
			answer: answer{Body: `{"results":[{"run_id":"r1","accepted":false,"error":"stale lease"}]}`},
			check: func(t *testing.T, got any) {
				r := got.(*apitype.CompleteResponse)
				require.False(t, r.Results[0].Accepted)
			},
		},
	})
}
