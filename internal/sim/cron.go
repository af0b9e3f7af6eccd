package sim

import (
	"fmt"
	"sort"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
)

// cronSpec is a schedule the clients use, with an oracle written here, apart from package
// cron: which wall-clock times of its zone it names. Most of them name times that a DST
// change skips or repeats in the zones the simulation starts in (01:00-03:00 local).
type cronSpec struct {
	expr string
	// wall reports whether the schedule names local wall-clock time t; nil for @every,
	// which counts absolute time.
	wall func(t time.Time) bool
}

var cronSpecs = []cronSpec{
	{"30 2 * * *", func(t time.Time) bool { return hm(t, 2, 30) }},
	{"30 1 * * *", func(t time.Time) bool { return hm(t, 1, 30) }},
	{"0 2 * * *", func(t time.Time) bool { return hm(t, 2, 0) }},
	{"0 * * * *", func(t time.Time) bool { return t.Minute() == 0 && t.Second() == 0 }},
	{"15,45 * * * *", func(t time.Time) bool { return (t.Minute() == 15 || t.Minute() == 45) && t.Second() == 0 }},
	{"*/20 1-3 * * *", func(t time.Time) bool {
		return t.Hour() >= 1 && t.Hour() <= 3 && t.Minute()%20 == 0 && t.Second() == 0
	}},
	{"*/10 1-2 * * *", func(t time.Time) bool {
		return t.Hour() >= 1 && t.Hour() <= 2 && t.Minute()%10 == 0 && t.Second() == 0
	}},
	{"*/5 * * * *", func(t time.Time) bool { return t.Minute()%5 == 0 && t.Second() == 0 }},
	{"@every 25m", nil},
	{"@every 7m", nil},
}

func hm(t time.Time, h, m int) bool { return t.Hour() == h && t.Minute() == m && t.Second() == 0 }

// afterGap reports whether t is the first instant after a change of its zone's offset: where
// a wall-clock time that a spring-forward skipped fires (docs/cron.md, rule 1).
func afterGap(t time.Time) bool {
	_, before := t.Add(-time.Nanosecond).Zone()
	_, at := t.Zone()
	return at > before
}

// secondOccurrence reports whether t's wall-clock time was shown before, by an instant up to
// two hours earlier: t is then the repeat of a time a fall-back repeated, which fires only
// at its first occurrence (docs/cron.md, rule 2).
func secondOccurrence(t time.Time) bool {
	wall := t.Format("2006-01-02 15:04:05")
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if t.Add(-d).Format("2006-01-02 15:04:05") == wall {
			return true
		}
	}
	return false
}

// cronCheck checks what one job's cron runs show, as they appear: no instant twice, every
// instant on the schedule's grid (package cron's), and, for wall-clock schedules, the
// oracle's word for each (a named wall time, or the end of a DST gap) and no wall-clock time
// twice (rule 2: a repeated hour does not fire again).
type cronCheck struct {
	job     *simJob
	grid    []time.Time // the schedule's instants from the job's first fire on, as far as needed
	fired   map[time.Time]*model.Run
	walls   map[string]time.Time
	checked map[string]bool // runs already looked at
}

func newCronCheck(j *simJob) *cronCheck {
	return &cronCheck{job: j, fired: map[time.Time]*model.Run{}, walls: map[string]time.Time{}, checked: map[string]bool{}}
}

// gridTo extends the grid to cover t and reports whether t is on it.
func (c *cronCheck) gridTo(t time.Time) bool {
	if c.job.job.NextFireAt == nil {
		return false
	}
	if len(c.grid) == 0 {
		c.grid = append(c.grid, c.job.job.NextFireAt.UTC())
	}
	for last := c.grid[len(c.grid)-1]; last.Before(t); last = c.grid[len(c.grid)-1] {
		n := c.job.sched.NextAfter(last, last)
		if n.IsZero() {
			break
		}
		c.grid = append(c.grid, n.UTC())
	}
	i := sort.Search(len(c.grid), func(i int) bool { return !c.grid[i].Before(t) })
	return i < len(c.grid) && c.grid[i].Equal(t)
}

// see checks a cron run of the job the first time it appears.
func (c *cronCheck) see(r *model.Run) error {
	if c.checked[r.ID] {
		return nil
	}
	c.checked[r.ID] = true
	at := r.ScheduledFor.UTC() // a cron run's instant, until a retry moves it
	if r.Instant != nil {
		at = r.Instant.UTC()
	}
	if other := c.fired[at]; other != nil {
		return fmt.Errorf("job %s fired instant %s twice: runs %s and %s", c.job.job.ID, at.Format(time.RFC3339), other.ID, r.ID)
	}
	c.fired[at] = r
	if !c.gridTo(at) {
		return fmt.Errorf("job %s (%q in %s) fired %s, which is not on its schedule's grid", c.job.job.ID,
			c.job.job.Spec.Schedule.Cron, c.job.job.Spec.Schedule.Timezone, at.Format(time.RFC3339))
	}
	if c.job.cron.wall == nil {
		return nil
	}
	local := at.In(c.job.sched.Location())
	if !c.job.cron.wall(local) && !afterGap(local) {
		return fmt.Errorf("job %s (%q in %s) fired at local %s: not a time it names, nor the end of a DST gap",
			c.job.job.ID, c.job.cron.expr, local.Location(), local.Format("2006-01-02 15:04:05 MST"))
	}
	if secondOccurrence(local) {
		return fmt.Errorf("job %s (%q in %s) fired at local %s, the second occurrence of that wall time",
			c.job.job.ID, c.job.cron.expr, local.Location(), local.Format("2006-01-02 15:04:05 MST"))
	}
	wall := local.Format("2006-01-02 15:04:05")
	if prev, ok := c.walls[wall]; ok {
		return fmt.Errorf("job %s (%q in %s) fired local wall time %s twice: at %s and %s UTC",
			c.job.job.ID, c.job.cron.expr, local.Location(), wall, prev.Format("15:04"), at.Format("15:04"))
	}
	c.walls[wall] = at
	return nil
}

// coverage checks, once the run is over, that the job fired every instant that was due
// while the server was up, and that its misfire policy held for the ones it missed.
//
// Up: the services completed a round at some instant s with t <= s <= t+grace (settles,
// ascending), while the job existed. The cron firer then ran at s or before (every round
// runs the firer when one of its instants is due) and PlanFire makes every instant at most
// a grace late a run, whatever the policy (the simulation's schedules fire at most every
// 5 minutes, so no misfire limit cuts an on-time instant).
//
// Missed (fired later than the grace, after a server was down): skip fires none of them;
// run_once at most one per fire, the first of the fire; run_all all of them, so its fired
// instants are the whole grid up to the last (no gap).
func (c *cronCheck) coverage(settles []time.Time, until time.Time, stats *Stats) error {
	j := c.job
	if j.job.NextFireAt == nil {
		return nil
	}
	c.gridTo(until)
	for _, t := range c.grid {
		if t.After(until) {
			break
		}
		i := sort.Search(len(settles), func(i int) bool { return !settles[i].Before(t) })
		if i == len(settles) || settles[i].After(t.Add(misfireGrace)) {
			continue // no round ran within the grace: missed
		}
		if !j.deleted.IsZero() && !settles[i].Before(j.deleted) {
			continue
		}
		if c.fired[t] == nil {
			return fmt.Errorf("job %s (%q in %s) did not fire %s (local %s) though the server's services ran at %s",
				j.job.ID, j.job.Spec.Schedule.Cron, j.job.Spec.Schedule.Timezone, t.Format(time.RFC3339),
				t.In(j.sched.Location()).Format("15:04 MST"), settles[i].UTC().Format("15:04:05.000"))
		}
	}

	policy := j.job.Spec.Schedule.Misfire
	byFire := map[time.Time][]time.Time{} // instants by the time of the fire that made them
	for t, r := range c.fired {
		byFire[r.CreatedAt] = append(byFire[r.CreatedAt], t)
	}
	fires := make([]time.Time, 0, len(byFire))
	for f := range byFire {
		fires = append(fires, f)
	}
	sort.Slice(fires, func(a, b int) bool { return fires[a].Before(fires[b]) })
	for _, f := range fires {
		ts := byFire[f]
		sort.Slice(ts, func(a, b int) bool { return ts[a].Before(ts[b]) })
		var late []time.Time
		for _, t := range ts {
			if t.Before(f.Add(-misfireGrace)) {
				late = append(late, t)
			}
		}
		stats.LateFires += len(late)
		switch {
		case policy == model.MisfireSkip && len(late) > 0:
			return fmt.Errorf("job %s (misfire skip) fired missed instant %s at %s", j.job.ID, late[0].Format(time.RFC3339), f.UTC().Format(time.RFC3339))
		case (policy == "" || policy == model.MisfireRunOnce) && (len(late) > 1 || len(late) == 1 && !late[0].Equal(ts[0])):
			return fmt.Errorf("job %s (misfire run_once) fired missed instants %v at %s", j.job.ID, late, f.UTC().Format(time.RFC3339))
		}
	}
	if policy == model.MisfireRunAll && len(c.fired) > 0 && len(c.fired) <= scheduler.DefaultMisfireLimit {
		var last time.Time
		for t := range c.fired {
			if t.After(last) {
				last = t
			}
		}
		for _, t := range c.grid {
			if t.After(last) {
				break
			}
			if c.fired[t] == nil && (j.deleted.IsZero() || t.Before(j.deleted)) {
				return fmt.Errorf("job %s (misfire run_all) skipped instant %s (it fired %s later)", j.job.ID, t.Format(time.RFC3339), last.Format(time.RFC3339))
			}
		}
	}
	return nil
}
