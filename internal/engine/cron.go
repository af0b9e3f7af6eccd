package engine

import (
	"time"

	"github.com/stint-dev/stint/internal/cron"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/service"
)

// DefaultMisfireGrace is how late an instant may fire and still count as on time
// (scheduler.PlanFire); Config.MisfireGrace's default.
const DefaultMisfireGrace = service.DefaultMisfireGrace

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

// CronStats returns what this server's cron loop did since it started. Counts are per
// server: a misfire found by one server of a cluster is counted there.
func (e *Engine) CronStats() model.CronStats {
	return model.CronStats{Runs: e.cronRuns.Load(), Missed: e.cronMissed.Load(), Dropped: e.cronDropped.Load()}
}
