package bench

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stint is the binary the tests that start processes run, built once (buildStint).
var stint struct {
	once sync.Once
	dir  string
	bin  string
	err  error
	out  []byte
}

func TestMain(m *testing.M) {
	code := m.Run()
	if stint.dir != "" {
		os.RemoveAll(stint.dir)
	}
	os.Exit(code)
}

// buildStint builds cmd/stint once for the package's tests and returns its path.
func buildStint(t *testing.T) string {
	t.Helper()
	stint.once.Do(func() {
		if stint.dir, stint.err = os.MkdirTemp("", "stint-bench-test-"); stint.err != nil {
			return
		}
		stint.bin = filepath.Join(stint.dir, "stint")
		stint.out, stint.err = exec.Command("go", "build", "-o", stint.bin, "../../cmd/stint").CombinedOutput()
	})
	require.NoError(t, stint.err, "build stint: %s", stint.out)
	return stint.bin
}

// TestWorkloadsRun runs every workload small on a server the bench starts itself on SQLite,
// and checks each reports its figures. Speed is measured by `stint bench`, not here.
func TestWorkloadsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	cfg := Config{
		Store: "sqlite", N: 200, Duration: time.Second, Producers: 2, Slots: 50,
		BatchSize: 100, Lead: 2 * time.Second, Logger: slog.New(slog.DiscardHandler),
	}
	want := map[string][]string{
		"drain":     {"insert", "processed"},
		"exec":      {"insert", "processed"},
		"steady":    {"completed", "submit-to-start p99", "backlog at end"},
		"scheduled": {"lateness p50", "lateness p99", "lateness max"},
		"cron":      {"lateness p50", "lateness p99", "duplicates", "misses"},
		"dag":       {"submit", "processed"},
	}
	for _, w := range Workloads {
		switch w {
		case "failover", "plans", "agents":
			continue // PostgreSQL or server processes: TestFailover, TestPlansWorkload, TestAgents
		}
		t.Run(w, func(t *testing.T) {
			c := cfg
			if w == "exec" {
				c.N = 20
			}
			res, err := Run(context.Background(), w, c)
			require.NoError(t, err)
			names := map[string]float64{}
			for _, f := range res.Figures {
				names[f.Name] = f.Value
			}
			for _, n := range want[w] {
				require.Contains(t, names, n)
			}
		})
	}
	_, err := Run(context.Background(), "nope", cfg)
	require.ErrorContains(t, err, "want one of drain")
}

// TestRemoteWorkers runs drain with the workers as real `stint worker` processes that speak
// the worker protocol over HTTP.
// TestProgress: a drain tells Progress of its inserts, up to all of them, then of its
// drain, up to an idle queue.
func TestProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	type call struct {
		phase       string
		done, total int
	}
	var (
		mu    sync.Mutex
		calls []call
	)
	_, err := Run(context.Background(), "drain", Config{
		Store: "sqlite", N: 200, Slots: 50, BatchSize: 50, InsertWorkers: 2, Logger: slog.New(slog.DiscardHandler),
		Progress: func(phase string, done, total int) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, call{phase, done, total})
		},
	})
	require.NoError(t, err)
	var inserts, drains []call
	for _, c := range calls {
		require.LessOrEqual(t, c.done, c.total, "%+v", c)
		switch c.phase {
		case "insert":
			require.Empty(t, drains, "inserts come first")
			require.Equal(t, 200, c.total)
			inserts = append(inserts, c)
		case "drain":
			drains = append(drains, c)
		default:
			t.Fatalf("unknown phase %q", c.phase)
		}
	}
	require.Len(t, inserts, 4, "one call a batch of 50")
	require.Equal(t, 200, inserts[len(inserts)-1].done, "the last call counts them all")
	require.NotEmpty(t, drains)
	last := drains[len(drains)-1]
	require.Positive(t, last.total)
	require.Equal(t, last.total, last.done, "the drain ends with every run ended")
}

func TestRemoteWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stint and starts processes")
	}
	bin := buildStint(t)
	res, err := Run(context.Background(), "drain", Config{
		Store: "sqlite", N: 300, Slots: 20, Workers: 2, WorkerBinary: bin,
		BatchSize: 100, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err, "every run must succeed on the remote workers")
	require.Contains(t, res.Store, "2 remote worker processes")
	var processed float64
	for _, f := range res.Figures {
		if f.Name == "processed" {
			processed = f.Value
		}
	}
	require.Positive(t, processed)
}

// TestFailover runs the failover workload: three server processes on a scratch PostgreSQL
// database, the leader killed; it checks the figures the workload must get right.
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stint and starts processes")
	}
	base := os.Getenv("STINT_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("STINT_TEST_DATABASE_URL not set: skipping the PostgreSQL failover bench")
	}
	_, err := Run(context.Background(), "failover", Config{Store: "sqlite"})
	require.ErrorContains(t, err, "needs --store with a postgres:// URL")

	bin := buildStint(t)
	res, err := Run(context.Background(), "failover", Config{Store: base, WorkerBinary: bin, Slots: 20,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	figures := map[string]float64{}
	for _, f := range res.Figures {
		figures[f.Name] = f.Value
	}
	require.Less(t, figures["cron fires again after the kill"], 2.0, "seconds")
	require.Zero(t, figures["cron instants fired twice"])
	require.Zero(t, figures["cron instants missed"])
	require.Contains(t, figures, "runs lost")
}

// TestAgents runs the agents workload small: simulated agents against a server process the
// bench starts on SQLite. Every agent must register and heartbeat without an error, and the
// server's CPU and memory must be read from /proc.
func TestAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stint and starts processes")
	}
	bin := buildStint(t)
	const agents = 40
	res, err := Run(context.Background(), "agents", Config{Store: "sqlite", Agents: agents, Duration: 4 * time.Second,
		WorkerBinary: bin, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.Contains(t, res.Store, "1 server processes")
	figures := map[string]float64{}
	for _, f := range res.Figures {
		figures[f.Name] = f.Value
	}
	require.Equal(t, float64(agents), figures["agents registered"])
	require.Positive(t, figures["heartbeats"], "agents heartbeat in the window")
	require.Zero(t, figures["errors"])
	require.Zero(t, figures["runs leased"])
	require.Contains(t, figures, "servers CPU")
	require.Greater(t, figures["servers RSS peak (VmHWM)"], 1.0, "MiB")

	_, err = Run(context.Background(), "agents", Config{Store: "sqlite", Servers: 2, Agents: 1, WorkerBinary: bin})
	require.ErrorContains(t, err, "postgres")
}

// TestClusterDrain runs drain on three server processes sharing a scratch PostgreSQL
// database, with three worker processes, one per server: the queue is resumed through the
// first server, so the other two must be woken through the database, and every run, from
// whichever server took its batch, must succeed.
func TestClusterDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stint and starts processes")
	}
	base := os.Getenv("STINT_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("STINT_TEST_DATABASE_URL not set")
	}
	_, err := Run(context.Background(), "drain", Config{Store: base, Servers: 3, N: 10})
	require.ErrorContains(t, err, "--workers")

	bin := buildStint(t)
	res, err := Run(context.Background(), "drain", Config{Store: base, Servers: 3, Workers: 3, Slots: 30, N: 900,
		BatchSize: 100, InsertWorkers: 3, WorkerBinary: bin, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err, "every run must succeed")
	require.Contains(t, res.Store, "3 server processes, 3 worker processes")
	figures := map[string]float64{}
	for _, f := range res.Figures {
		figures[f.Name] = f.Value
	}
	require.Positive(t, figures["processed"])
	require.Positive(t, figures["servers CPU while draining"])
}
