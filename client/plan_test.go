package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func TestPlanCall(t *testing.T) {
	t.Parallel()
	runCalls(t, []callCase{
		{
			name: "plan",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Plan(ctx, &apitype.JobSpec{Name: "train", Command: []string{"python3", "train.py"},
					Requirements: &apitype.Requirements{GPU: 4}})
			},
			method: http.MethodPost, path: "/v1/plan",
			body: `{"name":"train","command":["python3","train.py"],"requirements":{"gpu":4}}`,
			answer: answer{Body: `{"placement":{"constrained":true,"workers":3,"fits":[],"code":"no_worker_fits",
				"reason":"no worker fits: 3 registered, 3 lack gpu >= 4","never":{"gpu >= 4":3}},
				"due_at":"2030-01-02T12:00:00Z","enabled":true,
				"held_by":[{"code":"no_worker_fits","reason":"no worker fits: 3 registered, 3 lack gpu >= 4"}]}`},
			check: func(t *testing.T, got any) {
				p := got.(*apitype.PlanResponse)
				require.Equal(t, "no_worker_fits", p.Placement.Code)
				require.Equal(t, map[string]int{"gpu >= 4": 3}, p.Placement.Never)
				require.Len(t, p.HeldBy, 1)
				require.NotNil(t, p.DueAt)
			},
		},
		{
			name: "plan of a bad spec",
			call: func(ctx context.Context, c *client.Client) (any, error) {
				return c.Plan(ctx, &apitype.JobSpec{Shell: "true", Priority: ptr(5000)})
			},
			method: http.MethodPost, path: "/v1/plan",
			body: `{"shell":"true","priority":5000}`,
			answer: answer{Status: http.StatusBadRequest, ContentType: "application/problem+json",
				Body: `{"title":"Bad Request","status":400,"errors":[{"field":"priority","message":"must be between -1000 and 1000"}]}`},
			wantError: "priority",
			check: func(t *testing.T, got any) {
				require.Nil(t, got.(*apitype.PlanResponse))
			},
		},
	})
}

func TestPlanProblem(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, answer{Status: http.StatusBadRequest, ContentType: "application/problem+json",
		Body: `{"title":"Bad Request","status":400,"errors":[{"field":"command","message":"one of command, shell or handler is required"}]}`})
	_, err := newClient(t, f.URL).Plan(context.Background(), &apitype.JobSpec{})
	var p *apitype.Problem
	require.True(t, errors.As(err, &p), "err: %v", err)
	require.Equal(t, "command", p.Errors[0].Field)
}
