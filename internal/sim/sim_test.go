package sim

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "replay this seed alone, printing its whole trace")
	seedsFlag = flag.Int("sim.seeds", 0, "how many seeds TestSim runs (default: raceSeeds under -race, shortSeeds with -short, else longSeeds; env STINT_SIM_SEEDS)")
	firstFlag = flag.Uint64("sim.first", 1, "the first seed TestSim runs")
	reqsFlag  = flag.Int("sim.requests", 0, "client requests per seed (default DefaultRequests)")
)

// Seeds TestSim runs by default; see the package doc for how long they take. Under the race
// detector (CI's go test -race ./...) a seed costs about ten times as much.
const (
	shortSeeds = 100
	longSeeds  = 200
	raceSeeds  = 8
)

// template is an empty, migrated database that each seed starts from a copy of: migrating
// a new one takes longer than a short seed's whole run.
var template struct {
	once sync.Once
	data []byte
	err  error
}

// emptyDB returns the bytes of an empty, migrated database.
func emptyDB(t *testing.T) []byte {
	t.Helper()
	template.once.Do(func() {
		dir, err := os.MkdirTemp("", "stint-sim-template")
		if err != nil {
			template.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "stint.db")
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
		if err != nil {
			template.err = err
			return
		}
		if err := st.Close(); err != nil {
			template.err = err
			return
		}
		template.data, template.err = os.ReadFile(path)
	})
	if template.err != nil {
		t.Fatalf("template database: %v", template.err)
	}
	return template.data
}

// openAt returns a Config.Open for a database at dir/stint.db, a copy of the template.
func openAt(t *testing.T, dir string) func(context.Context) (store.Store, error) {
	path := filepath.Join(dir, "stint.db")
	if err := os.WriteFile(path, emptyDB(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) (store.Store, error) {
		// synchronous=OFF: a process crash loses nothing committed (only an OS crash
		// would), and the simulation crashes processes only.
		st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Synchronous: "OFF", Readers: 1})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
}

// runSeed runs one seed in a directory of its own under base.
func runSeed(t *testing.T, base string, seed uint64, cfg Config) *Result {
	t.Helper()
	dir := filepath.Join(base, strconv.FormatUint(seed, 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg.Open = openAt(t, dir)
	if cfg.Requests == 0 {
		cfg.Requests = *reqsFlag
	}
	return Run(context.Background(), seed, cfg)
}

// report words a failed seed: what broke, how to replay it, and the trace's last lines.
func report(r *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %v\nreplay: go test ./internal/sim -run 'TestSim$' -seed %d\nlast %d lines of its trace:\n",
		r.Seed, r.Err, r.Seed, len(r.Tail))
	for _, l := range r.Tail {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

func seedCount(t *testing.T) int {
	if *seedsFlag > 0 {
		return *seedsFlag
	}
	if v := os.Getenv("STINT_SIM_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("STINT_SIM_SEEDS=%q: %v", v, err)
		}
		return n
	}
	switch {
	case raceDetector:
		return raceSeeds
	case testing.Short():
		return shortSeeds
	}
	return longSeeds
}

// TestSim runs many seeds, each checking the invariants after every step; with -seed it
// replays one seed and prints its whole trace.
func TestSim(t *testing.T) {
	base := t.TempDir()
	if *seedFlag != 0 {
		var trace strings.Builder
		r := runSeed(t, base, *seedFlag, Config{Trace: &trace})
		t.Logf("trace of seed %d:\n%s", *seedFlag, trace.String())
		t.Logf("stats: %+v", r.Stats)
		if r.Err != nil {
			t.Fatal(report(r))
		}
		return
	}
	n := seedCount(t)
	first := *firstFlag
	var (
		next     atomic.Uint64
		failures atomic.Int32
		mu       sync.Mutex
		total    Stats
		wg       sync.WaitGroup
	)
	next.Store(first)
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for failures.Load() < 3 {
				seed := next.Add(1) - 1
				if seed >= first+uint64(n) {
					return
				}
				r := runSeed(t, base, seed, Config{})
				mu.Lock()
				add(&total, r.Stats)
				mu.Unlock()
				if r.Err != nil {
					failures.Add(1)
					t.Error(report(r))
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	t.Logf("%d seeds (from %d) in %s: %.1f seeds/s; %+v", n, first, took.Round(time.Millisecond), float64(n)/took.Seconds(), total)
}

func add(total *Stats, s Stats) {
	total.Events += s.Events
	total.SimTime += s.SimTime
	total.Writes += s.Writes
	total.Crashes += s.Crashes
	total.WorkerDeaths += s.WorkerDeaths
	total.Runs += s.Runs
	total.CronRuns += s.CronRuns
	total.Accepted += s.Accepted
	total.Completions += s.Completions
	total.Refused += s.Refused
	total.Duplicates += s.Duplicates
	total.Lost += s.Lost
	total.LateFires += s.LateFires
}

// A seed is its whole run: the same seed writes the same trace.
func TestSimDeterministic(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	var total Stats
	for _, seed := range []uint64{7, 2} {
		a := runSeed(t, base, seed, Config{})
		b := runSeed(t, base, seed, Config{})
		if a.Err != nil {
			t.Fatal(report(a))
		}
		if a.Hash != b.Hash || a.Lines != b.Lines {
			t.Fatalf("seed %d: two runs differ: %d lines (%s) and %d lines (%s)", seed, a.Lines, a.Hash, b.Lines, b.Hash)
		}
		add(&total, a.Stats)
	}
	// The seeds go through the paths that could make a run differ: crashes, cron fires (the
	// engine's ids), duplicated messages, retries.
	if total.Crashes == 0 || total.CronRuns == 0 || total.Duplicates == 0 || total.Refused == 0 {
		t.Fatalf("the seeds miss a path: %+v", total)
	}
}
