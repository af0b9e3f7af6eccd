package bench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"

	"github.com/stint-dev/stint/internal/spawn"
)

// spawnPerCPU is how many processes spawn starts at once per CPU unless Config.Slots says.
const spawnPerCPU = 4

// spawnConfig is the spawn measurement for n processes per way: Config.Slots at once, or
// spawnPerCPU per CPU.
func spawnConfig(cfg Config, n int) spawn.Config {
	c := spawn.Config{N: n, Concurrency: cfg.Slots}
	if c.Concurrency <= 0 {
		c.Concurrency = spawnPerCPU * runtime.NumCPU()
	}
	return c
}

// runSpawn: the machine's own limit for starting and reaping processes from Go, without
// stint: N processes of `true` each way of spawn.Ways, back to back.
func runSpawn(ctx context.Context, cfg Config) (*Result, error) {
	sc := spawnConfig(cfg, cfg.N)
	res := &Result{Workload: "spawn", Store: "none: processes started by the bench itself", Params: map[string]string{
		"n":           strconv.Itoa(sc.N),
		"concurrency": strconv.Itoa(sc.Concurrency),
		"command":     "true",
	}}
	done := 0
	results, err := spawn.Measure(ctx, sc, func(spawn.Result) {
		done++
		if cfg.Progress != nil {
			cfg.Progress("spawn", done, len(spawn.Ways))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("bench spawn: %w", err)
	}
	for _, r := range results {
		res.add(string(r.Way), r.PerSecond(), "processes/s")
	}
	best := spawn.Best(results)
	res.Params["best"] = string(best.Way)
	res.add("machine limit (best way)", best.PerSecond(), "processes/s")
	return res, nil
}

// machineLimit measures, for exec, the machine's limit just before the workload: spawn with
// as many processes per way as the workload runs (at most spawnLimitN), and returns the best
// way's result.
func machineLimit(ctx context.Context, cfg Config) (spawn.Result, error) {
	results, err := spawn.Measure(ctx, spawnConfig(Config{}, min(cfg.N, spawnLimitN)), nil)
	if err != nil {
		return spawn.Result{}, fmt.Errorf("measure the machine's limit (as bench spawn): %w", err)
	}
	return spawn.Best(results), nil
}

// spawnLimitN bounds the processes per way that exec's measurement of the machine's limit
// starts.
const spawnLimitN = 5000
