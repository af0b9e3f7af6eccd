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
// naming that second, in UTC). Lateness is started_at - instant: when each job's run
// started. "created before instant" is how far ahead of the instant the server made the
// runs (the engine's cron lead; negative: after it). Every job must fire once: a job with no
// run is a miss, a second run a duplicate.
func cronWorkload(ctx context.Context, r *runner) error {
	k, lead := r.cfg.N, r.cfg.Lead
	r.res.Params["jobs"] = strconv.Itoa(k)
	r.res.Params["lead"] = lead.String()
	instant := time.Now().Add(lead).UTC().Truncate(time.Second).Add(time.Second)
	expr := fmt.Sprintf("%d %d %d %d %d *", instant.Second(), instant.Minute(), instant.Hour(), instant.Day(), int(instant.Month()))
	r.res.Params["cron"] = expr + " (UTC)"
	took, err := r.insert(ctx, k, func(int) apitype.JobSpec {
		return apitype.JobSpec{Handler: r.cfg.Handler, Queue: r.queue, Schedule: &apitype.Schedule{Cron: expr}}
	})
	if err != nil {
		return err
	}
	r.res.add("create jobs", float64(k)/took.Seconds(), "jobs/s")
	if time.Now().After(instant) {
		return fmt.Errorf("creating %d cron jobs took %s, longer than the %s lead: raise --lead", k, took, lead)
	}
	// Wait for the instant, then until every job's run has finished (or a minute passed:
	// then the missing ones are misses).
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(instant)):
	}
	deadline := time.Now().Add(time.Minute)
	for {
		sc, err := r.countStatus(ctx, "succeeded")
		if err != nil {
			return err
		}
		if sc.n >= k || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	runs, err := r.allRuns(ctx)
	if err != nil {
		return err
	}
	perJob := map[string]int{}
	var fire, start []time.Duration
	for _, run := range runs {
		perJob[run.JobID]++
		fire = append(fire, run.CreatedAt.Sub(instant))
		if run.StartedAt != nil {
			start = append(start, run.StartedAt.Sub(instant))
		}
	}
	dups := 0
	for _, n := range perJob {
		dups += n - 1
	}
	slices.Sort(fire)
	slices.Sort(start)
	r.res.add("lateness p50", percentile(start, 50), "ms")
	r.res.add("lateness p99", percentile(start, 99), "ms")
	r.res.add("lateness max", percentile(start, 100), "ms")
	r.res.add("created before instant, min", -percentile(fire, 100), "ms")
	r.res.add("created before instant, max", -percentile(fire, 0), "ms")
	r.res.add("duplicates", float64(dups), "runs")
	r.res.add("misses", float64(k-len(perJob)), "jobs")
	if dups > 0 || len(perJob) < k {
		return fmt.Errorf("%d duplicate runs and %d jobs that did not fire (results: %+v)", dups, k-len(perJob), r.res.Figures)
	}
	return nil
}
