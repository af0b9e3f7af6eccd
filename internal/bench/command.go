package bench

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/internal/progress"
)

// Command returns `stint bench`.
func Command() *cobra.Command {
	var (
		cfg        Config
		asJSON     bool
		profile    string
		memProfile string
	)
	cmd := &cobra.Command{
		Use:   "bench WORKLOAD",
		Short: "Run a benchmark workload: " + strings.Join(Workloads, ", "),
		Long: `Run one workload (see BENCHMARKS.md) and print its figures.

Without --store the bench drives the server named by --server. With --store it starts a
server with a local worker in its own process on a fresh store: "sqlite" (a temp directory)
or a PostgreSQL URL, where it creates a scratch database and drops it afterwards. With
--servers N it starts N "stint server" processes instead (several need PostgreSQL) and
--workers "stint worker" processes spread over them.

Scale (BENCHMARKS.md, "Scale"): --seed-finished N fills the fresh PostgreSQL store with a
history of N finished runs first; "plans" prints the plans of the hot statements on such a
store; "agents" runs --agents simulated agents over HTTP and reads the servers' CPU and
memory from /proc.

"spawn" measures this machine's own limit for starting and reaping processes from Go,
without stint (os/exec, os.StartProcess, syscall.ForkExec, back to back); "exec" measures it
just before its jobs run and prints the share of it stint reached.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Store == "" {
				cfg.Server, _ = cmd.Flags().GetString("server")
				cfg.Token, _ = cmd.Flags().GetString("token")
			}
			if cfg.N < 0 {
				return fmt.Errorf("--n: must not be negative, got %d", cfg.N)
			}
			if cfg.InsertWorkers < 1 {
				return fmt.Errorf("--insert-workers: must be at least 1, got %d", cfg.InsertWorkers)
			}
			if cfg.Insert != InsertBatch && cfg.Insert != InsertStream {
				return fmt.Errorf("--insert: must be %s or %s, got %q", InsertBatch, InsertStream, cfg.Insert)
			}
			if cfg.Workers < 0 {
				return fmt.Errorf("--workers: must not be negative, got %d", cfg.Workers)
			}
			if cfg.Servers < 0 || cfg.Agents < 1 || cfg.Hold < 0 || cfg.Hold > 1000 {
				return fmt.Errorf("--servers must not be negative, --agents at least 1 and --hold between 0 and 1000")
			}
			if cfg.Servers > 0 && cfg.Store == "" {
				return fmt.Errorf("--servers: needs --store (the bench starts the servers)")
			}
			if len(cfg.PIDs) > 0 && cfg.Server == "" {
				return fmt.Errorf("--pid: goes with --server (the bench knows the processes it starts)")
			}
			if args[0] == "spawn" {
				if !cmd.Flags().Changed("slots") {
					cfg.Slots = 0 // spawn's own default: 4 per CPU
				} else if cfg.Slots < 1 {
					return fmt.Errorf("--slots: must be at least 1, got %d", cfg.Slots)
				}
			}
			if args[0] == "plans" && !cmd.Flags().Changed("seed-finished") {
				cfg.SeedFinished = DefaultSeedPlans
			}
			if cfg.SeedFinished < 0 {
				return fmt.Errorf("--seed-finished: must not be negative, got %d", cfg.SeedFinished)
			}
			if cfg.Producers < 1 {
				return fmt.Errorf("--producers: must be at least 1, got %d", cfg.Producers)
			}
			if profile != "" {
				cfg.ServerProfile = profile
				f, err := os.Create(profile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			// On a terminal, a progress bar per phase on stderr (not with --json).
			var bars *progress.Phases
			if !asJSON && progress.Shown(cmd.ErrOrStderr(), os.Getenv) {
				bars = progress.NewPhases(cmd.ErrOrStderr())
				cfg.Progress = bars.Update
			}
			res, err := Run(cmd.Context(), args[0], cfg)
			bars.Finish()
			if err != nil {
				return err
			}
			if memProfile != "" {
				if err := writeHeapProfile(memProfile); err != nil {
					return fmt.Errorf("--memprofile: %w", err)
				}
			}
			if asJSON {
				return res.PrintJSON(cmd.OutOrStdout())
			}
			res.Print(cmd.OutOrStdout())
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Store, "store", "", `start a server on a fresh store: "sqlite" or a postgres:// URL`)
	fl.IntVar(&cfg.N, "n", 0, "jobs (drain, scheduled, cron, exec), runs (dag), queued runs (plans) or processes per way (spawn); 0: the workload's own (drain 100000, scheduled 10000, cron 10000, exec 10000, spawn 5000, dag 10000, plans 100000)")
	fl.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long producers submit (steady), or the window measured (agents)")
	fl.IntVar(&cfg.Producers, "producers", 16, "concurrent submitters (steady)")
	fl.IntVar(&cfg.Slots, "slots", 1000, "worker slots when the bench starts the server (split among --workers); spawn: processes started at once (default 4 per CPU)")
	fl.IntVar(&cfg.Workers, "workers", 0, "run the workers as this many agents in the bench's process, speaking the worker protocol over HTTP, instead of the server's local worker (with --server: default 1)")
	fl.IntVar(&cfg.Servers, "servers", 0, "run the server as this many processes (stint server) on the fresh store (more than one: PostgreSQL), workers and submissions spread over them; needs --workers (agents: default 1)")
	fl.IntVar(&cfg.Agents, "agents", DefaultAgents, "simulated agents (agents)")
	fl.IntVar(&cfg.Hold, "hold", 0, "leases each simulated agent keeps running, listed in its heartbeats (agents; 0: idle agents)")
	fl.IntSliceVar(&cfg.PIDs, "pid", nil, "with --server: process ids of the servers, whose CPU the workloads (and memory the agents workload) read from /proc")
	fl.IntVar(&cfg.BatchSize, "batch-size", 1000, "jobs per batch insert")
	// --batch was this flag's first spelling; stint submit --batch names a file.
	fl.IntVar(&cfg.BatchSize, "batch", 1000, "")
	_ = fl.MarkDeprecated("batch", "use --batch-size")
	fl.IntVar(&cfg.InsertWorkers, "insert-workers", 4, "batch inserts in flight at once (drain, scheduled, exec); with --insert stream, streams")
	fl.StringVar(&cfg.Insert, "insert", InsertBatch, "how drain, scheduled and exec insert: batch (POST /v1/jobs/batch, --batch-size jobs a request) or stream (POST /v1/jobs/stream)")
	fl.DurationVar(&cfg.Lead, "lead", 5*time.Second, "how far ahead the instant is (scheduled, cron)")
	fl.StringVar(&cfg.Shape, "shape", ShapeFanout, "DAG shape (dag): fanout (1 -> n-2 -> 1) or chain (n in a line)")
	fl.StringVar(&cfg.Handler, "handler", "", "handler kind of the jobs, run by the bench's recording handler (default noop; with --server a kind of the bench's own)")
	fl.Float64Var(&cfg.CPU, "cpu", 0, "CPUs each job of drain and steady asks for (0: none), to measure placement")
	fl.BoolVar(&cfg.FullAnswers, "full-answers", false, "batch inserts ask for the full answer (every job and run), not the minimal one (ids)")
	fl.IntVar(&cfg.SeedFinished, "seed-finished", 0, "before the workload, fill the fresh PostgreSQL store with this many finished runs, a big store's history (plans: 1000000 unless given; see BENCHMARKS.md, Scale)")
	fl.DurationVar(&cfg.Retention, "retain-runs", 0, "the server deletes finished runs this long after they finished, while the workload runs (0: keeps them; see BENCHMARKS.md, Retention)")
	fl.DurationVar(&cfg.RetentionPause, "retain-pause", 0, "with --retain-runs, the server's pause between delete batches of 500 runs (0: its default, 100ms), bounding the delete rate")
	// --retention and --retention-pause were these flags' first spellings; the server's own
	// flags, which they set, are --retain-runs and --retain-pause.
	fl.DurationVar(&cfg.Retention, "retention", 0, "")
	fl.DurationVar(&cfg.RetentionPause, "retention-pause", 0, "")
	_ = fl.MarkDeprecated("retention", "use --retain-runs")
	_ = fl.MarkDeprecated("retention-pause", "use --retain-pause")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	fl.StringVar(&memProfile, "memprofile", "", "write a heap profile of the bench process (with --store: server and worker too) to this file once the workload ended: every allocation since the process began, sampled (go tool pprof -sample_index=alloc_objects)")
	fl.StringVar(&profile, "cpuprofile", "", "write a CPU profile of the bench process (with --store: server and worker too) to this file, and of each server process the bench starts (--servers, agents) to this file.s1, .s2...")
	return cmd
}

// writeHeapProfile writes the process's heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
