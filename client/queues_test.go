package client_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func TestQueueCalls(t *testing.T) {
	t.Parallel()
	runCalls(t, []callCase{
		{
			name:   "list queues",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.ListQueues(ctx) },
			method: http.MethodGet, path: "/v1/queues",
			answer: answer{Body: `{"items":[{"name":"default","priority":0,"max_concurrency":0,"paused":false,"depth":{"queued":3}}]}`},
			check: func(t *testing.T, got any) {
				require.Equal(t, 3, got.(*apitype.QueueList).Items[0].Depth["queued"])
			},
		},
		{
			name:   "get queue",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.GetQueue(ctx, "io") },
			method: http.MethodGet, path: "/v1/queues/io",
			answer: answer{Body: `{"name":"io","max_concurrency":4,"depth":{"running":4}}`},
			check:  func(t *testing.T, got any) { require.Equal(t, 4, got.(*apitype.Queue).MaxConcurrency) },
		},
		{
			name: "update queue",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.UpdateQueue(ctx, "io", &apitype.QueuePatch{Paused: ptr(true), MaxConcurrency: ptr(0)})
			},
			method: http.MethodPatch, path: "/v1/queues/io",
			body:   `{"paused":true,"max_concurrency":0}`,
			answer: answer{Body: `{"name":"io","paused":true}`},
			check:  func(t *testing.T, got any) { require.True(t, got.(*apitype.Queue).Paused) },
		},
	})
}
