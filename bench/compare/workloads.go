package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// job is what the workloads insert: the time just before the insert call that carried it
// (in the job's arguments, so that the handler can tell its latency), when it is due (zero:
// now), and whether the handler runs the real command `true`.
type job struct {
	seq    int64 // the job's number in the run, which tells a second start of it
	submit time.Time
	runAt  time.Time
	cmd    bool
}

// system is a job queue under test, its store fresh for the run.
type system interface {
	// store names the store for the result; params are the settings the run used.
	store() string
	params() map[string]string
	// insertBatch inserts jobs in one call where the system has one (River), else one
	// after another (Asynq); insertOne inserts one job in one call.
	insertBatch(ctx context.Context, jobs []job) error
	insertOne(ctx context.Context, j job) error
	// start starts processing: the workers begin to fetch jobs.
	start(ctx context.Context) error
	// backlog counts the jobs waiting to start (due, scheduled or to retry).
	backlog(ctx context.Context) (int, error)
	// confirm waits until the store shows n jobs completed (the handler's return is
	// recorded by the system after it returns), or fails.
	confirm(ctx context.Context, n int) error
	// serverPIDs are the processes that serve the store (PostgreSQL backends of the
	// scratch database; the Redis server) and serverName what to call them in figures.
	serverPIDs(ctx context.Context) ([]int, error)
	serverName() string
	// close stops processing and drops the store.
	close()
}

// recorder is the handler's side: when each job first started and when its handlers
// finished, by the process's clock (the same clock that stamped the submit time). A job
// started again keeps its first start, as in stint bench, and counts as a repeat.
type recorder struct {
	mu       sync.Mutex
	starts   map[int64]started
	repeats  int
	finishes []time.Time
	failed   atomic.Int64
	target   int
	done     chan struct{}
}

type started struct {
	at     time.Time
	submit time.Time
}

func newRecorder() *recorder {
	return &recorder{starts: map[int64]started{}, done: make(chan struct{})}
}

// expect makes done close once n handlers have finished (0: never).
func (r *recorder) expect(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.target = n
}

// handle is every job's handler: it records the start, runs `true` if asked, and records
// the finish.
func (r *recorder) handle(ctx context.Context, seq, submitNanos int64, cmd bool) error {
	at := time.Now()
	r.mu.Lock()
	if _, again := r.starts[seq]; again {
		r.repeats++
	} else {
		r.starts[seq] = started{at: at, submit: time.Unix(0, submitNanos)}
	}
	r.mu.Unlock()
	if cmd {
		if err := exec.CommandContext(ctx, "true").Run(); err != nil {
			r.failed.Add(1)
			return fmt.Errorf("run true: %w", err)
		}
	}
	end := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finishes = append(r.finishes, end)
	if len(r.finishes) == r.target {
		close(r.done)
	}
	return nil
}

// snapshot copies what was recorded so far: each job's first start, every finish, and
// how many starts were repeats.
func (r *recorder) snapshot() ([]started, []time.Time, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	starts := make([]started, 0, len(r.starts))
	for _, st := range r.starts {
		starts = append(starts, st)
	}
	return starts, slices.Clone(r.finishes), r.repeats
}

// awaitStarts waits until n jobs have started, at most limit, and returns how many had.
func (r *recorder) awaitStarts(ctx context.Context, n int, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for {
		r.mu.Lock()
		got := len(r.starts)
		r.mu.Unlock()
		if got >= n || time.Now().After(deadline) {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stallLimit is how long wait waits with no handler finishing before it gives up: a
// system that lost jobs (River rescues a job whose fetch answer never reached the client
// only after an hour) would otherwise hold the run until its limit.
const stallLimit = 2 * time.Minute

// wait waits until the expected number of handlers finished, at most limit, and fails
// early when none finished for stallLimit.
func (r *recorder) wait(ctx context.Context, limit time.Duration) error {
	deadline := time.After(limit)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	seen, progressed := 0, time.Now()
	for {
		select {
		case <-r.done:
			return nil
		case <-deadline:
			_, f, _ := r.snapshot()
			return fmt.Errorf("after %s only %d of %d jobs finished (%d handler failures)", limit, len(f), r.target, r.failed.Load())
		case <-tick.C:
			_, f, _ := r.snapshot()
			if len(f) != seen {
				seen, progressed = len(f), time.Now()
			} else if time.Since(progressed) > stallLimit {
				return fmt.Errorf("stalled: %d of %d jobs finished, none in the last %s (%d handler failures)", seen, r.target, stallLimit, r.failed.Load())
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func runWorkload(ctx context.Context, cfg *config, stderr io.Writer) (*result, error) {
	rec := newRecorder()
	var (
		s   system
		err error
	)
	switch cfg.system {
	case "river":
		s, err = newRiver(ctx, cfg, rec, stderr)
	case "asynq":
		s, err = newAsynq(ctx, cfg, rec)
	}
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &result{System: cfg.system, Workload: cfg.workload, Store: s.store(), Params: s.params()}
	switch cfg.workload {
	case "drain":
		err = drain(ctx, cfg, s, rec, res, false)
	case "exec":
		err = drain(ctx, cfg, s, rec, res, true)
	case "steady":
		err = steady(ctx, cfg, s, rec, res)
	case "scheduled":
		err = scheduled(ctx, cfg, s, rec, res)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", cfg.system, cfg.workload, err)
	}
	return res, nil
}

// insertAll inserts n jobs made by mk in batches of cfg.batch, cfg.insertWorkers batches
// in flight, and returns how long it took. Each batch's jobs are stamped just before its
// insert call.
func insertAll(ctx context.Context, cfg *config, s system, n int, mk func(i int) job) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	offsets := make(chan int)
	errs := make(chan error, cfg.insertWorkers)
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.insertWorkers {
		wg.Go(func() {
			for off := range offsets {
				end := min(off+cfg.batch, n)
				jobs := make([]job, 0, end-off)
				for i := off; i < end; i++ {
					j := mk(i)
					j.seq = int64(i)
					jobs = append(jobs, j)
				}
				now := time.Now()
				for i := range jobs {
					jobs[i].submit = now
				}
				if err := s.insertBatch(ctx, jobs); err != nil {
					errs <- fmt.Errorf("insert jobs %d..%d: %w", off, end, err)
					cancel()
					return
				}
			}
		})
	}
feed:
	for off := 0; off < n; off += cfg.batch {
		select {
		case offsets <- off:
		case <-ctx.Done():
			break feed
		}
	}
	close(offsets)
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return took, ctx.Err()
}

// drain (and exec, with cmd): insert N jobs before processing starts, start it, time until
// every handler finished. The start of processing plays the part of stint's resume.
func drain(ctx context.Context, cfg *config, s system, rec *recorder, res *result, cmd bool) error {
	n := cfg.n
	res.Params["n"] = strconv.Itoa(n)
	res.Params["batch"] = strconv.Itoa(cfg.batch)
	res.Params["insert workers"] = strconv.Itoa(cfg.insertWorkers)
	insertCPU, err := startCPUWatch(ctx, s)
	if err != nil {
		return err
	}
	took, err := insertAll(ctx, cfg, s, n, func(int) job { return job{cmd: cmd} })
	if err != nil {
		return err
	}
	insertServerCPU, insertSelfCPU, err := insertCPU.stop(ctx)
	if err != nil {
		return err
	}
	rec.expect(n)
	cpu, err := startCPUWatch(ctx, s)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := s.start(ctx); err != nil {
		return err
	}
	if err := rec.wait(ctx, 30*time.Minute); err != nil {
		return err
	}
	serverCPU, selfCPU, err := cpu.stop(ctx)
	if err != nil {
		return err
	}
	if err := s.confirm(ctx, n); err != nil {
		return err
	}
	starts, finishes, repeats := rec.snapshot()
	first := slices.MinFunc(starts, func(a, b started) int { return a.at.Compare(b.at) }).at
	last := slices.MaxFunc(finishes, func(a, b time.Time) int { return a.Compare(b) })
	drained := last.Sub(start)
	unit := "jobs"
	if cmd {
		unit = "processes"
	}
	res.add("insert", float64(n)/took.Seconds(), "jobs/s")
	res.add("insert: "+s.serverName()+" CPU per job", float64(insertServerCPU.Microseconds())/float64(n), "µs")
	res.add("insert: client process CPU per job", float64(insertSelfCPU.Microseconds())/float64(n), "µs")
	res.add("processed", float64(n)/drained.Seconds(), unit+"/s")
	res.add("drain time", drained.Seconds(), "s")
	res.add("first start after resume", ms(first.Sub(start)), "ms")
	res.add(s.serverName()+" CPU per run", float64(serverCPU.Microseconds())/float64(n), "µs")
	res.add("client process CPU per run", float64(selfCPU.Microseconds())/float64(n), "µs")
	res.add("handler starts beyond one per job", float64(repeats), "starts")
	return nil
}

// steady: producers insert one job per call for the duration while the workers run.
func steady(ctx context.Context, cfg *config, s system, rec *recorder, res *result) error {
	res.Params["producers"] = strconv.Itoa(cfg.producers)
	res.Params["duration"] = cfg.duration.String()
	if err := s.start(ctx); err != nil {
		return err
	}
	var seq, submitted, failed atomic.Int64
	var firstErr atomic.Value
	begin := time.Now()
	stop := begin.Add(cfg.duration)
	var wg sync.WaitGroup
	for range cfg.producers {
		wg.Go(func() {
			for time.Now().Before(stop) && ctx.Err() == nil {
				j := job{seq: seq.Add(1)}
				j.submit = time.Now()
				if err := s.insertOne(ctx, j); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				submitted.Add(1)
			}
		})
	}
	wg.Wait()
	end := time.Now()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// After the window: the backlog, then every submitted job's start (as stint bench,
	// at most the duration or a minute), then the figures.
	backlog, err := s.backlog(ctx)
	if err != nil {
		return err
	}
	n := int(submitted.Load())
	got, err := rec.awaitStarts(ctx, n, max(cfg.duration, time.Minute))
	if err != nil {
		return err
	}
	starts, finishes, _ := rec.snapshot()
	lat := make([]time.Duration, 0, len(starts))
	for _, st := range starts {
		lat = append(lat, st.at.Sub(st.submit))
	}
	slices.Sort(lat)
	completed := 0
	for _, f := range finishes {
		if !f.Before(begin) && !f.After(end) {
			completed++
		}
	}
	dur := end.Sub(begin).Seconds()
	res.add("submitted", float64(submitted.Load())/dur, "jobs/s")
	res.add("completed", float64(completed)/dur, "jobs/s")
	res.add("submit-to-start p50", percentile(lat, 50), "ms")
	res.add("submit-to-start p95", percentile(lat, 95), "ms")
	res.add("submit-to-start p99", percentile(lat, 99), "ms")
	res.add("submit-to-start max", percentile(lat, 100), "ms")
	res.add("backlog at end", float64(backlog), "runs")
	res.add("never started", float64(max(n-got, 0)), "runs")
	res.add("submit errors", float64(failed.Load()), "requests")
	if err, ok := firstErr.Load().(error); ok {
		return fmt.Errorf("%d inserts failed, the first: %w", failed.Load(), err)
	}
	return nil
}

// scheduled: N jobs due at one instant lead ahead; how late their handlers start.
func scheduled(ctx context.Context, cfg *config, s system, rec *recorder, res *result) error {
	n := cfg.n
	res.Params["n"] = strconv.Itoa(n)
	res.Params["lead"] = cfg.lead.String()
	res.Params["insert workers"] = strconv.Itoa(cfg.insertWorkers)
	if err := s.start(ctx); err != nil {
		return err
	}
	rec.expect(n)
	instant := time.Now().Add(cfg.lead).Truncate(time.Millisecond)
	took, err := insertAll(ctx, cfg, s, n, func(int) job { return job{runAt: instant} })
	if err != nil {
		return err
	}
	if time.Now().After(instant) {
		return fmt.Errorf("inserting %d jobs took %s, longer than the %s lead: raise --lead", n, took, cfg.lead)
	}
	if err := rec.wait(ctx, 10*time.Minute); err != nil {
		return err
	}
	starts, finishes, _ := rec.snapshot()
	late := make([]time.Duration, 0, len(starts))
	for _, st := range starts {
		late = append(late, st.at.Sub(instant))
	}
	slices.Sort(late)
	last := slices.MaxFunc(finishes, func(a, b time.Time) int { return a.Compare(b) })
	res.add("lateness p50", percentile(late, 50), "ms")
	res.add("lateness p99", percentile(late, 99), "ms")
	res.add("lateness max", percentile(late, 100), "ms")
	// Negative when a job started before its instant: Asynq keeps due times in whole
	// seconds, so its jobs may start up to a second early.
	res.add("lateness min", percentile(late, 0), "ms")
	res.add("last finished after instant", ms(last.Sub(instant)), "ms")
	return nil
}
