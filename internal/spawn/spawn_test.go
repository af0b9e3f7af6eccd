package spawn

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Each way starts and reaps every process, in the order of Ways, and Best is the fastest.
func TestMeasure(t *testing.T) {
	t.Parallel()
	var told []Way
	rs, err := Measure(context.Background(), Config{N: 20, Concurrency: 3}, func(r Result) { told = append(told, r.Way) })
	require.NoError(t, err)
	require.Equal(t, Ways, told)
	require.Len(t, rs, len(Ways))
	for i, r := range rs {
		require.Equal(t, Ways[i], r.Way)
		require.Equal(t, 20, r.Processes)
		require.Equal(t, 3, r.Concurrency)
		require.Positive(t, r.PerSecond(), r.Way)
	}
	best := Best(rs)
	for _, r := range rs {
		require.GreaterOrEqual(t, best.PerSecond(), r.PerSecond())
	}
}

// A process that fails fails the measurement, naming the way; so does bad input, naming the
// field.
func TestMeasureErrors(t *testing.T) {
	t.Parallel()
	_, err := Measure(context.Background(), Config{N: 2, Concurrency: 1, Path: "false"}, nil)
	require.ErrorContains(t, err, "spawn os/exec: exit status 1")
	_, err = Measure(context.Background(), Config{N: 0, Concurrency: 1}, nil)
	require.ErrorContains(t, err, "N must be positive")
	_, err = Measure(context.Background(), Config{N: 1, Concurrency: 0}, nil)
	require.ErrorContains(t, err, "Concurrency must be positive")
	_, err = Measure(context.Background(), Config{N: 1, Concurrency: 1, Path: "stint-no-such-command"}, nil)
	require.ErrorContains(t, err, "stint-no-such-command")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Measure(ctx, Config{N: 5, Concurrency: 1}, nil)
	require.ErrorIs(t, err, context.Canceled)
}

func TestPerSecond(t *testing.T) {
	t.Parallel()
	require.InDelta(t, 500.0, Result{Processes: 1000, Elapsed: 2 * time.Second}.PerSecond(), 1e-9)
	require.Zero(t, Result{Processes: 10}.PerSecond())
	require.Equal(t, Result{}, Best[Result](nil))
}

// Every way reports a process that exits non-zero.
func TestWaysSeeExitStatus(t *testing.T) {
	t.Parallel()
	devNull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devNull.Close()
	for _, name := range []string{"true", "false"} {
		path, err := exec.LookPath(name)
		require.NoError(t, err)
		starts := startFuncs(path, name, nil, devNull)
		require.Len(t, starts, len(Ways))
		for _, w := range Ways {
			err := starts[w]()
			if name == "true" {
				require.NoError(t, err, w)
			} else {
				require.Error(t, err, w)
			}
		}
	}
}
