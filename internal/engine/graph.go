package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// GraphEntry is one entry of a graph submission: a new job, its first run, and what that
// run depends on.
type GraphEntry struct {
	Job *model.Job
	// Run is the job's first run, as NewRun builds it. SubmitGraph sets its DependsOn from
	// Deps; the store then starts it waiting (or skipped) as its dependencies say.
	Run  *model.Run
	Deps []GraphDep
}

// GraphDep is one dependency of an entry's run: on the run of another entry of the same
// submission (Entry, an index), or, when RunID is set, on a run that already exists.
type GraphDep struct {
	Entry     int
	RunID     string
	Condition model.Condition
}

// CycleError says that the dependencies between the entries of a graph go round in a
// circle. Path lists entries, each depending on the next, and ends with the entry it
// starts with; Dep is the index, in the Deps of entry Path[0], of the edge to Path[1].
type CycleError struct {
	Path []int
	Dep  int
}

func (e *CycleError) Error() string {
	parts := make([]string, len(e.Path))
	for i, n := range e.Path {
		parts[i] = strconv.Itoa(n)
	}
	return "dependency cycle through entries " + strings.Join(parts, " -> ")
}

// OrderGraph returns the indexes of entries in an order in which each entry comes after
// every entry it depends on (Kahn's algorithm, in O(entries + dependencies); entries with
// nothing between them keep their order). When the dependencies go round in a circle it
// returns a *CycleError naming one: the first one met walking upstream from the first entry
// left unordered, rotated to start at its lowest index, so the same graph always gives the
// same answer. Dependencies on existing runs (RunID) do not take part. An Entry out of range
// is an error.
func OrderGraph(entries []GraphEntry) ([]int, error) {
	n := len(entries)
	unmet := make([]int, n) // dependencies on entries not yet ordered
	// The dependants of each entry, in index order: those of entry u are
	// down[start[u]:start[u+1]].
	start := make([]int, n+1)
	for i, en := range entries {
		for j, d := range en.Deps {
			if d.RunID != "" {
				continue
			}
			if d.Entry < 0 || d.Entry >= n {
				return nil, fmt.Errorf("order graph: entry %d: dependency %d: no entry %d", i, j, d.Entry)
			}
			unmet[i]++
			start[d.Entry+1]++
		}
	}
	for u := range n {
		start[u+1] += start[u]
	}
	down := make([]int, start[n])
	fill := append([]int(nil), start[:n]...)
	for i, en := range entries {
		for _, d := range en.Deps {
			if d.RunID == "" {
				down[fill[d.Entry]] = i
				fill[d.Entry]++
			}
		}
	}
	order := make([]int, 0, n)
	for i := range n {
		if unmet[i] == 0 {
			order = append(order, i)
		}
	}
	for k := 0; k < len(order); k++ {
		u := order[k]
		for _, i := range down[start[u]:start[u+1]] {
			if unmet[i]--; unmet[i] == 0 {
				order = append(order, i)
			}
		}
	}
	if len(order) == n {
		return order, nil
	}
	return nil, findCycle(entries, unmet)
}

// findCycle finds a cycle among the entries left with unmet dependencies (each of them
// depends on another of them). It walks upstream from the first until it comes back to an
// entry of its walk.
func findCycle(entries []GraphEntry, unmet []int) *CycleError {
	start := 0
	for unmet[start] == 0 {
		start++
	}
	seen := make(map[int]int) // entry -> position in the walk
	var walk, via []int       // via[k]: the edge of walk[k] to walk[k+1]
	for cur := start; ; {
		if at, ok := seen[cur]; ok {
			walk, via = walk[at:], via[at:]
			break
		}
		seen[cur] = len(walk)
		walk = append(walk, cur)
		next, edge := -1, -1
		for j, d := range entries[cur].Deps {
			if d.RunID == "" && unmet[d.Entry] > 0 {
				next, edge = d.Entry, j
				break
			}
		}
		via = append(via, edge)
		cur = next
	}
	// Rotate to start at the lowest entry.
	low := 0
	for k := range walk {
		if walk[k] < walk[low] {
			low = k
		}
	}
	path := make([]int, 0, len(walk)+1)
	path = append(path, walk[low:]...)
	path = append(path, walk[:low]...)
	path = append(path, walk[low])
	return &CycleError{Path: path, Dep: via[low]}
}

// SubmitGraph creates the entries' jobs and runs with the dependencies between them, all or
// nothing, in one store transaction (store.CreateGraph, called directly rather than through
// the group committer: a graph is large and must not be split). Runs are created upstream
// first (OrderGraph), each with its DependsOn set to the run ids of its dependencies; a
// cycle is a *CycleError and creates nothing. It returns the jobs and runs as stored, Jobs[i]
// and Runs[i] being entry i's, and wakes workers for the runs that are queued at once.
//
// Every entry needs a Run. Entry runs may not have a concurrency limit when they have
// dependencies, nor name the same upstream run twice. A name, id or idempotency key taken
// fails the whole with model.ErrConflict, an upstream run that does not exist with
// model.ErrNotFound.
func (e *Engine) SubmitGraph(ctx context.Context, entries []GraphEntry) (*store.Graph, error) {
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
	order, err := OrderGraph(entries)
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
