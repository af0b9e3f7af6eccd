package app

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/stint-dev/stint/internal/engine"
)

// Retention is how long the server keeps history and how fast it deletes what is past it
// (the --retain-* flags; README "Configuration"). The zero value keeps everything.
type Retention struct {
	Policy engine.RetentionPolicy
	Batch  int           // rows per delete transaction (0: the engine's default)
	Pause  time.Duration // between two batches (0: the engine's default)
	// Interval is how often it looks again once nothing is past retention (0: the
	// engine's default, a minute); the bench shortens it.
	Interval time.Duration
}

// Defaults of the --retain-* flags.
const (
	// DefaultRetainRuns: a month of history answers "what happened last month" and, at the
	// shipped heartbeat example's 8,640 runs a day, bounds a job to ~260,000 runs.
	DefaultRetainRuns = 30 * 24 * time.Hour
	// DefaultRetainRunsKeep: a job that runs monthly or was stopped keeps its last runs,
	// the ones a user looks at, however old.
	DefaultRetainRunsKeep = 10
	// DefaultRetainWorkers: a departed worker stays listed (drained or lost) for a day,
	// long enough to notice what left overnight.
	DefaultRetainWorkers = 24 * time.Hour
	// DefaultRetainBatch and DefaultRetainPause pace the deletes: at most 5,000 runs a
	// second, in transactions short enough that dispatch does not notice them
	// (BENCHMARKS.md, "Retention").
	DefaultRetainBatch = 500
	DefaultRetainPause = 100 * time.Millisecond
)

// retentionFlags are the flags of Retention.
type retentionFlags struct {
	runs, workers, pause time.Duration
	keep, max, batch     int
}

func (f *retentionFlags) register(fl *pflag.FlagSet) {
	fl.DurationVar(&f.runs, "retain-runs", DefaultRetainRuns,
		"finished runs, with their attempts and output, are deleted this long after they finished (0: kept for ever)")
	fl.IntVar(&f.keep, "retain-runs-keep", DefaultRetainRunsKeep,
		"each job keeps its newest N finished runs however old (--retain-runs spares them)")
	fl.IntVar(&f.max, "retain-runs-max", 0,
		"each job keeps at most its newest N finished runs, however recent (0: no cap)")
	fl.DurationVar(&f.workers, "retain-workers", DefaultRetainWorkers,
		"workers gone (drained or lost) are removed this long after their last heartbeat (0: kept for ever)")
	fl.IntVar(&f.batch, "retain-batch", DefaultRetainBatch, "rows one delete transaction of retention takes")
	fl.DurationVar(&f.pause, "retain-pause", DefaultRetainPause, "pause between two delete batches while history is past retention")
}

// config checks the flags and returns the retention they set.
func (f *retentionFlags) config() (Retention, error) {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"retain-runs", f.runs}, {"retain-workers", f.workers}} {
		if d.v < 0 {
			return Retention{}, fmt.Errorf("--%s: must not be negative (0: kept for ever), got %s", d.name, d.v)
		}
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"retain-runs-keep", f.keep}, {"retain-runs-max", f.max}} {
		if c.v < 0 {
			return Retention{}, fmt.Errorf("--%s: must not be negative, got %d", c.name, c.v)
		}
	}
	if f.batch < 1 {
		return Retention{}, fmt.Errorf("--retain-batch: must be at least 1, got %d", f.batch)
	}
	if f.pause <= 0 {
		return Retention{}, fmt.Errorf("--retain-pause: must be positive, got %s", f.pause)
	}
	return Retention{
		Policy: engine.RetentionPolicy{Runs: f.runs, KeepPerJob: f.keep, MaxPerJob: f.max, Workers: f.workers},
		Batch:  f.batch, Pause: f.pause,
	}, nil
}
