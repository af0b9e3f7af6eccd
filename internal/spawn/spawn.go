// Package spawn measures how fast this machine starts and reaps processes from Go: the
// limit against which `stint bench exec` is read. It starts N processes of one executable
// (`true` by default) from a number of goroutines at once, each waiting for its process
// before it starts the next, three ways back to back: os/exec (exec.Command(...).Run, as
// most Go programs do), os.StartProcess and Process.Wait, and syscall.ForkExec and
// syscall.Wait4 (the cheapest fork and exec Go offers without cgo).
package spawn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Way is one way of starting and reaping a process.
type Way string

// The ways Measure compares, in the order it runs them.
const (
	OSExec       Way = "os/exec"
	StartProcess Way = "os.StartProcess"
	ForkExec     Way = "syscall.ForkExec"
)

// Ways lists the ways in the order Measure runs them.
var Ways = []Way{OSExec, StartProcess, ForkExec}

// Config is what Measure runs.
type Config struct {
	N           int    // processes per way; must be positive
	Concurrency int    // goroutines starting processes at once; must be positive
	Path        string // the executable, looked up in PATH; "" means "true"
}

// Result is one way's measurement.
type Result struct {
	Way         Way
	Processes   int
	Concurrency int
	Elapsed     time.Duration
}

// PerSecond is the processes started and reaped per second.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Processes) / r.Elapsed.Seconds()
}

// Best is the way that started processes the fastest, the machine's limit as far as Go goes:
// of Results, or of anything that says its rate as a Result does; the zero value when rs is
// empty.
func Best[R interface{ PerSecond() float64 }](rs []R) R {
	var b R
	best := 0.0
	for _, r := range rs {
		if v := r.PerSecond(); v > best {
			b, best = r, v
		}
	}
	return b
}

// Measure runs cfg.N processes each way of Ways, one way after the other, and returns how
// long each took. progress, when not nil, is called after each way with its result.
func Measure(ctx context.Context, cfg Config, progress func(Result)) ([]Result, error) {
	if cfg.N <= 0 {
		return nil, fmt.Errorf("spawn: N must be positive, got %d", cfg.N)
	}
	if cfg.Concurrency <= 0 {
		return nil, fmt.Errorf("spawn: Concurrency must be positive, got %d", cfg.Concurrency)
	}
	name := cfg.Path
	if name == "" {
		name = "true"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("spawn: %w", err)
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("spawn: %w", err)
	}
	defer devNull.Close()
	starts := startFuncs(path, name, os.Environ(), devNull)
	results := make([]Result, 0, len(Ways))
	for _, w := range Ways {
		r, err := run(ctx, w, cfg.N, cfg.Concurrency, starts[w])
		if err != nil {
			return results, err
		}
		results = append(results, r)
		if progress != nil {
			progress(r)
		}
	}
	return results, nil
}

// run starts n processes with start from conc goroutines and times it.
func run(ctx context.Context, w Way, n, conc int, start func() error) (Result, error) {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	begin := time.Now()
	for range min(conc, n) {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				if err := start(); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	if first != nil {
		return Result{}, fmt.Errorf("spawn %s: %w", w, first)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("spawn %s: %w", w, err)
	}
	return Result{Way: w, Processes: n, Concurrency: conc, Elapsed: elapsed}, nil
}

// startFuncs returns, for each way, a function that starts the executable at path (argv[0]
// name) with env and its standard streams on devNull, waits for it, and fails unless it
// exited 0.
func startFuncs(path, name string, env []string, devNull *os.File) map[Way]func() error {
	return map[Way]func() error{
		OSExec: func() error {
			cmd := exec.Command(path)
			cmd.Env = env
			return cmd.Run()
		},
		StartProcess: func() error {
			p, err := os.StartProcess(path, []string{name}, &os.ProcAttr{Env: env, Files: []*os.File{devNull, devNull, devNull}})
			if err != nil {
				return err
			}
			st, err := p.Wait()
			if err != nil {
				return err
			}
			if !st.Success() {
				return errors.New(st.String())
			}
			return nil
		},
		ForkExec: func() error {
			fd := devNull.Fd()
			pid, err := syscall.ForkExec(path, []string{name}, &syscall.ProcAttr{Env: env, Files: []uintptr{fd, fd, fd}})
			if err != nil {
				return err
			}
			var ws syscall.WaitStatus
			for {
				_, err = syscall.Wait4(pid, &ws, 0, nil)
				if err != syscall.EINTR {
					break
				}
			}
			if err != nil {
				return err
			}
			if !ws.Exited() || ws.ExitStatus() != 0 {
				return fmt.Errorf("%s: wait status %#x", path, uint32(ws))
			}
			return nil
		},
	}
}
