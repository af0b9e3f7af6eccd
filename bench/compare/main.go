// Command compare runs the workloads of `stint bench` (drain, steady, scheduled, exec)
// against River (a job queue on PostgreSQL) and Asynq (a job queue on Redis), so that their
// figures can be set beside stint's. It is a module of its own, outside stint's build; its
// README says how to run it and how to interleave its runs with `stint bench`.
//
//	go run . river drain --db postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
//	go run . asynq steady --redis 127.0.0.1:6390 --json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// config is one invocation: the system, the workload and their settings.
type config struct {
	system, workload string

	db                 string // PostgreSQL server (any database on it): River's scratch database is made there
	redis              string // Redis address for Asynq
	redisDB            int    // the Redis database Asynq uses; flushed before and after the run
	n                  int
	batch              int
	insertWorkers      int
	producers          int
	duration           time.Duration
	lead               time.Duration
	workers            int           // River: the queue's MaxWorkers; Asynq: Concurrency
	fetchCooldown      time.Duration // River: FetchCooldown
	fetchPollInterval  time.Duration // River: FetchPollInterval
	insertMode         string        // River: "fast" (InsertManyFast, COPY) or "many" (InsertMany)
	pool               int           // River: pgxpool MaxConns; Asynq: Redis PoolSize
	taskCheckInterval  time.Duration // Asynq: TaskCheckInterval
	delayedCheckPeriod time.Duration // Asynq: DelayedTaskCheckInterval
	pgSample           time.Duration // River: sample pg_stat_activity this often (0: off)
	jsonOut            bool
	cpuprofile         string
	logger             *slog.Logger
}

// riverExecWorkers is River's MaxWorkers for exec unless --workers says otherwise.
const riverExecWorkers = 100

var (
	systems   = []string{"river", "asynq"}
	workloads = []string{"drain", "steady", "scheduled", "exec"}
	// defaultN is each workload's size when --n is not given, as in `stint bench`.
	defaultN = map[string]int{"drain": 100000, "scheduled": 10000, "exec": 10000}
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	if cfg.cpuprofile != "" {
		f, err := os.Create(cfg.cpuprofile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := runWorkload(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	if cfg.jsonOut {
		return res.printJSON(stdout)
	}
	res.print(stdout)
	return nil
}

// parseArgs reads `SYSTEM WORKLOAD [flags]`.
func parseArgs(args []string, stderr io.Writer) (*config, error) {
	usage := fmt.Sprintf("usage: compare {%s} {%s} [flags]", strings.Join(systems, "|"), strings.Join(workloads, "|"))
	if len(args) < 2 {
		return nil, errors.New(usage)
	}
	cfg := &config{system: args[0], workload: args[1]}
	if !slices.Contains(systems, cfg.system) {
		return nil, fmt.Errorf("system %q: want one of %s", cfg.system, strings.Join(systems, ", "))
	}
	if !slices.Contains(workloads, cfg.workload) {
		return nil, fmt.Errorf("workload %q: want one of %s", cfg.workload, strings.Join(workloads, ", "))
	}
	fs := flag.NewFlagSet("compare "+cfg.system+" "+cfg.workload, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.db, "db", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "river: PostgreSQL URL; a scratch database is created on its server and dropped after the run")
	fs.StringVar(&cfg.redis, "redis", "127.0.0.1:6390", "asynq: Redis address")
	fs.IntVar(&cfg.redisDB, "redis-db", 0, "asynq: Redis database number, flushed before and after the run")
	fs.IntVar(&cfg.n, "n", 0, "jobs for drain, scheduled and exec (default 100000, 10000, 10000)")
	fs.IntVar(&cfg.batch, "batch", 1000, "jobs per batch insert (river: one InsertMany call; asynq: one Enqueue after another)")
	fs.IntVar(&cfg.insertWorkers, "insert-workers", 4, "batch inserts in flight at once")
	fs.IntVar(&cfg.producers, "producers", 16, "steady: submitters, one job per insert call")
	fs.DurationVar(&cfg.duration, "duration", 30*time.Second, "steady: how long the producers submit")
	fs.DurationVar(&cfg.lead, "lead", 5*time.Second, "scheduled: how far ahead the instant is")
	fs.IntVar(&cfg.workers, "workers", 1000, "river: the queue's MaxWorkers (exec: 100 unless given); asynq: the server's Concurrency")
	fs.DurationVar(&cfg.fetchCooldown, "fetch-cooldown", 10*time.Millisecond, "river: FetchCooldown, also the least time between two insert notifications of the queue (River's default 100ms, minimum 1ms)")
	fs.DurationVar(&cfg.fetchPollInterval, "fetch-poll-interval", 50*time.Millisecond, "river: FetchPollInterval (River's default 1s)")
	fs.StringVar(&cfg.insertMode, "insert", "fast", "river: batch insert call, fast (InsertManyFast, COPY FROM) or many (InsertMany, returns the rows)")
	fs.IntVar(&cfg.pool, "pool", 20, "river: pgxpool MaxConns; asynq: Redis PoolSize")
	fs.DurationVar(&cfg.taskCheckInterval, "task-check-interval", 10*time.Millisecond, "asynq: TaskCheckInterval, the wait after finding every queue empty (Asynq's default 1s)")
	fs.DurationVar(&cfg.delayedCheckPeriod, "delayed-check-interval", 10*time.Millisecond, "asynq: DelayedTaskCheckInterval, how often due scheduled tasks are moved to pending (Asynq's default 5s)")
	fs.DurationVar(&cfg.pgSample, "pg-sample", 0, "river: sample pg_stat_activity of the scratch database this often and print, on stderr, what its backends were doing (0: off)")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print one JSON object instead of the table")
	fs.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write a CPU profile of this process to the file")
	if err := fs.Parse(args[2:]); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q; %s", fs.Args(), usage)
	}
	if cfg.n == 0 {
		cfg.n = defaultN[cfg.workload]
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.system == "river" && cfg.workload == "exec" && !set["workers"] {
		// 1000 concurrent fork/execs starve River's own database calls on a 2-core
		// machine: fetches and completions time out (BENCHMARKS.md, issue 15).
		cfg.workers = riverExecWorkers
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"--n", cfg.n > 0 || cfg.workload == "steady"},
		{"--batch", cfg.batch > 0},
		{"--insert-workers", cfg.insertWorkers > 0},
		{"--producers", cfg.producers > 0},
		{"--duration", cfg.duration > 0},
		{"--lead", cfg.lead > 0},
		{"--workers", cfg.workers > 0},
		{"--fetch-cooldown", cfg.fetchCooldown >= time.Millisecond},
		{"--fetch-poll-interval", cfg.fetchPollInterval >= time.Millisecond},
		{"--insert", cfg.insertMode == "fast" || cfg.insertMode == "many"},
		{"--pool", cfg.pool > 0},
		{"--task-check-interval", cfg.taskCheckInterval > 0},
		{"--delayed-check-interval", cfg.delayedCheckPeriod > 0},
		{"--pg-sample", cfg.pgSample >= 0},
	} {
		if !c.ok {
			return nil, fmt.Errorf("%s: value out of range (see -h)", c.name)
		}
	}
	cfg.logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return cfg, nil
}
