package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// on is a dependency on entry i, succeeded.
func on(i int) scheduler.GraphDep {
	return scheduler.GraphDep{Entry: i, Condition: model.CondSucceeded}
}

// graphEntry is a new noop job with its first run.
func graphEntry(now time.Time, name string, deps ...scheduler.GraphDep) scheduler.GraphEntry {
	job := &model.Job{
		ID: id.New(now), Namespace: model.DefaultNamespace, Name: name, Enabled: true,
		Spec:      model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Retry: model.RetryPolicy{MaxAttempts: 1}},
		CreatedAt: now, UpdatedAt: now,
	}
	return scheduler.GraphEntry{Job: job, Run: scheduler.NewRun(id.New(now), job, model.TriggerSubmit, nil, time.Time{}, now), Deps: deps}
}

func TestSubmitGraph(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	register(t, e, "w1")
	before := submit(t, e, b, time.Time{}, model.RetryPolicy{})

	now := b.clk.Now()
	// Given downstream first: load waits for transform and for the earlier run to finish.
	entries := []scheduler.GraphEntry{
		graphEntry(now, "load", on(1), scheduler.GraphDep{RunID: before.ID, Condition: model.CondFinished}),
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
	_, err := e.SubmitGraph(ctx, []scheduler.GraphEntry{graphEntry(now, "a", on(1)), graphEntry(now, "b", on(0))})
	var ce *scheduler.CycleError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []int{0, 1, 0}, ce.Path)
	require.Zero(t, count())

	// An upstream run that does not exist: nothing, not even the entries before it.
	_, err = e.SubmitGraph(ctx, []scheduler.GraphEntry{
		graphEntry(now, "c"),
		graphEntry(now, "d", on(0), scheduler.GraphDep{RunID: id.New(now), Condition: model.CondSucceeded}),
	})
	require.ErrorIs(t, err, model.ErrNotFound)
	require.Zero(t, count())

	// A name taken: a conflict, and nothing.
	_, err = e.SubmitGraph(ctx, []scheduler.GraphEntry{graphEntry(now, "e")})
	require.NoError(t, err)
	_, err = e.SubmitGraph(ctx, []scheduler.GraphEntry{graphEntry(now, "f"), graphEntry(now, "e", on(0))})
	require.ErrorIs(t, err, model.ErrConflict)
	require.Equal(t, 1, count())

	// Misuse is refused before the store sees it.
	twice := graphEntry(now, "g", on(1), on(1))
	_, err = e.SubmitGraph(ctx, []scheduler.GraphEntry{twice, graphEntry(now, "h")})
	require.ErrorContains(t, err, "named twice")
	limited := graphEntry(now, "i", on(1))
	limited.Run.Concurrency = &model.RunConcurrency{Key: "k", Max: 1, Policy: model.ConcurrencyQueue}
	_, err = e.SubmitGraph(ctx, []scheduler.GraphEntry{limited, graphEntry(now, "j")})
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
