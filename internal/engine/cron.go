package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stint-dev/stint/internal/cron"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// Cron defaults.
const (
	// DefaultMisfireGrace is how late an instant may fire and still count as on time
	// (scheduler.PlanFire).
	DefaultMisfireGrace = time.Minute
	// fireBatch caps the jobs one fire transaction takes.
	fireBatch = 500
)

// schedules parses job schedules once per distinct (expression, zone).
type schedules struct {
	mu sync.Mutex
	m  map[[2]string]*cron.Schedule
}

// get returns the parsed schedule s; expressions were validated on the way in, so an
// error here means the zone database changed under the server.
func (c *schedules) get(s *model.Schedule) (*cron.Schedule, error) {
	k := [2]string{s.Cron, s.Timezone}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc, ok := c.m[k]; ok {
		return sc, nil
	}
	sc, err := cron.Parse(s.Cron, s.Timezone)
	if err != nil {
		return nil, err
	}
	if c.m == nil || len(c.m) >= 10000 {
		c.m = make(map[[2]string]*cron.Schedule) // a crude bound: start over
	}
	c.m[k] = sc
	return sc, nil
}

// NextFireAt is where a job's schedule stands when it is created or changed at now: the
// first instant after now, or nil when the job does not fire (no schedule, disabled,
// paused, an expression with no further instant, or one that does not parse).
func NextFireAt(j *model.Job, now time.Time) *time.Time {
	return scheduleNext(j.Spec.Schedule, j.Enabled, now)
}

// scheduleNext is the first instant of s after now, or nil when it does not fire.
func scheduleNext(s *model.Schedule, enabled bool, now time.Time) *time.Time {
	if s == nil || s.Paused || !enabled {
		return nil
	}
	sc, err := cron.Parse(s.Cron, s.Timezone)
	if err != nil {
		return nil
	}
	next := sc.Next(now)
	if next.IsZero() {
		return nil
	}
	return &next
}

// NextFireTimes returns a job's next n fire instants, from its stored next fire on, in the
// schedule's time zone (none when it does not fire).
func NextFireTimes(j *model.Job, n int) []time.Time {
	if j.NextFireAt == nil || j.Spec.Schedule == nil {
		return nil
	}
	sc, err := cron.Parse(j.Spec.Schedule.Cron, j.Spec.Schedule.Timezone)
	if err != nil {
		return nil
	}
	t := *j.NextFireAt
	out := []time.Time{t.In(sc.Location())}
	for len(out) < n {
		if t = sc.NextAfter(t, t); t.IsZero() {
			break
		}
		out = append(out, t.In(sc.Location()))
	}
	return out
}

// cronLoop fires cron jobs. It sleeps until the earliest next fire across all jobs (less
// CronLead), or until a schedule changes; each due job's runs and its next fire are written
// in one transaction that the store refuses to apply twice (invariant 4).
//
// With CronLead, a job without a concurrency limit fires that long before its instant: its
// run is created scheduled for the instant, so that at the instant only the run's promotion
// is left. A job under a limit fires at the instant itself, since its admission depends on
// the runs active then.
func (e *Engine) cronLoop(ctx context.Context) {
	for ctx.Err() == nil {
		wake := e.schedChanged.Wait()
		now := e.clock.Now()
		horizon := now.Add(e.cfg.CronLead)
		fired, held, err := e.fireDue(ctx, now, horizon)
		if err != nil {
			e.retryLater(ctx, "fire cron jobs", err)
			continue
		}
		firedPipelines, heldPipeline, err := e.firePipelines(ctx, now, horizon)
		if err != nil {
			e.retryLater(ctx, "fire pipelines", err)
			continue
		}
		if fired || firedPipelines {
			continue // more may be due
		}
		if !heldPipeline.IsZero() && (held.IsZero() || heldPipeline.Before(held)) {
			held = heldPipeline
		}
		next, ok, err := e.store.NextFire(ctx, &store.NextFireParams{After: horizon})
		if err != nil {
			e.retryLater(ctx, "next cron fire", err)
			continue
		}
		until := now.Add(e.cfg.MaxLeaseWait * 10) // no schedule: sleep until one changes
		if ok {
			until = next.Add(-e.cfg.CronLead)
		}
		if !held.IsZero() && held.Before(until) {
			until = held // a limited job's instant inside the lead
		}
		if !e.sleepUntil(ctx, wake, until) {
			return
		}
	}
}

// fireDue fires one batch of the jobs due by horizon: those due by now, and those without
// a concurrency limit due by horizon (ahead of their instant). It reports whether it fired
// any, and the earliest instant of a limited job it left for later (zero: none).
func (e *Engine) fireDue(ctx context.Context, now, horizon time.Time) (bool, time.Time, error) {
	jobs, err := e.store.DueJobs(ctx, &store.DueJobsParams{Now: horizon, Limit: fireBatch})
	if err != nil {
		return false, time.Time{}, err
	}
	var held time.Time
	fires := make([]store.Fire, 0, len(jobs))
	for _, j := range jobs {
		if j.NextFireAt.After(now) && scheduler.RunConcurrency(j, nil) != nil {
			if held.IsZero() || j.NextFireAt.Before(held) {
				held = *j.NextFireAt
			}
			continue
		}
		fires = append(fires, e.planFire(j, now))
	}
	if len(fires) == 0 {
		return false, held, nil
	}
	res, err := e.store.FireJobs(ctx, &store.FireJobsParams{Fires: fires, Now: now})
	if err != nil {
		return false, time.Time{}, err
	}
	var created, replaced []*model.Run
	for _, fr := range res {
		if !fr.Stale {
			e.cronRuns.Add(uint64(len(fr.Runs)))
		}
		for _, rr := range fr.Runs {
			if rr.Err != nil {
				e.log.Error("cron run not created", "err", rr.Err)
				continue
			}
			if !rr.Existing {
				created = append(created, rr.Run)
			}
			replaced = append(replaced, rr.Replaced...)
		}
	}
	e.wakeFor(created)
	e.pushCancels(replaced)
	return true, held, nil
}

// planFire decides what a due job fires at now: the runs for its due instants under its
// misfire policy, and its next fire. A job fired ahead of its instant (CronLead) is planned
// as at its instant, its run scheduled for it.
func (e *Engine) planFire(j *model.Job, now time.Time) store.Fire {
	f := store.Fire{JobID: j.ID, Expect: *j.NextFireAt}
	at := now
	if j.NextFireAt.After(now) {
		at = *j.NextFireAt
	}
	var fire []time.Time
	fire, f.Next = e.planInstants("job", j.ID, j.Name, j.Spec.Schedule, *j.NextFireAt, at)
	for _, at := range fire {
		r := scheduler.NewRun(id.New(now), j, model.TriggerCron, nil, at, now) // scheduled when fired ahead
		r.ScheduledFor = at                                                    // the instant it fires for: one run per (job, instant)
		f.Runs = append(f.Runs, r)
	}
	return f
}

// planInstants returns which instants of schedule s, due since due, fire at now
// (scheduler.PlanFire decides), and where the schedule goes next (nil: nowhere); it logs
// and counts a misfire. kind, id and name name the job or pipeline in logs.
func (e *Engine) planInstants(kind, id, name string, s *model.Schedule, due, now time.Time) ([]time.Time, *time.Time) {
	sc, err := e.sched.get(s)
	if err != nil {
		// Stop the schedule rather than retry it forever; its page shows no next fire.
		e.log.Error("cron schedule no longer parses; it stops firing", kind, id, "cron", s.Cron, "timezone", s.Timezone, "err", err)
		return nil, nil
	}
	p := scheduler.PlanFire(sc, s, due, now, e.cfg.MisfireGrace)
	if p.Missed > 0 || p.Dropped > 0 {
		e.cronMissed.Add(uint64(p.Missed))
		e.cronDropped.Add(uint64(p.Dropped))
		count := fmt.Sprint(p.Missed)
		if p.More {
			count += "+"
		}
		e.log.Warn("cron misfire: instants missed while no server fired them",
			kind, id, "name", name, "policy", misfirePolicy(s), "missed", count,
			"first", due.UTC(), "runs", len(p.Fire), "dropped", p.Dropped, "limit", scheduler.MisfireLimit(s))
	}
	return p.Fire, p.Next
}

func misfirePolicy(s *model.Schedule) string {
	if s.Misfire == "" {
		return model.MisfireRunOnce
	}
	return s.Misfire
}

// CronStats returns what this server's cron loop did since it started. Counts are per
// server: a misfire found by one server of a cluster is counted there.
func (e *Engine) CronStats() model.CronStats {
	return model.CronStats{Runs: e.cronRuns.Load(), Missed: e.cronMissed.Load(), Dropped: e.cronDropped.Load()}
}
