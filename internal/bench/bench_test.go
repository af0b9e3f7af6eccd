package bench

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
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
// and checks each reports its figures, its progress, and latencies as the user sees them.
// Speed is measured by `stint bench`, not here.
func TestWorkloadsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	cfg := Config{
		Store: "sqlite", N: 200, Duration: time.Second, Producers: 2, Slots: 50,
		BatchSize: 100, Lead: 2 * time.Second, Logger: slog.New(slog.DiscardHandler),
	}
	want := map[string][]string{
		"drain": {"insert", "processed", "first start after resume", "last start after resume", "insert: machine CPU"},
		"exec": {"insert", "processed", "first start after resume (server stamp)", "machine limit", "processed / machine limit",
			"machine CPU per run beyond a process at the limit", "processed / machine limit, were CPU the bound"},
		"steady":    {"completed", "submit-to-start p99", "backlog at end", "never started"},
		"scheduled": {"lateness p50", "lateness p99", "lateness max"},
		"cron":      {"lateness p50", "lateness p99", "duplicates", "misses"},
		"dag":       {"submit", "processed", "first start after resume"},
	}
	for _, w := range Workloads {
		switch w {
		case "failover", "plans", "agents", "spawn":
			continue // PostgreSQL, server processes or no server: TestFailover, TestPlansWorkload, TestAgents, TestSpawnWorkload
		}
		t.Run(w, func(t *testing.T) {
			c := cfg
			if w == "exec" {
				c.N = 20
			}
			var mu sync.Mutex
			last := map[string][2]int{}
			c.Progress = func(phase string, done, total int) {
				mu.Lock()
				defer mu.Unlock()
				require.LessOrEqual(t, done, total, phase)
				require.GreaterOrEqual(t, done, last[phase][0], "%s goes backwards", phase)
				last[phase] = [2]int{done, total}
			}
			res, err := Run(context.Background(), w, c)
			require.NoError(t, err)
			names := map[string]float64{}
			for _, f := range res.Figures {
				names[f.Name] = f.Value
			}
			for _, n := range append(want[w], "bench process CPU", "machine CPU", "progress polls in the window") {
				require.Contains(t, names, n)
			}
			mu.Lock()
			defer mu.Unlock()
			switch w {
			case "drain", "exec", "scheduled", "cron":
				require.Equal(t, [2]int{c.N, c.N}, last["insert"], "insert progress ends at every job")
			}
			switch w {
			case "drain", "dag", "scheduled", "cron", "exec":
				require.Equal(t, [2]int{c.N, c.N}, last["run"], "run progress ends at every run")
			case "steady":
				require.Equal(t, 1, last["submit"][1], "steady reports its seconds")
			}
			switch w {
			case "steady":
				// created_at is stamped after the request left the bench, started_at before
				// the handler ran, on the same clock: the user's wait holds the server's
				// (to within the stamps' rounding).
				require.GreaterOrEqual(t, names["submit-to-start p50"], names["created_at to started_at p50 (server stamps)"]-1)
				require.Positive(t, names["submit-to-start p50"])
				require.Zero(t, names["never started"])
				require.Zero(t, names["progress polls in the window"], "steady asks the server nothing while it measures")
			case "scheduled", "cron":
				// A handler starts after its lease was stamped, and not before the instant.
				require.GreaterOrEqual(t, names["lateness p50"], names["started_at − instant p50 (server stamps)"]-1)
				require.GreaterOrEqual(t, names["lateness p50"], 0.0)
			case "drain", "dag":
				require.LessOrEqual(t, names["first start after resume"], names["last start after resume"])
			case "exec":
				// The machine's CPU holds the bench process's, to within the ticks /proc
				// counts in (10 ms, one per CPU at each end of the window).
				slack := float64(2*runtime.NumCPU()) * 10_000
				require.GreaterOrEqual(t, names["machine CPU per run"]*float64(c.N)+slack, names["bench process CPU per run"]*float64(c.N))
				require.InDelta(t, names["machine CPU per run"]-names["machine limit: machine CPU per process"],
					names["machine CPU per run beyond a process at the limit"], 1e-6)
			}
			if _, perRun := names["bench process CPU per run"]; perRun {
				// The server runs in the bench's process and allocates for every run.
				require.Positive(t, names["bench process allocations per run"])
				require.GreaterOrEqual(t, names["bench process allocated per run"], names["bench process allocations per run"])
			}
			if w == "drain" {
				require.Positive(t, names["insert: bench process allocations per job"])
			}
			require.NotContains(t, names, "servers memory per 10,000 queued runs",
				"the server runs in the bench's process, whose memory holds the bench's too")
		})
	}
	_, err := Run(context.Background(), "nope", cfg)
	require.ErrorContains(t, err, "want one of drain")
}

// TestBenchWorkers runs drain and scheduled with the workers as agents in the bench's process
// that speak the worker protocol over HTTP: each run's start is noted by their handler.
func TestBenchWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	for _, w := range []string{"drain", "scheduled"} {
		res, err := Run(context.Background(), w, Config{
			Store: "sqlite", N: 300, Slots: 20, Workers: 2, Lead: 2 * time.Second,
			BatchSize: 100, Logger: slog.New(slog.DiscardHandler),
		})
		require.NoError(t, err, "every run must succeed on the bench's workers")
		require.Contains(t, res.Store, "2 HTTP workers in the bench's process")
		figures := map[string]float64{}
		for _, f := range res.Figures {
			figures[f.Name] = f.Value
		}
		if w == "drain" {
			require.Positive(t, figures["processed"])
			require.Positive(t, figures["last start after resume"])
		} else {
			require.GreaterOrEqual(t, figures["lateness max"], figures["lateness p50"])
		}
	}
}

// TestExternalServer runs scheduled against a server the bench did not start, whose own local
// worker offers the built-in noop: the bench's jobs name a handler kind of its own, so only
// its worker takes them, and every run's start is seen.
func TestExternalServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	ctx := context.Background()
	srv, err := startServer(ctx, Config{Store: "sqlite", Slots: 10, Logger: slog.New(slog.DiscardHandler)}, nil)
	require.NoError(t, err)
	defer srv.stop()
	res, err := Run(ctx, "scheduled", Config{Server: srv.url, N: 100, BatchSize: 50, Slots: 20, Lead: 2 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err, "every run must start on the bench's worker")
	require.Contains(t, res.Store, "1 HTTP workers in the bench's process")
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
	require.Greater(t, figures["servers RSS before the agents"], 1.0, "MiB")
	require.Greater(t, figures["servers RSS with the agents (at the end)"], 1.0, "MiB")
	// What the agents cost the server, per agent: its RSS grows by their connections and
	// registrations (it could shrink, a GC returning memory; it cannot be a server's whole size).
	require.Contains(t, figures, "servers memory per connected worker")
	require.Less(t, figures["servers memory per connected worker"]*agents/1024, figures["servers RSS with the agents (at the end)"])

	_, err = Run(context.Background(), "agents", Config{Store: "sqlite", Servers: 2, Agents: 1, WorkerBinary: bin})
	require.ErrorContains(t, err, "postgres")
}

// TestClusterDrain runs drain on three server processes sharing a scratch PostgreSQL
// database, with three workers of the bench (over HTTP), one polling each server: the queue
// is resumed through the first server, so the other two must be woken through the database,
// and every run, from whichever server took its batch, must succeed.
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
	require.Contains(t, res.Store, "3 server processes, 3 HTTP workers in the bench's process")
	figures := map[string]float64{}
	for _, f := range res.Figures {
		figures[f.Name] = f.Value
	}
	require.Positive(t, figures["processed"])
	require.Positive(t, figures["servers CPU"])
	require.Positive(t, figures["PostgreSQL CPU per run"])
	require.Greater(t, figures["servers RSS before the insert"], 3.0, "MiB, three servers")
	require.Greater(t, figures["servers RSS with the runs queued"], 3.0, "MiB, three servers")
	require.Contains(t, figures, "servers memory per 10,000 queued runs")

	// Where the database's time went: pg_stat_statements, when the server loads it.
	if off, ok := res.Params["pg_stat_statements"]; ok {
		require.Equal(t, statementsOff, off)
		require.Empty(t, res.Statements)
		t.Log("pg_stat_statements is not loaded by the test PostgreSQL: only its absence is checked")
		return
	}
	leased := 0
	for _, s := range res.Statements {
		require.Positive(t, s.Calls, s.Query)
		if strings.Contains(s.Query, "lease_token = gen_random_uuid()") {
			leased += int(s.Rows)
		}
	}
	require.GreaterOrEqual(t, leased, 900, "the lease statements leased every run: %+v", res.Statements)
}

// TestClusterSeedRetention runs drain on one server process over a seeded scratch
// PostgreSQL database with retention on: the history is written before the server starts
// (so the leader's first retention pass finds it) and retention deletes it while the
// workload runs, leaving the workload's own runs, which finished less than --retain-runs ago.
func TestClusterSeedRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stint and starts processes")
	}
	base := os.Getenv("STINT_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("STINT_TEST_DATABASE_URL not set")
	}
	bin := buildStint(t)
	res, err := Run(context.Background(), "drain", Config{Store: base, Servers: 1, Workers: 1, Slots: 50, N: 2000,
		BatchSize: 500, InsertWorkers: 2, SeedFinished: 20000, Retention: time.Hour, RetentionPause: time.Millisecond,
		WorkerBinary: bin, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err, "every run of the workload must succeed: retention spares them")
	require.Contains(t, res.Store, "1 server processes, 1 HTTP workers in the bench's process, seeded with 20000 finished runs")
	require.Contains(t, res.Params["seeded"], "20000 finished runs")
	figures := map[string]float64{}
	for _, f := range res.Figures {
		figures[f.Name] = f.Value
	}
	require.Positive(t, figures["retention deleted"], "the server process deletes the seeded history")
	require.Contains(t, figures, "servers memory per 10,000 queued runs")
}
