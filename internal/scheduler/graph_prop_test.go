package scheduler

import (
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/stint-dev/stint/internal/model"
)

// randomDAG draws a graph whose edges all go from an entry to one of lower rank (a random
// permutation), with some dependencies on existing runs, which take no part in the order.
func randomDAG(t *rapid.T) ([]GraphEntry, []int) {
	n := rapid.IntRange(1, 40).Draw(t, "entries")
	rank := rapid.Permutation(seq(n)).Draw(t, "rank") // rank[k] is the k-th entry in a valid order
	pos := make([]int, n)
	for k, i := range rank {
		pos[i] = k
	}
	entries := make([]GraphEntry, n)
	for i := range entries {
		for _, j := range rapid.SliceOfNDistinct(rapid.IntRange(0, n-1), 0, 4, rapid.ID[int]).Draw(t, "deps") {
			if pos[j] < pos[i] {
				entries[i].Deps = append(entries[i].Deps, GraphDep{Entry: j, Condition: model.CondSucceeded})
			}
		}
		if rapid.IntRange(0, 9).Draw(t, "existing") == 0 {
			entries[i].Deps = append(entries[i].Deps, GraphDep{RunID: "run", Condition: model.CondFinished})
		}
	}
	return entries, pos
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestOrderGraphProperties(t *testing.T) {
	t.Parallel()
	t.Run("a DAG's order respects every edge", rapid.MakeCheck(func(t *rapid.T) {
		entries, _ := randomDAG(t)
		order, err := OrderGraph(entries)
		if err != nil {
			t.Fatalf("DAG refused: %v", err)
		}
		checkOrder(t, entries, order)
	}))
	t.Run("a graph with a cycle reports a real one", rapid.MakeCheck(func(t *rapid.T) {
		entries, pos := randomDAG(t)
		// Close a cycle: a and b depend on each other (an entry on itself when a == b),
		// b being the one of higher rank, so the DAG's edges lead into the cycle too.
		n := len(entries)
		a := rapid.IntRange(0, n-1).Draw(t, "a")
		b := rapid.IntRange(0, n-1).Draw(t, "b")
		if pos[a] > pos[b] {
			a, b = b, a
		}
		entries[b].Deps = append(entries[b].Deps, GraphDep{Entry: a})
		entries[a].Deps = append(entries[a].Deps, GraphDep{Entry: b})
		_, err := OrderGraph(entries)
		var ce *CycleError
		if !errors.As(err, &ce) {
			t.Fatalf("no cycle reported: %v", err)
		}
		checkCycle(t, entries, ce)
	}))
	t.Run("any graph is ordered or has a cycle", rapid.MakeCheck(func(t *rapid.T) {
		n := rapid.IntRange(1, 15).Draw(t, "entries")
		entries := make([]GraphEntry, n)
		for i := range entries {
			for _, j := range rapid.SliceOfNDistinct(rapid.IntRange(0, n-1), 0, 3, rapid.ID[int]).Draw(t, "deps") {
				entries[i].Deps = append(entries[i].Deps, GraphDep{Entry: j})
			}
		}
		order, err := OrderGraph(entries)
		var ce *CycleError
		switch {
		case err == nil:
			checkOrder(t, entries, order)
		case errors.As(err, &ce):
			checkCycle(t, entries, ce)
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}))
}

// checkOrder checks that order holds every entry once, each after its dependencies.
func checkOrder(t *rapid.T, entries []GraphEntry, order []int) {
	if len(order) != len(entries) {
		t.Fatalf("order %v of %d entries", order, len(entries))
	}
	at := make(map[int]int, len(order))
	for k, i := range order {
		if _, dup := at[i]; dup {
			t.Fatalf("entry %d twice in %v", i, order)
		}
		at[i] = k
	}
	for i, en := range entries {
		for _, d := range en.Deps {
			if d.RunID == "" && at[d.Entry] >= at[i] {
				t.Fatalf("entry %d comes before %d, which it depends on: %v", i, d.Entry, order)
			}
		}
	}
}

// checkCycle checks that ce names a cycle of the graph: each entry of its path depends on
// the next, the path ends where it starts, and Dep is the first edge.
func checkCycle(t *rapid.T, entries []GraphEntry, ce *CycleError) {
	p := ce.Path
	if len(p) < 2 || p[0] != p[len(p)-1] {
		t.Fatalf("path %v is not closed", p)
	}
	if d := entries[p[0]].Deps; ce.Dep < 0 || ce.Dep >= len(d) || d[ce.Dep].RunID != "" || d[ce.Dep].Entry != p[1] {
		t.Fatalf("dep %d of entry %d is not the edge to %d", ce.Dep, p[0], p[1])
	}
	seen := map[int]bool{}
	for k := 0; k+1 < len(p); k++ {
		if seen[p[k]] {
			t.Fatalf("path %v repeats entry %d", p, p[k])
		}
		seen[p[k]] = true
		found := false
		for _, d := range entries[p[k]].Deps {
			found = found || d.RunID == "" && d.Entry == p[k+1]
		}
		if !found {
			t.Fatalf("path %v: entry %d does not depend on %d", p, p[k], p[k+1])
		}
	}
}
