package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on Linux).
const userHZ = 100

// procCPU is the CPU time (user and system) a process has used so far, from /proc.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces: count from the
	// last ')'. Fields 14 and 15 are utime and stime.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 13", pid, len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: cpu time %q: %w", pid, s, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuWatch measures the CPU the store's server processes and this process use over a
// window. A server process that appears during the window counts from zero; one that
// ends during it is lost (the pools keep their connections, so few do).
type cpuWatch struct {
	s      system
	before map[int]time.Duration
	self   time.Duration
}

func startCPUWatch(ctx context.Context, s system) (*cpuWatch, error) {
	w := &cpuWatch{s: s}
	var err error
	if w.before, err = w.sample(ctx); err != nil {
		return nil, err
	}
	if w.self, err = procCPU(os.Getpid()); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *cpuWatch) sample(ctx context.Context) (map[int]time.Duration, error) {
	pids, err := w.s.serverPIDs(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		if c, err := procCPU(pid); err == nil { // a backend may have just exited
			out[pid] = c
		}
	}
	return out, nil
}

// stop returns the CPU the servers and this process used since the start.
func (w *cpuWatch) stop(ctx context.Context) (servers, self time.Duration, err error) {
	selfNow, err := procCPU(os.Getpid())
	if err != nil {
		return 0, 0, err
	}
	after, err := w.sample(ctx)
	if err != nil {
		return 0, 0, err
	}
	for pid, c := range after {
		servers += c - w.before[pid]
	}
	return servers, selfNow - w.self, nil
}
