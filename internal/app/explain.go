package app

import (
	"context"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/store/postgres"
)

// QueryPlan is one hot statement of the PostgreSQL store and its plan, as EXPLAIN
// (ANALYZE, BUFFERS) printed it.
type QueryPlan struct {
	Name string `json:"name"`
	Plan string `json:"plan"`
}

// ExplainPlans opens the PostgreSQL store at url and explains its hot statements on the
// data it holds (postgres.Store.ExplainHot): the lease, heartbeat and completion take batch
// runs of queue, in a transaction that is rolled back. For `stint bench plans`.
func ExplainPlans(ctx context.Context, url, queue string, batch int, now time.Time) ([]QueryPlan, error) {
	s, err := postgres.Open(ctx, postgres.Config{URL: url, MaxConns: 1})
	if err != nil {
		return nil, fmt.Errorf("explain plans: %w", err)
	}
	defer s.Close()
	got, err := s.ExplainHot(ctx, &postgres.ExplainParams{Queue: queue, Batch: batch, Now: now})
	if err != nil {
		return nil, err
	}
	out := make([]QueryPlan, len(got))
	for i, e := range got {
		out[i] = QueryPlan{Name: e.Name, Plan: e.Plan}
	}
	return out, nil
}
