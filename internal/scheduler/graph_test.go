package scheduler

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
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
