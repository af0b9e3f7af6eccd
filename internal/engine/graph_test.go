package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// on is a dependency on entry i, succeeded.
func on(i int) GraphDep { return GraphDep{Entry: i, Condition: model.CondSucceeded} }

func TestOrderGraph(t *testing.T) {
	t.Parallel()
	deps := func(ds ...GraphDep) GraphEntry { return GraphEntry{Deps: ds} }
	tests := []struct {
		name    string
		entries []GraphEntry
		want    []int
		cycle   *CycleError
	}{
		{name: "no edges keep their order", entries: []GraphEntry{deps(), deps(), deps()}, want: []int{0, 1, 2}},
		{name: "upstream first", entries: []GraphEntry{deps(on(2)), deps(on(0)), deps()}, want: []int{2, 0, 1}},
		{name: "diamond", entries: []GraphEntry{deps(on(1), on(2)), deps(on(3)), deps(on(3)), deps()}, want: []int{3, 1, 2, 0}},
		{name: "existing runs do not count", entries: []GraphEntry{deps(GraphDep{RunID: "r1", Condition: model.CondFailed}), deps(on(0))}, want: []int{0, 1}},
		{name: "self edge", entries: []GraphEntry{deps(), deps(on(1))}, cycle: &CycleError{Path: []int{1, 1}, Dep: 0}},
		{
			name: "cycle named from its lowest entry",
			// 0 hangs below the cycle 1 -> 3 -> 2 -> 1 and is not on it.
			entries: []GraphEntry{deps(on(3)), deps(on(3)), deps(on(1)), deps(GraphDep{RunID: "x"}, on(2))},
			cycle:   &CycleError{Path: []int{1, 3, 2, 1}, Dep: 0},
		},
		{
			name:    "the edge is the one into the cycle",
			entries: []GraphEntry{deps(), deps(on(0), on(2)), deps(on(1))},
			cycle:   &CycleError{Path: []int{1, 2, 1}, Dep: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := OrderGraph(tt.entries)
			if tt.cycle != nil {
				var ce *CycleError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, tt.cycle, ce)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	t.Run("entry out of range", func(t *testing.T) {
		t.Parallel()
		_, err := OrderGraph([]GraphEntry{{Deps: []GraphDep{on(5)}}})
		require.ErrorContains(t, err, "no entry 5")
	})
}

// TestOrderGraphLarge orders a 100,000-deep chain given downstream first and a fan-out of
// 100,000 then fan-in: linear time, no recursion.
func TestOrderGraphLarge(t *testing.T) {
	t.Parallel()
	const n = 100000
	chain := make([]GraphEntry, n)
	for i := range n - 1 {
		chain[i].Deps = []GraphDep{on(i + 1)}
	}
	order, err := OrderGraph(chain)
	require.NoError(t, err)
	require.Equal(t, n-1, order[0])
	require.Equal(t, 0, order[n-1])

	fan := make([]GraphEntry, n)
	for i := 1; i < n-1; i++ {
		fan[i].Deps = []GraphDep{on(0)}
		fan[n-1].Deps = append(fan[n-1].Deps, on(i))
	}
	order, err = OrderGraph(fan)
	require.NoError(t, err)
	require.Equal(t, 0, order[0])
	require.Equal(t, n-1, order[n-1])

	// Closing the chain into a ring: the cycle holds every entry.
	chain[n-1].Deps = []GraphDep{on(0)}
	_, err = OrderGraph(chain)
	var ce *CycleError
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Path, n+1)
}

// graphEntry is a new noop job with its first run.
func graphEntry(now time.Time, name string, deps ...GraphDep) GraphEntry {
	job := &model.Job{
		ID: id.New(now), Namespace: model.DefaultNamespace, Name: name, Enabled: true,
		Spec:      model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Retry: model.RetryPolicy{MaxAttempts: 1}},
		CreatedAt: now, UpdatedAt: now,
	}
	return GraphEntry{Job: job, Run: NewRun(job, model.TriggerSubmit, nil, time.Time{}, now), Deps: deps}
}

func TestSubmitGraph(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	register(t, e, "w1")
	before := submit(t, e, b, time.Time{}, model.RetryPolicy{})

	now := b.clk.Now()
	// Given downstream first: load waits for transform and for the earlier run to finish.
	entries := []GraphEntry{
		graphEntry(now, "load", on(1), GraphDep{RunID: before.ID, Condition: model.CondFinished}),
		graphEntry(now, "transform", on(2)),
		graphEntry(now, "extract"),
	}
	g, err := e.SubmitGraph(ctx, entries)
	require.NoError(t, err)
	require.Len(t, g.Runs, 3)
	for i, name := range []string{"load", "transform", "extract"} {
		require.Equal(t, name, g.Jobs[i].Name, "results are by entry")
		require.Equal(t, g.Jobs[i].ID, g.Runs[i].JobID)
	}
	load, transform, extract := g.Runs[0], g.Runs[1], g.Runs[2]
	require.Equal(t, model.RunQueued, extract.Status)
	require.Equal(t, model.RunWaiting, transform.Status)
	require.Equal(t, model.PendingDependencies, transform.PendingCode)
	require.Equal(t, model.RunWaiting, load.Status)
	require.ElementsMatch(t, []model.Dependency{
		{RunID: transform.ID, Condition: model.CondSucceeded}, {RunID: before.ID, Condition: model.CondFinished},
	}, getRun(t, b, load.ID).DependsOn)

	// The queued runs go first; each end releases the next.
	resp := lease(t, e, "w1", 10, 0)
	require.Len(t, resp.Leases, 2)
	for _, l := range resp.Leases {
		complete(t, e, l, "succeeded")
	}
	require.Equal(t, model.RunQueued, getRun(t, b, transform.ID).Status)
	require.Equal(t, model.RunWaiting, getRun(t, b, load.ID).Status)
	resp = lease(t, e, "w1", 10, 0)
	require.Len(t, resp.Leases, 1)
	require.Equal(t, transform.ID, resp.Leases[0].Run.ID)
	complete(t, e, resp.Leases[0], "failed")
	got := getRun(t, b, load.ID)
	require.Equal(t, model.RunSkipped, got.Status, "a broken dependency skips the dependant")
	require.Contains(t, got.Error, transform.ID)
}

func TestSubmitGraphAllOrNothing(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	count := func() int {
		t.Helper()
		return len(runsOfAll(t, b))
	}
	now := b.clk.Now()

	// A cycle creates nothing.
	_, err := e.SubmitGraph(ctx, []GraphEntry{graphEntry(now, "a", on(1)), graphEntry(now, "b", on(0))})
	var ce *CycleError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []int{0, 1, 0}, ce.Path)
	require.Zero(t, count())

	// An upstream run that does not exist: nothing, not even the entries before it.
	_, err = e.SubmitGraph(ctx, []GraphEntry{
		graphEntry(now, "c"),
		graphEntry(now, "d", on(0), GraphDep{RunID: id.New(now), Condition: model.CondSucceeded}),
	})
	require.ErrorIs(t, err, model.ErrNotFound)
	require.Zero(t, count())

	// A name taken: a conflict, and nothing.
	_, err = e.SubmitGraph(ctx, []GraphEntry{graphEntry(now, "e")})
	require.NoError(t, err)
	_, err = e.SubmitGraph(ctx, []GraphEntry{graphEntry(now, "f"), graphEntry(now, "e", on(0))})
	require.ErrorIs(t, err, model.ErrConflict)
	require.Equal(t, 1, count())

	// Misuse is refused before the store sees it.
	twice := graphEntry(now, "g", on(1), on(1))
	_, err = e.SubmitGraph(ctx, []GraphEntry{twice, graphEntry(now, "h")})
	require.ErrorContains(t, err, "named twice")
	limited := graphEntry(now, "i", on(1))
	limited.Run.Concurrency = &model.RunConcurrency{Key: "k", Max: 1, Policy: model.ConcurrencyQueue}
	_, err = e.SubmitGraph(ctx, []GraphEntry{limited, graphEntry(now, "j")})
	require.ErrorContains(t, err, "concurrency limit")
	_, err = e.SubmitGraph(ctx, nil)
	require.Error(t, err)
	require.Equal(t, 1, count())
	require.False(t, errors.Is(err, model.ErrConflict))
}

// runsOfAll lists every run in the store.
func runsOfAll(t *testing.T, b *testBundle) []*model.Run {
	t.Helper()
	page, err := b.store.ListRuns(context.Background(), &store.ListRunsParams{Limit: 1000})
	require.NoError(t, err)
	return page.Runs
}
