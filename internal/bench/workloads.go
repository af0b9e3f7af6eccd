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
	return insertThenDrain(ctx, r, "jobs", func(int) apitype.JobSpec {
		return apitype.JobSpec{Handler: r.cfg.Handler, Queue: r.queue, Requirements: r.requirements()}
	})
}

// exec: like drain, with jobs that run the real command `true`.
func execWorkload(ctx context.Context, r *runner) error {
	return insertThenDrain(ctx, r, "processes", func(int) apitype.JobSpec {
		return apitype.JobSpec{Command: []string{"true"}, Queue: r.queue}
	})
}

// requirements are what each job of drain and steady asks of a worker: Config.CPU, or none.
func (r *runner) requirements() *apitype.Requirements {
	if r.cfg.CPU <= 0 {
		return nil
	}
	return &apitype.Requirements{CPU: r.cfg.CPU}
}

func insertThenDrain(ctx context.Context, r *runner, unit string, spec func(int) apitype.JobSpec) error {
	n := r.cfg.N
	r.res.Params["n"] = strconv.Itoa(n)
	r.res.Params["batch"] = strconv.Itoa(r.cfg.BatchSize)
	r.res.Params["insert workers"] = strconv.Itoa(r.cfg.InsertWorkers)
	if err := r.setPaused(ctx, true); err != nil {
		return err
	}
	took, err := r.insert(ctx, n, spec)
	if err != nil {
		return err
	}
	// The drain starts when the resume is sent (taken before the request, so the figure
	// errs on the slow side) and ends at the latest finished_at of the runs, a server
	// timestamp. With --server the two clocks are the host's: run the bench on the server's
	// host, or on one whose clock agrees.
	procs, err := sampleAll(r.pids) // servers the bench started as processes, if any
	if err != nil {
		return err
	}
	backends, err := newBackendWatch(ctx, r.storeURL) // nil unless on PostgreSQL
	if err != nil {
		return err
	}
	defer backends.close()
	dbBefore, err := backends.sample(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := r.setPaused(ctx, false); err != nil {
		return err
	}
	if err := r.waitIdle(ctx, 30*time.Minute); err != nil {
		return err
	}
	procsEnd, err := sampleAll(r.pids)
	if err != nil {
		return err
	}
	busy := time.Since(start)
	dbAfter, err := backends.sample(ctx)
	if err != nil {
		return err
	}
	ok, err := r.countStatus(ctx, "succeeded")
	if err != nil {
		return err
	}
	if ok.n != n {
		return fmt.Errorf("%d of %d runs succeeded", ok.n, n)
	}
	// A run's started_at is the time its worker's lease call read, which may precede, by
	// the wait for the store's writer, the commit of the resume that let it lease. More
	// than that means the clocks disagree.
	const stampSlack = 50 * time.Millisecond
	if ok.firstStarted.Before(start.Add(-stampSlack)) {
		return fmt.Errorf("a run started at %s, before the queue was resumed at %s: are the bench's and the server's clocks apart?",
			ok.firstStarted.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano))
	}
	drained := ok.lastFinished.Sub(start)
	r.res.add("insert", float64(n)/took.Seconds(), "jobs/s")
	r.res.add("processed", float64(n)/drained.Seconds(), unit+"/s")
	r.res.add("drain time", drained.Seconds(), "s")
	r.res.add("first start after resume", float64(max(ok.firstStarted.Sub(start), 0))/float64(time.Millisecond), "ms")
	if len(r.pids) > 0 {
		// From the resume until the bench saw the queue empty (a poll later than the
		// last finish), all server processes together.
		r.res.add("servers CPU while draining", cpuShare(cpuUsed(procs, procsEnd), busy), "% of a core")
		r.res.add("servers CPU per run", float64(cpuUsed(procs, procsEnd).Microseconds())/float64(n), "µs")
	}
	if backends != nil {
		// What the database spent per run while draining, whichever server asked: the part
		// of a run's cost that more servers do not spread.
		used, _ := backendCPU(dbBefore, dbAfter)
		r.res.add("PostgreSQL CPU per run", float64(used.Microseconds())/float64(n), "µs")
	}
	return nil
}

// steady: Producers goroutines submit one job per request for Duration while the workers run;
// report completions per second, submit-to-start latency and the backlog at the end.
func steady(ctx context.Context, r *runner) error {
	producers, dur := r.cfg.Producers, r.cfg.Duration
	r.res.Params["producers"] = strconv.Itoa(producers)
	r.res.Params["duration"] = dur.String()
	var submitted, failed atomic.Int64
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := &apitype.JobSpec{Handler: r.cfg.Handler, Queue: r.queue, Requirements: r.requirements()}
			for time.Now().Before(stop) && ctx.Err() == nil {
				if err := r.submit(ctx, p, "/v1/jobs", spec, 1); err != nil {
					failed.Add(1)
					continue
				}
				submitted.Add(1)
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	depth, err := r.depth(ctx)
	if err != nil {
		return err
	}
	backlog := depth["queued"] + depth["scheduled"]
	runs, err := r.allRuns(ctx)
	if err != nil {
		return err
	}
	var lat []time.Duration
	completed := 0
	begin := end.Add(-dur)
	for _, run := range runs {
		if run.StartedAt != nil {
			lat = append(lat, run.StartedAt.Sub(run.CreatedAt))
		}
		if run.FinishedAt != nil && run.Status == "succeeded" && !run.FinishedAt.After(end) && !run.FinishedAt.Before(begin) {
			completed++
		}
	}
	slices.Sort(lat)
	r.res.add("submitted", float64(submitted.Load())/dur.Seconds(), "jobs/s")
	r.res.add("completed", float64(completed)/dur.Seconds(), "jobs/s")
	r.res.add("submit-to-start p50", percentile(lat, 50), "ms")
	r.res.add("submit-to-start p95", percentile(lat, 95), "ms")
	r.res.add("submit-to-start p99", percentile(lat, 99), "ms")
	r.res.add("backlog at end", float64(backlog), "runs")
	r.res.add("submit errors", float64(failed.Load()), "requests")
	return nil
}

// scheduled: N jobs whose run_at is one instant Lead ahead; report how late they start.
func scheduled(ctx context.Context, r *runner) error {
	n, lead := r.cfg.N, r.cfg.Lead
	r.res.Params["n"] = strconv.Itoa(n)
	r.res.Params["lead"] = lead.String()
	r.res.Params["insert workers"] = strconv.Itoa(r.cfg.InsertWorkers)
	instant := time.Now().Add(lead).Truncate(time.Millisecond)
	took, err := r.insert(ctx, n, func(int) apitype.JobSpec {
		at := instant
		return apitype.JobSpec{Handler: r.cfg.Handler, Queue: r.queue, RunAt: &at}
	})
	if err != nil {
		return err
	}
	if time.Now().After(instant) {
		return fmt.Errorf("inserting %d jobs took %s, longer than the %s lead: raise --lead", n, took, lead)
	}
	if err := r.waitIdle(ctx, 10*time.Minute); err != nil {
		return err
	}
	runs, err := r.allRuns(ctx)
	if err != nil {
		return err
	}
	var late []time.Duration
	var last time.Time
	for _, run := range runs {
		if run.StartedAt != nil {
			late = append(late, run.StartedAt.Sub(instant))
		}
		if run.FinishedAt != nil && run.FinishedAt.After(last) {
			last = *run.FinishedAt
		}
	}
	slices.Sort(late)
	r.res.add("lateness p50", percentile(late, 50), "ms")
	r.res.add("lateness p99", percentile(late, 99), "ms")
	r.res.add("lateness max", percentile(late, 100), "ms")
	r.res.add("last finished after instant", float64(last.Sub(instant))/float64(time.Millisecond), "ms")
	return nil
}
