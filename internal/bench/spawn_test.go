package bench

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/spawn"
)

// spawn reports each way's rate and the best of them, and its progress per way; it needs no
// server.
func TestSpawnWorkload(t *testing.T) {
	t.Parallel()
	var phases [][2]int
	res, err := Run(context.Background(), "spawn", Config{N: 10, Slots: 2, Progress: func(phase string, done, total int) {
		require.Equal(t, "spawn", phase)
		phases = append(phases, [2]int{done, total})
	}})
	require.NoError(t, err)
	require.Equal(t, "spawn", res.Workload)
	require.Equal(t, "10", res.Params["n"])
	require.Equal(t, "2", res.Params["concurrency"])
	figures := map[string]float64{}
	for _, f := range res.Figures {
		figures[f.Name] = f.Value
	}
	best := 0.0
	for _, w := range spawn.Ways {
		require.Positive(t, figures[string(w)], w)
		best = max(best, figures[string(w)])
		require.Contains(t, figures, string(w)+": machine CPU per process")
		require.Contains(t, figures, string(w)+": bench process CPU per process")
		require.GreaterOrEqual(t, figures[string(w)+": machine CPU"], 0.0)
		require.LessOrEqual(t, figures[string(w)+": machine CPU"], 100.0)
	}
	require.Equal(t, best, figures["machine limit (best way)"])
	require.Equal(t, figures[res.Params["best"]], best)
	require.Equal(t, [][2]int{{1, 3}, {2, 3}, {3, 3}}, phases)
}

// The workload table of docs/benchmarks.md has one row per workload Run accepts, and
// DefaultN's sizes are the ones the table says.
func TestWorkloadTableMatchesDocs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/benchmarks.md")
	require.NoError(t, err)
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		rows = append(rows, m[1])
	}
	require.ElementsMatch(t, Workloads, rows, "docs/benchmarks.md's workload table")
	for w, n := range DefaultN {
		require.True(t, slices.Contains(Workloads, w), w)
		row := regexp.MustCompile("(?m)^\\| `" + w + "` \\|.*$").FindString(string(b))
		require.Contains(t, row, "("+groupThousands(n), "%s's default size in its row", w)
	}
}

// groupThousands writes n with commas between groups of three digits, as the docs do.
func groupThousands(n int) string {
	d := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
