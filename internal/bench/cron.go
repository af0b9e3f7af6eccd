package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// cronWorkload: K cron jobs that all fire on one second Lead ahead (a six-field expression
// naming that second, in UTC). Lateness is from the instant to the start of each run's
// handler. "created before instant" is how far ahead of the instant the server made the runs
// (the engine's cron lead; negative: after it). Every job must fire once: a job with no
// run is a miss, a second run a duplicate.
func cronWorkload(ctx context.Context, r *runner) error {
	k, lead := r.cfg.N, r.cfg.Lead
	r.res.Params["jobs"] = strconv.Itoa(k)
	r.res.Params["lead"] = lead.String()
	instant := time.Now().Add(lead).UTC().Truncate(time.Second).Add(time.Second)
	expr := fmt.Sprintf("%d %d %d %d %d *", instant.Second(), instant.Minute(), instant.Hour(), instant.Day(), int(instant.Month()))
	r.res.Params["cron"] = expr + " (UTC)"
	took, err := r.insert(ctx, k, func(int) apitype.JobSpec {
		return apitype.JobSpec{Handler: r.kind, Queue: r.queue, Schedule: &apitype.Schedule{Cron: expr}}
	})
	if err != nil {
		return err
	}
	r.res.add("create jobs", float64(k)/took.Seconds(), "jobs/s")
	if time.Now().After(instant) {
		return fmt.Errorf("creating %d cron jobs took %s, longer than the %s lead: raise --lead", k, took, lead)
	}
	// Wait for the instant, then until every job's run has started (or a minute passed:
	// then the missing ones are misses), counted in the bench's process, then until the
	// queue is empty.
	cpu, err := r.atInstant(ctx, instant)
	if err != nil {
		return err
	}
	defer cpu.close()
	if _, err := r.awaitStarts(ctx, k, time.Until(instant.Add(time.Minute))); err != nil {
		return err
	}
	if err := r.waitIdle(ctx, time.Minute, 0); err != nil {
		return err
	}
	if err := cpu.stop(ctx, r); err != nil {
		return err
	}
	runs, err := r.allRuns(ctx)
	if err != nil {
		return err
	}
	perJob := map[string]int{}
	var fire, stamped []time.Duration
	for _, run := range runs {
		perJob[run.JobID]++
		fire = append(fire, run.CreatedAt.Sub(instant))
		if run.StartedAt != nil {
			stamped = append(stamped, run.StartedAt.Sub(instant))
		}
	}
	dups := 0
	for _, n := range perJob {
		dups += n - 1
	}
	slices.Sort(fire)
	slices.Sort(stamped)
	r.addLateness(instant, stamped)
	r.addLeaseToHandler(runs, r.rec.snapshot())
	r.res.add("created before instant, min", -percentile(fire, 100), "ms")
	r.res.add("created before instant, max", -percentile(fire, 0), "ms")
	r.res.add("duplicates", float64(dups), "runs")
	r.res.add("misses", float64(k-len(perJob)), "jobs")
	cpu.report(r, k, "from just before the instant until the queue was empty")
	if dups > 0 || len(perJob) < k {
		return fmt.Errorf("%d duplicate runs and %d jobs that did not fire (results: %+v)", dups, k-len(perJob), r.res.Figures)
	}
	return nil
}
