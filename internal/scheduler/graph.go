package scheduler

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/stint-dev/stint/internal/model"
)

// GraphEntry is one entry of a graph submission: a new job, its first run, and what that
// run depends on.
type GraphEntry struct {
	Job *model.Job
	// Run is the job's first run, as NewRun builds it. engine.SubmitGraph sets its DependsOn
	// from Deps; the store then starts it waiting (or skipped) as its dependencies say.
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

// StepDef is one step of a pipeline as a user writes it: the job it runs and the steps it
// waits for.
type StepDef struct {
	Name      string
	Job       model.JobSpec
	DependsOn []model.StepDependency
}

// StepJobName is the name of the job that runs step of pipeline (in its namespace).
func StepJobName(pipeline, step string) string { return pipeline + "." + step }

// StepOrder returns the steps in an order where each follows the steps it depends on,
// keeping the given order where it can (OrderGraph). It fails on a dependency on an unknown
// step or on the step itself, and on a cycle, naming its steps.
func StepOrder(steps []StepDef) ([]StepDef, error) {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		index[s.Name] = i
	}
	entries := make([]GraphEntry, len(steps))
	for i, s := range steps {
		for _, d := range s.DependsOn {
			j, ok := index[d.Step]
			switch {
			case d.Step == s.Name:
				return nil, fmt.Errorf("step %q depends on itself", s.Name)
			case !ok:
				return nil, fmt.Errorf("step %q depends on %q: no such step", s.Name, d.Step)
			}
			entries[i].Deps = append(entries[i].Deps, GraphDep{Entry: j, Condition: d.Condition})
		}
	}
	order, err := OrderGraph(entries)
	var cycle *CycleError
	if errors.As(err, &cycle) {
		names := make([]string, len(cycle.Path))
		for k, i := range cycle.Path {
			names[k] = steps[i].Name
		}
		return nil, fmt.Errorf("steps depend on each other in a cycle: %s", strings.Join(names, " -> "))
	}
	if err != nil {
		return nil, err
	}
	out := make([]StepDef, len(order))
	for k, i := range order {
		out[k] = steps[i]
	}
	return out, nil
}
