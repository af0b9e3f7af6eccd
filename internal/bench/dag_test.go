package bench

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDAGGraph checks the shapes the dag workload submits: their entries, edges and refs.
func TestDAGGraph(t *testing.T) {
	g, edges, err := dagGraph(ShapeFanout, 5, "noop", "q")
	require.NoError(t, err)
	require.Len(t, g, 5)
	require.Equal(t, 6, edges)
	require.Empty(t, g["r00000"].DependsOn)
	for _, m := range []string{"r00001", "r00002", "r00003"} {
		require.Len(t, g[m].DependsOn, 1)
		require.Equal(t, "r00000", g[m].DependsOn[0].Ref)
	}
	require.Len(t, g["r00004"].DependsOn, 3)

	g, edges, err = dagGraph(ShapeChain, 4, "noop", "q")
	require.NoError(t, err)
	require.Len(t, g, 4)
	require.Equal(t, 3, edges)
	require.Empty(t, g["r00000"].DependsOn)
	require.Equal(t, "r00002", g["r00003"].DependsOn[0].Ref)
	require.Equal(t, "q", g["r00003"].Queue)

	_, _, err = dagGraph("star", 10, "noop", "q")
	require.ErrorContains(t, err, "--shape")
	_, _, err = dagGraph(ShapeFanout, 2, "noop", "q")
	require.ErrorContains(t, err, "--n")
}

// TestDAGWorkload runs the dag workload small in both shapes on a server it starts on
// SQLite: every run must succeed, and the figures are reported.
func TestDAGWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	for _, shape := range []string{ShapeFanout, ShapeChain} {
		t.Run(shape, func(t *testing.T) {
			res, err := Run(context.Background(), "dag", Config{
				Store: "sqlite", N: 50, Slots: 20, Shape: shape, Logger: slog.New(slog.DiscardHandler),
			})
			require.NoError(t, err)
			got := map[string]float64{}
			for _, f := range res.Figures {
				got[f.Name] = f.Value
			}
			for _, n := range []string{"submit", "submit per run", "submit per edge", "processed"} {
				require.Positive(t, got[n], "figure %s", n)
			}
			require.Equal(t, shape, res.Params["shape"])
		})
	}
}
