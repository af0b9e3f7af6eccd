package client_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func TestTokenCalls(t *testing.T) {
	t.Parallel()
	runCalls(t, []callCase{
		{
			name:   "list tokens",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.ListTokens(ctx) },
			method: http.MethodGet, path: "/v1/tokens",
			answer: answer{Body: `{"items":[{"id":"t1","name":"ci","role":"viewer","namespaces":["etl"],"created_at":"2026-01-02T03:04:05Z"}]}`},
			check: func(t *testing.T, got any) {
				tk := got.(*apitype.TokenList).Items[0]
				require.Equal(t, "viewer", tk.Role)
				require.Equal(t, []string{"etl"}, tk.Namespaces)
			},
		},
		{
			name: "create token",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.CreateToken(ctx, &apitype.CreateTokenRequest{Name: "w1", Role: "worker", WorkerID: "w1"})
			},
			method: http.MethodPost, path: "/v1/tokens",
			body:   `{"name":"w1","role":"worker","worker_id":"w1"}`,
			answer: answer{Status: 201, Body: `{"token":"stint_abc","id":"t2","name":"w1","role":"worker","worker_id":"w1","created_at":"2026-01-02T03:04:05Z"}`},
			check: func(t *testing.T, got any) {
				ct := got.(*apitype.CreatedToken)
				require.Equal(t, "stint_abc", ct.Secret)
				require.Equal(t, "t2", ct.ID)
				require.Equal(t, "w1", ct.WorkerID)
			},
		},
		{
			name:   "revoke token",
			call:   func(ctx context.Context, c *client.Client) (any, error) { return c.RevokeToken(ctx, "t2") },
			method: http.MethodPost, path: "/v1/tokens/t2/revoke",
			answer: answer{Body: `{"id":"t2","name":"w1","role":"worker","created_at":"2026-01-02T03:04:05Z","revoked_at":"2026-01-03T00:00:00Z"}`},
			check:  func(t *testing.T, got any) { require.NotNil(t, got.(*apitype.Token).RevokedAt) },
		},
	})
}
