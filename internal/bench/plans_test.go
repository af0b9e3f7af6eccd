package bench

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// A plan as PostgreSQL 15 prints it (trimmed from a `stint bench plans` run).
const samplePlan = `Update on runs r  (cost=1805.24..1832.47 rows=2 width=250) (actual time=15.058..34.746 rows=500 loops=1)
  CTE picked
    ->  Limit  (cost=1.68..1804.77 rows=477 width=55) (actual time=0.385..4.122 rows=500 loops=1)
          InitPlan 1 (returns $0)
            ->  Seq Scan on queues q  (cost=0.00..1.26 rows=1 width=0) (actual time=0.008..0.009 rows=0 loops=1)
                  Filter: (paused AND (name = $1))
          ->  Index Scan using runs_queued on runs r_1  (cost=0.42..17959.12 rows=4773 width=106) (actual time=0.366..3.473 rows=500 loops=1)
                Index Cond: (queue = $1)
                Rows Removed by Filter: 7
        ->  Index Scan using runs_pkey on runs r  (cost=0.43..8.45 rows=1 width=33) (actual time=0.003..0.003 rows=1 loops=500)
  ->  Index Only Scan Backward using runs_queued on runs runs_1  (cost=0.28..8.30 rows=1 width=8) (actual time=0.736..5.908 rows=40 loops=2)
  ->  Bitmap Index Scan on jobs_pkey  (cost=0.00..4.30 rows=1 width=0) (actual time=0.010..0.010 rows=1 loops=3)
  ->  Index Scan using runs_job on runs r  (never executed)
  ->  Index Scan using runs_pkey on runs r_2  (cost=0.43..8.45 rows=1 width=33) (actual time=0.003..0.003 rows=1 loops=20)
        Filter: (status = 'running'::text)
        Rows Removed by Filter: 2
  ->  Sort  (cost=1.1..1.2 rows=1 width=1) (actual time=0.003..0.003 rows=1 loops=1)
        Rows Removed by Filter: 1000
Planning Time: 2.730 ms
Execution Time: 34.912 ms`

func TestPlanParsing(t *testing.T) {
	t.Parallel()
	ms, ok := executionTime(samplePlan)
	require.True(t, ok)
	require.InDelta(t, 34.912, ms, 1e-9)
	_, ok = executionTime("Seq Scan on runs")
	require.False(t, ok)
	// Rows, and rows removed by a scan's filter, are summed over loops and over the nodes
	// that use one index; a node never executed reads nothing; rows another node removes
	// are not the scan's.
	require.Equal(t, "Seq Scan on queues (0 rows), runs_queued (500 rows, 7 more removed by its filter), "+
		"runs_pkey (520 rows, 40 more removed by its filter), runs_queued (index only) (80 rows), jobs_pkey (3 rows)",
		planReads(samplePlan))
}

// TestPlansWorkload explains the hot statements on a small seeded store and checks that
// every statement was explained and that nothing of the explaining stayed: the bench's
// queue still holds every run it inserted, queued.
func TestPlansWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	base := os.Getenv("STINT_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("STINT_TEST_DATABASE_URL not set")
	}
	_, err := Run(context.Background(), "plans", Config{Store: "sqlite", N: 10})
	require.ErrorContains(t, err, "postgres")

	const n = 300
	res, err := Run(context.Background(), "plans", Config{Store: base, N: n, SeedFinished: 2000, BatchSize: 100,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	plans := map[string]Plan{}
	for _, p := range res.Plans {
		plans[p.Name] = p
	}
	require.Len(t, plans, len(res.Plans), "names are unique")
	require.GreaterOrEqual(t, len(plans), 30)
	for _, p := range res.Plans {
		require.NotEmpty(t, p.Reads, "%s reads some table:\n%s", p.Name, p.Plan)
	}
	// Statements whose plans do not depend on statistics (the store's TestPlansFresh).
	for name, index := range map[string]string{
		"lease, nothing to place (one statement)": "runs_queued",
		"complete (successes, one statement)":     "runs_pkey",
		"get a run with its attempts":             "runs_pkey",
	} {
		require.Contains(t, plans, name)
		require.Contains(t, plans[name].Reads, index, "%s:\n%s", name, plans[name].Plan)
	}
	// The explaining leased and completed runs of the queue in a transaction it rolled
	// back: the queue still holds its n runs, all queued.
	require.Contains(t, plans["lease, nothing to place (one statement)"].Plan, "rows=150")
	require.Contains(t, plans["lease claim (placing path)"].Plan, "rows=150")
	require.Equal(t, n, countQueuedAfterPlans(t, res))
}

// countQueuedAfterPlans is the bench queue's queued runs that plansWorkload counted after
// explaining.
func countQueuedAfterPlans(t *testing.T, res *Result) int {
	t.Helper()
	for _, f := range res.Figures {
		if f.Name == "queued after explaining" {
			return int(f.Value)
		}
	}
	t.Fatal("no figure \"queued after explaining\"")
	return 0
}
