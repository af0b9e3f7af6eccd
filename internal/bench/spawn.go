package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

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

// spawned is one way's spawn measurement with what the machine's CPUs did meanwhile, and
// the bench process's share: its forks and waits, without the processes' own work.
type spawned struct {
	spawn.Result
	machine machineUse
	self    time.Duration
}

// cpuPerProcess is the machine's CPU time per process started and reaped, in µs: the bench's
// fork and wait, and the process's own start, run and exit in the kernel.
func (s spawned) cpuPerProcess() float64 { return s.perProcess(s.machine.busy) }

// perProcess is d per process started, in µs.
func (s spawned) perProcess(d time.Duration) float64 {
	return float64(d.Microseconds()) / float64(max(s.Processes, 1))
}

// measureSpawn runs spawn.Measure with sc and reads the machine's CPU use around each way.
// progress, when not nil, is called after each way with how many ran.
func measureSpawn(ctx context.Context, sc spawn.Config, progress func(done int)) ([]spawned, error) {
	last, err := readMachine()
	if err != nil {
		return nil, err
	}
	lastSelf, err := readProc(os.Getpid())
	if err != nil {
		return nil, err
	}
	var out []spawned
	var sampleErr error
	_, err = spawn.Measure(ctx, sc, func(r spawn.Result) {
		now, err := readMachine()
		self, selfErr := readProc(os.Getpid())
		if err = errors.Join(err, selfErr); err != nil {
			sampleErr = err
		}
		out = append(out, spawned{Result: r, machine: machineBetween(last, now), self: self.cpu - lastSelf.cpu})
		last, lastSelf = now, self
		if progress != nil {
			progress(len(out))
		}
	})
	if err == nil {
		err = sampleErr
	}
	return out, err
}

// runSpawn: the machine's own limit for starting and reaping processes from Go, without
// stint: N processes of `true` each way of spawn.Ways, back to back, and the machine's CPU
// time per process each way.
func runSpawn(ctx context.Context, cfg Config) (*Result, error) {
	sc := spawnConfig(cfg, cfg.N)
	res := &Result{Workload: "spawn", Store: "none: processes started by the bench itself", Params: map[string]string{
		"n":           strconv.Itoa(sc.N),
		"concurrency": strconv.Itoa(sc.Concurrency),
		"command":     "true",
	}}
	results, err := measureSpawn(ctx, sc, func(done int) {
		if cfg.Progress != nil {
			cfg.Progress("spawn", done, len(spawn.Ways))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("bench spawn: %w", err)
	}
	for _, r := range results {
		res.add(string(r.Way), r.PerSecond(), "processes/s")
		res.add(string(r.Way)+": machine CPU per process", r.cpuPerProcess(), "µs")
		res.add(string(r.Way)+": machine CPU", r.machine.share, "% of all CPUs")
		res.add(string(r.Way)+": bench process CPU per process", r.perProcess(r.self), "µs")
	}
	best := spawn.Best(results)
	res.Params["best"] = string(best.Way)
	res.add("machine limit (best way)", best.PerSecond(), "processes/s")
	return res, nil
}

// machineLimit measures, for exec, the machine's limit just before the workload: spawn with
// as many processes per way as the workload runs (at most spawnLimitN), and returns the best
// way's result.
func machineLimit(ctx context.Context, cfg Config) (spawned, error) {
	results, err := measureSpawn(ctx, spawnConfig(Config{}, min(cfg.N, spawnLimitN)), nil)
	if err != nil {
		return spawned{}, fmt.Errorf("measure the machine's limit (as bench spawn): %w", err)
	}
	return spawn.Best(results), nil
}

// spawnLimitN bounds the processes per way that exec's measurement of the machine's limit
// starts.
const spawnLimitN = 5000
