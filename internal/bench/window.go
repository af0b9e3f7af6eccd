package bench

import (
	"context"
	"os"
	"runtime/metrics"
	"time"
)

// cpuWindow is the CPU time spent over a workload's measured window, split by process: the
// server processes the bench started (or was given with --pid), the bench's own process (the
// server and its local worker too when the server runs in it, the bench's workers when it
// runs them), and the PostgreSQL backends serving the store; and the whole machine's, which
// adds everything else that ran (exec's commands, the kernel's work for them). Each is read
// from /proc at the window's two ends.
type cpuWindow struct {
	pids     []int
	backends *backendWatch // nil unless the store is the bench's PostgreSQL database
	// statements: pg_stat_statements counts the window's statements (the backends' server
	// loads it); stmts is what it counted, read at stop.
	statements bool
	stmts      []Statement
	start      time.Time
	procs      []procSample
	self       procSample
	machine    machineSample
	db         map[int]procSample
	polls      int64      // the runner's depth polls when the window opened; after stop, in it
	allocs     heapAllocs // the bench process's allocations so far; after stop, in the window

	window     time.Duration // set by stop, as the samples below
	procsEnd   []procSample
	selfEnd    procSample
	machineEnd machineSample
	dbEnd      map[int]procSample
}

// startCPU opens the window: call it just before the work measured starts.
func (r *runner) startCPU(ctx context.Context) (*cpuWindow, error) {
	backends, err := newBackendWatch(ctx, r.storeURL)
	if err != nil {
		return nil, err
	}
	w := &cpuWindow{pids: r.pids, backends: backends}
	if backends != nil {
		w.statements = resetStatements(ctx, backends.conn)
	}
	if w.db, err = backends.sample(ctx); err != nil {
		w.close()
		return nil, err
	}
	if w.procs, err = sampleAll(r.pids); err != nil {
		w.close()
		return nil, err
	}
	if w.self, err = readProc(os.Getpid()); err != nil {
		w.close()
		return nil, err
	}
	if w.machine, err = readMachine(); err != nil {
		w.close()
		return nil, err
	}
	w.polls = r.polls.Load()
	w.allocs = readHeapAllocs()
	w.start = time.Now()
	return w, nil
}

// stop closes the window: call it as soon as the work measured ended, before the bench reads
// the runs.
func (w *cpuWindow) stop(ctx context.Context, r *runner) error {
	defer w.close()
	w.window = time.Since(w.start)
	w.polls = r.polls.Load() - w.polls
	w.allocs = readHeapAllocs().since(w.allocs)
	var err error
	if w.selfEnd, err = readProc(os.Getpid()); err != nil {
		return err
	}
	if w.machineEnd, err = readMachine(); err != nil {
		return err
	}
	if w.procsEnd, err = sampleAll(w.pids); err != nil {
		return err
	}
	if w.dbEnd, err = w.backends.sample(ctx); err != nil {
		return err
	}
	if w.statements {
		w.stmts, err = readStatements(ctx, w.backends.conn)
	}
	return err
}

// report adds the stopped window's figures to r's result: each side's share of a core over
// the window and, when runs is above 0, its CPU per run. what says what the window spans.
func (w *cpuWindow) report(r *runner, runs int, what string) {
	res := r.res
	res.Params["CPU window"] = what
	res.Params["bench process"] = r.benchProcess
	res.add("CPU window", w.window.Seconds(), "s")
	res.add("progress polls in the window", float64(w.polls), "requests")
	w.eachSide(func(name string, used time.Duration) {
		res.add(name+" CPU", cpuShare(used, w.window), "% of a core")
		if runs > 0 {
			res.add(name+" CPU per run", float64(used.Microseconds())/float64(runs), "µs")
		}
	})
	m := machineBetween(w.machine, w.machineEnd)
	res.add("machine CPU", m.share, "% of all CPUs")
	if runs > 0 {
		res.add("machine CPU per run", float64(m.busy.Microseconds())/float64(runs), "µs")
		w.allocs.report(res, "", "run", runs)
	}
	if w.db != nil {
		res.Statements = w.stmts
		if !w.statements {
			res.Params["pg_stat_statements"] = statementsOff
		}
	}
}

// reportPerJob adds the stopped window's CPU per job of each side to r's result, each
// figure's name after prefix, for a window around a phase that is not the one measured
// (drain's insert): no shares of a core, no statements; the machine's share of all CPUs, to
// say whether the phase was bound by them.
func (w *cpuWindow) reportPerJob(r *runner, prefix string, jobs int) {
	w.eachSide(func(name string, used time.Duration) {
		r.res.add(prefix+name+" CPU per job", float64(used.Microseconds())/float64(jobs), "µs")
	})
	m := machineBetween(w.machine, w.machineEnd)
	r.res.add(prefix+"machine CPU", m.share, "% of all CPUs")
	r.res.add(prefix+"machine CPU per job", float64(m.busy.Microseconds())/float64(jobs), "µs")
	w.allocs.report(r.res, prefix, "job", jobs)
}

// heapAllocs counts the heap allocations of the bench's process (runtime/metrics): with an
// in-process server, the server's and its worker's too. Garbage collection's cost follows
// them.
type heapAllocs struct{ objects, bytes uint64 }

func readHeapAllocs() heapAllocs {
	ms := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(ms)
	var h heapAllocs
	if ms[0].Value.Kind() == metrics.KindUint64 {
		h.objects = ms[0].Value.Uint64()
	}
	if ms[1].Value.Kind() == metrics.KindUint64 {
		h.bytes = ms[1].Value.Uint64()
	}
	return h
}

// since is what was allocated between start and h.
func (h heapAllocs) since(start heapAllocs) heapAllocs {
	return heapAllocs{objects: h.objects - start.objects, bytes: h.bytes - start.bytes}
}

// report adds the allocations per unit (run, job) to res, each name after prefix.
func (h heapAllocs) report(res *Result, prefix, unit string, n int) {
	res.add(prefix+"bench process allocations per "+unit, float64(h.objects)/float64(n), "allocations")
	res.add(prefix+"bench process allocated per "+unit, float64(h.bytes)/float64(n), "B")
}

// eachSide calls f with the CPU each side used over the stopped window: the servers (when
// the bench reads them), the bench's process, and PostgreSQL's backends (when the store is
// the bench's database).
func (w *cpuWindow) eachSide(f func(name string, used time.Duration)) {
	if len(w.pids) > 0 {
		f("servers", cpuUsed(w.procs, w.procsEnd))
	}
	f("bench process", w.selfEnd.cpu-w.self.cpu)
	if w.db != nil {
		used, _ := backendCPU(w.db, w.dbEnd)
		f("PostgreSQL", used)
	}
}

// close releases the window's connection; closing twice is harmless.
func (w *cpuWindow) close() {
	w.backends.close()
	w.backends = nil
}

// progress reports how far a phase got to Config.Progress, one call at a time.
func (r *runner) progress(phase string, done, total int) {
	if r.cfg.Progress == nil {
		return
	}
	r.progressMu.Lock()
	defer r.progressMu.Unlock()
	r.cfg.Progress(phase, done, total)
}

// progressEvery is how often a wait reports progress.
const progressEvery = 200 * time.Millisecond

// awaitStarts waits until n runs' handlers have started, counted by the recorder in the
// bench's process (no request to the server), reporting progress as phase "run". It returns
// false when timeout passed first.
func (r *runner) awaitStarts(ctx context.Context, n int, timeout time.Duration) (bool, error) {
	reached := r.rec.reach(n)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case <-reached:
			r.progress("run", n, n)
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, nil
		case <-tick.C:
			r.progress("run", r.rec.count(), n)
		}
	}
}
