package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// drain: insert N no-op jobs with the queue paused, resume it, time until all succeeded.
func drain(ctx context.Context, r *runner) error {
	return insertThenDrain(ctx, r, "jobs", false, func(int) apitype.JobSpec {
		return apitype.JobSpec{Handler: r.kind, Queue: r.queue, Requirements: r.requirements()}
	})
}

// exec: like drain, with jobs that run the real command `true`; then, beside processed, the
// machine's own limit measured just before (spawn), the share of it stint reached, and what
// the machine's CPU time says of that share: how much CPU a run took beyond what a process
// took at the limit, and the share that CPU alone would allow were the machine's CPUs the
// bound in both measurements.
func execWorkload(ctx context.Context, r *runner) error {
	err := insertThenDrain(ctx, r, "processes", true, func(int) apitype.JobSpec {
		return apitype.JobSpec{Command: []string{"true"}, Queue: r.queue}
	})
	if err != nil {
		return err
	}
	if r.limit == nil {
		r.res.Params["machine limit"] = "not measured: the server's workers run the commands; run `stint bench spawn` on their host"
		return nil
	}
	r.res.Params["machine limit"] = fmt.Sprintf("%s, %d processes at once, measured just before (as stint bench spawn)",
		r.limit.Way, r.limit.Concurrency)
	limit := r.limit.PerSecond()
	r.res.add("machine limit", limit, "processes/s")
	r.res.add("machine limit: machine CPU", r.limit.machine.share, "% of all CPUs")
	perProcess := r.limit.cpuPerProcess()
	r.res.add("machine limit: machine CPU per process", perProcess, "µs")
	r.res.add("machine limit: bench process CPU per process", r.limit.perProcess(r.limit.self), "µs")
	if processed, ok := r.res.figure("processed"); ok {
		r.res.add("processed / machine limit", 100*processed/limit, "%")
	}
	if perRun, ok := r.res.figure("machine CPU per run"); ok && perRun > 0 {
		r.res.add("machine CPU per run beyond a process at the limit", perRun-perProcess, "µs")
		r.res.add("processed / machine limit, were CPU the bound", 100*perProcess/perRun, "%")
	}
	return nil
}

// requirements are what each job of drain and steady asks of a worker: Config.CPU, or none.
func (r *runner) requirements() *apitype.Requirements {
	if r.cfg.CPU <= 0 {
		return nil
	}
	return &apitype.Requirements{CPU: r.cfg.CPU}
}

// insertThenDrain inserts N jobs made by spec into the paused queue, resumes it and times the
// drain; commands says the jobs run processes, whose start the bench does not see.
func insertThenDrain(ctx context.Context, r *runner, unit string, commands bool, spec func(int) apitype.JobSpec) error {
	n := r.cfg.N
	r.res.Params["n"] = strconv.Itoa(n)
	r.res.Params["batch"] = strconv.Itoa(r.cfg.BatchSize)
	r.res.Params["insert workers"] = strconv.Itoa(r.cfg.InsertWorkers)
	if err := r.setPaused(ctx, true); err != nil {
		return err
	}
	idle, err := sampleAll(r.pids)
	if err != nil {
		return err
	}
	insertCPU, err := r.startCPU(ctx)
	if err != nil {
		return err
	}
	took, err := r.insert(ctx, n, spec)
	if err != nil {
		insertCPU.close()
		return err
	}
	if err := insertCPU.stop(ctx, r); err != nil {
		return err
	}
	r.res.add("insert", float64(n)/took.Seconds(), "jobs/s")
	insertCPU.reportPerJob(r, "insert: ", n)
	if err := r.addQueuedMemory(ctx, idle, n); err != nil {
		return err
	}
	resumed, cpu, err := r.resumeAndDrain(ctx, n, commands)
	if err != nil {
		return err
	}
	ok, err := r.finished(ctx, n, resumed)
	if err != nil {
		return err
	}
	drained := ok.lastFinished.Sub(resumed)
	r.res.add("processed", float64(n)/drained.Seconds(), unit+"/s")
	r.res.add("drain time", drained.Seconds(), "s")
	if commands {
		// A command's start is not seen by the bench: the server's stamp is all there is.
		r.res.add("first start after resume (server stamp)", ms(max(ok.firstStarted.Sub(resumed), 0)), "ms")
	} else {
		r.addStartSpan(resumed)
	}
	cpu.report(r, n, "from the resume until the queue was empty")
	return nil
}

// queuedSettle is how long drain waits after its insert, the queue still paused, before it
// reads the servers' memory with the runs queued: for the inserts' last work (group commits,
// notifications, connections going idle) to end. It does not wait for a garbage collection,
// which cannot be asked of another process: a server idle behind a paused queue allocates
// too little to start one soon, and Go gives freed heap back to the system only after one,
// through its scavenger. So the figure keeps what the insert's garbage holds of the heap.
const queuedSettle = 2 * time.Second

// addQueuedMemory adds the server processes' resident memory before the insert (idle,
// sampled then) and with the n runs it made queued, read queuedSettle after it, and the
// growth per 10,000 queued runs. Only for server processes (--servers, or --pid): the
// bench's own process, where an in-process server runs, holds the bench and its garbage too.
func (r *runner) addQueuedMemory(ctx context.Context, idle []procSample, n int) error {
	if len(r.pids) == 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(queuedSettle):
	}
	queued, err := sampleAll(r.pids)
	if err != nil {
		return err
	}
	r.res.add("servers RSS before the insert", float64(rssOf(idle))/(1<<20), "MiB")
	r.res.add("servers RSS with the runs queued", float64(rssOf(queued))/(1<<20), "MiB")
	r.res.add("servers memory per 10,000 queued runs", growthPer(rssOf(idle), rssOf(queued), n, 10000)/(1<<20), "MiB")
	return nil
}

// resumeAndDrain resumes the paused queue holding n runs and waits until every one ran: until
// n handlers started, counted in the bench's process, then (the completions' short tail)
// until the queue is empty. Commands (exec), whose start the bench does not see, are waited
// for by polling the queue's depth throughout. It returns the instant just before the resume
// was sent and the CPU window from then until the queue was empty, stopped; the caller reports
// it.
func (r *runner) resumeAndDrain(ctx context.Context, n int, commands bool) (time.Time, *cpuWindow, error) {
	cpu, err := r.startCPU(ctx)
	if err != nil {
		return time.Time{}, nil, err
	}
	resumed := time.Now()
	if err := r.setPaused(ctx, false); err != nil {
		cpu.close()
		return time.Time{}, nil, err
	}
	if !commands {
		started, err := r.awaitStarts(ctx, n, 30*time.Minute)
		if err == nil && !started {
			err = fmt.Errorf("%d of %d runs started within 30m", r.rec.count(), n)
		}
		if err != nil {
			cpu.close()
			return time.Time{}, nil, err
		}
		n = 0 // progress is reported: the polls below are the completions' tail
	}
	if err := r.waitIdle(ctx, 30*time.Minute, n); err != nil {
		cpu.close()
		return time.Time{}, nil, err
	}
	return resumed, cpu, cpu.stop(ctx, r)
}

// finished checks, after the measured window, that all n runs of the queue succeeded and none
// finished before resumed, and returns their server timestamps' span.
func (r *runner) finished(ctx context.Context, n int, resumed time.Time) (statusCount, error) {
	ok, err := r.countStatus(ctx, "succeeded")
	if err != nil {
		return statusCount{}, err
	}
	if ok.n != n {
		depth, _ := r.depth(ctx)
		return statusCount{}, fmt.Errorf("%d of %d runs succeeded (queue now %v)", ok.n, n, depth)
	}
	if err := clocksAgree(resumed, ok.firstFinished); err != nil {
		return statusCount{}, err
	}
	return ok, nil
}

// stampSlack is how far a server's stamp may seem to precede the bench's instant of the same
// host before the bench takes the clocks to disagree.
const stampSlack = 50 * time.Millisecond

// clocksAgree checks the first finished_at (a server stamp) against resumed, the bench's
// instant just before it resumed the queue: a run finishes after its worker reported it,
// which is after the resume, whatever the server's waits. (started_at is no such check: it
// is read when the lease call begins, which may precede by the wait for the store the commit
// of the resume that let the run lease: half a second on a loaded machine.)
func clocksAgree(resumed, firstFinished time.Time) error {
	if firstFinished.Before(resumed.Add(-stampSlack)) {
		return fmt.Errorf("a run finished at %s, before the queue was resumed at %s: are the bench's and the server's clocks apart?",
			firstFinished.Format(time.RFC3339Nano), resumed.Format(time.RFC3339Nano))
	}
	return nil
}

// addStartSpan adds when the first and the last handler started after the resume sent at
// resumed: the user's view of how soon a resumed queue's work begins, and when it all began.
func (r *runner) addStartSpan(resumed time.Time) {
	first, last := startSpan(r.rec.snapshot())
	r.res.add("first start after resume", ms(first.Sub(resumed)), "ms")
	r.res.add("last start after resume", ms(last.Sub(resumed)), "ms")
}

// steady: Producers goroutines submit one job per request for Duration while the workers run;
// report completions per second, submit-to-start latency (from just before each request left
// the bench to its run's handler start) and the backlog at the end.
func steady(ctx context.Context, r *runner) error {
	producers, dur := r.cfg.Producers, r.cfg.Duration
	r.res.Params["producers"] = strconv.Itoa(producers)
	r.res.Params["duration"] = dur.String()
	var failed atomic.Int64
	sends := make([][]sentRun, producers)
	cpu, err := r.startCPU(ctx)
	if err != nil {
		return err
	}
	defer cpu.close()
	begin := time.Now()
	stop := begin.Add(dur)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			spec := &apitype.JobSpec{Handler: r.kind, Queue: r.queue, Requirements: r.requirements()}
			for time.Now().Before(stop) && ctx.Err() == nil {
				id, sent, err := r.submitJob(ctx, p, spec)
				if err != nil {
					if failed.Add(1) == 1 {
						r.cfg.Logger.Warn("steady: a submission failed (the first; all are counted in submit errors)", "err", err)
					}
					continue
				}
				sends[p] = append(sends[p], sentRun{id, sent})
			}
		})
	}
	ticker := time.NewTicker(progressEvery)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ticker.C:
			total := int(dur / time.Second)
			r.progress("submit", min(int(time.Since(begin)/time.Second), total), total)
		}
	}
	ticker.Stop()
	end := time.Now()
	if err := cpu.stop(ctx, r); err != nil {
		return err
	}
	// After the window: the backlog, then every submitted run's start, then the runs.
	depth, err := r.depth(ctx)
	if err != nil {
		return err
	}
	backlog := depth["queued"] + depth["scheduled"]
	sent := map[string]time.Time{}
	for _, ps := range sends {
		for _, s := range ps {
			sent[s.id] = s.at
		}
	}
	if _, err := r.awaitStarts(ctx, len(sent), max(dur, time.Minute)); err != nil {
		return err
	}
	started := r.rec.snapshot()
	lat, missing := between(sent, started)
	runs, err := r.allRuns(ctx)
	if err != nil {
		return err
	}
	var stamped []time.Duration
	created := map[string]time.Time{}
	completed := 0
	for _, run := range runs {
		created[run.ID] = run.CreatedAt
		if run.StartedAt != nil {
			stamped = append(stamped, run.StartedAt.Sub(run.CreatedAt))
		}
		if run.FinishedAt != nil && run.Status == "succeeded" && !run.FinishedAt.After(end) && !run.FinishedAt.Before(begin) {
			completed++
		}
	}
	slices.Sort(stamped)
	r.res.add("submitted", float64(len(sent))/dur.Seconds(), "jobs/s")
	r.res.add("completed", float64(completed)/dur.Seconds(), "jobs/s")
	r.res.add("submit-to-start p50", percentile(lat, 50), "ms")
	r.res.add("submit-to-start p95", percentile(lat, 95), "ms")
	r.res.add("submit-to-start p99", percentile(lat, 99), "ms")
	r.res.add("submit-to-start max", percentile(lat, 100), "ms")
	// Where the wait goes: the request until the server stamped the run, the server's own
	// stamps, and the lease's delivery to the handler (a server stamp against the bench's
	// clock: one host's).
	toCreated, _ := between(sent, created)
	r.res.add("send to created_at p50", percentile(toCreated, 50), "ms")
	r.res.add("created_at to started_at p50 (server stamps)", percentile(stamped, 50), "ms")
	r.res.add("created_at to started_at p99 (server stamps)", percentile(stamped, 99), "ms")
	r.addLeaseToHandler(runs, started)
	r.res.add("backlog at end", float64(backlog), "runs")
	r.res.add("never started", float64(missing), "runs")
	r.res.add("submit errors", float64(failed.Load()), "requests")
	cpu.report(r, len(sent), "the producers' duration")
	return nil
}

// sentRun is a run steady submitted and the instant its request left.
type sentRun struct {
	id string
	at time.Time
}

// scheduled: N jobs whose run_at is one instant Lead ahead; report how late their handlers
// start after the instant.
func scheduled(ctx context.Context, r *runner) error {
	n, lead := r.cfg.N, r.cfg.Lead
	r.res.Params["n"] = strconv.Itoa(n)
	r.res.Params["lead"] = lead.String()
	r.res.Params["insert workers"] = strconv.Itoa(r.cfg.InsertWorkers)
	instant := time.Now().Add(lead).Truncate(time.Millisecond)
	took, err := r.insert(ctx, n, func(int) apitype.JobSpec {
		at := instant
		return apitype.JobSpec{Handler: r.kind, Queue: r.queue, RunAt: &at}
	})
	if err != nil {
		return err
	}
	if time.Now().After(instant) {
		return fmt.Errorf("inserting %d jobs took %s, longer than the %s lead: raise --lead", n, took, lead)
	}
	cpu, err := r.atInstant(ctx, instant)
	if err != nil {
		return err
	}
	defer cpu.close()
	started, err := r.awaitStarts(ctx, n, 10*time.Minute)
	if err != nil {
		return err
	}
	if !started {
		return fmt.Errorf("%d of %d runs started within 10m of the instant", r.rec.count(), n)
	}
	if err := r.waitIdle(ctx, 10*time.Minute, 0); err != nil {
		return err
	}
	if err := cpu.stop(ctx, r); err != nil {
		return err
	}
	runs, err := r.allRuns(ctx)
	if err != nil {
		return err
	}
	var stamped []time.Duration
	var last time.Time
	for _, run := range runs {
		if run.StartedAt != nil {
			stamped = append(stamped, run.StartedAt.Sub(instant))
		}
		if run.FinishedAt != nil && run.FinishedAt.After(last) {
			last = *run.FinishedAt
		}
	}
	slices.Sort(stamped)
	r.addLateness(instant, stamped)
	r.addLeaseToHandler(runs, r.rec.snapshot())
	r.res.add("last finished after instant", ms(last.Sub(instant)), "ms")
	cpu.report(r, n, "from just before the instant until the queue was empty")
	return nil
}

// atInstant waits (a timer, no request) until just before instant and opens the CPU window
// there, so that it spans the runs' start and not the idle wait before.
func (r *runner) atInstant(ctx context.Context, instant time.Time) (*cpuWindow, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Until(instant.Add(-50 * time.Millisecond))):
	}
	return r.startCPU(ctx)
}

// addLateness adds the lateness figures of runs due at instant: from the instant to each
// handler's start, and (stamped, sorted) the server's started_at − instant, which the lease
// transaction stamps before the lease reaches the worker.
func (r *runner) addLateness(instant time.Time, stamped []time.Duration) {
	late := lateness(instant, r.rec.snapshot())
	r.res.add("lateness min", percentile(late, 0), "ms")
	r.res.add("lateness p50", percentile(late, 50), "ms")
	r.res.add("lateness p99", percentile(late, 99), "ms")
	r.res.add("lateness max", percentile(late, 100), "ms")
	r.res.add("started_at − instant p50 (server stamps)", percentile(stamped, 50), "ms")
	r.res.add("started_at − instant p99 (server stamps)", percentile(stamped, 99), "ms")
}

// addLeaseToHandler adds how long after the server stamped each run's start (started_at, when
// its lease transaction began) its handler started: the lease's commit and delivery to the
// worker, and the worker's start of the attempt.
func (r *runner) addLeaseToHandler(runs []*apitype.Run, started map[string]time.Time) {
	leased := make(map[string]time.Time, len(runs))
	for _, run := range runs {
		if run.StartedAt != nil {
			leased[run.ID] = *run.StartedAt
		}
	}
	gap, _ := between(leased, started)
	r.res.add("started_at to handler start p50", percentile(gap, 50), "ms")
	r.res.add("started_at to handler start p99", percentile(gap, 99), "ms")
}
