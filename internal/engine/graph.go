package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// SubmitGraph creates the entries' jobs and runs with the dependencies between them, all or
// nothing, in one store transaction (store.CreateGraph, called directly rather than through
// the group committer: a graph is large and must not be split). Runs are created upstream
// first (scheduler.OrderGraph), each with its DependsOn set to the run ids of its dependencies; a
// cycle is a *scheduler.CycleError and creates nothing. It returns the jobs and runs as stored, Jobs[i]
// and Runs[i] being entry i's, and wakes workers for the runs that are queued at once.
//
// Every entry needs a Run. Entry runs may not have a concurrency limit when they have
// dependencies, nor name the same upstream run twice. A name, id or idempotency key taken
// fails the whole with model.ErrConflict, an upstream run that does not exist with
// model.ErrNotFound.
func (e *Engine) SubmitGraph(ctx context.Context, entries []scheduler.GraphEntry) (*store.Graph, error) {
	if len(entries) == 0 {
		return nil, errors.New("submit graph: no entries")
	}
	for i, en := range entries {
		if en.Job == nil || en.Run == nil {
			return nil, fmt.Errorf("submit graph: entry %d: a job and its run are required", i)
		}
		if len(en.Deps) > 0 && en.Run.Concurrency != nil {
			return nil, fmt.Errorf("submit graph: entry %d: a run with dependencies cannot have a concurrency limit", i)
		}
	}
	order, err := scheduler.OrderGraph(entries)
	if err != nil {
		return nil, fmt.Errorf("submit graph: %w", err)
	}
	jobs := make([]store.NewJob, len(order))
	for k, i := range order {
		en := entries[i]
		deps := make([]model.Dependency, len(en.Deps))
		seen := make(map[string]bool, len(en.Deps))
		for j, d := range en.Deps {
			up := d.RunID
			if up == "" {
				up = entries[d.Entry].Run.ID
			}
			if !d.Condition.Valid() {
				return nil, fmt.Errorf("submit graph: entry %d: dependency %d: unknown condition %q", i, j, d.Condition)
			}
			if seen[up] {
				return nil, fmt.Errorf("submit graph: entry %d: dependency %d: run %s named twice", i, j, up)
			}
			seen[up] = true
			deps[j] = model.Dependency{RunID: up, Condition: d.Condition}
		}
		if len(deps) == 0 {
			deps = nil
		}
		en.Run.DependsOn = deps
		jobs[k] = store.NewJob{Job: en.Job, Run: en.Run}
	}
	g, err := e.store.CreateGraph(ctx, &store.CreateGraphParams{Jobs: jobs, Now: e.clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("submit graph: %w", err)
	}
	if len(g.Jobs) != len(order) || len(g.Runs) != len(order) {
		return nil, fmt.Errorf("submit graph: %d jobs and %d runs stored for %d entries", len(g.Jobs), len(g.Runs), len(order))
	}
	out := &store.Graph{Jobs: make([]*model.Job, len(order)), Runs: make([]*model.Run, len(order))}
	for k, i := range order {
		out.Jobs[i], out.Runs[i] = g.Jobs[k], g.Runs[k]
	}
	e.log.DebugContext(ctx, "graph submitted", "runs", len(out.Runs))
	e.wakeFor(g.Runs)
	return out, nil
}
