package scheduler

import (
	"time"

	"github.com/stint-dev/stint/internal/cron"
	"github.com/stint-dev/stint/internal/model"
)

// DefaultMisfireLimit caps the instants one fire of a schedule makes runs for, when the
// schedule sets no misfire_limit.
const DefaultMisfireLimit = 100

// FirePlan is what one fire of a schedule does.
type FirePlan struct {
	// Fire lists the instants that get a run, oldest first.
	Fire []time.Time
	// Next is the schedule's next fire, after now; nil when the schedule has no further
	// instant.
	Next *time.Time
	// Missed counts the instants later than the grace; it counts at most the misfire limit
	// plus one of them, and More says there were more.
	Missed int
	More   bool
	// Dropped counts the instants counted (late, and at most the misfire limit plus one on
	// time) that get no run: late ones the misfire policy drops, and those past the limit.
	Dropped int
}

// PlanFire decides what a schedule due at due (its stored next fire) fires at now, given
// sc, its parsed expression, and s, its misfire policy and limit.
//
// Every instant in [due, now] late by at most grace is on time and gets a run under every
// policy. The policy decides only about the instants later than the grace: skip drops
// them, run_once (the default) gives the first of them one run that stands for them all,
// run_all gives each a run. No fire makes more runs than the misfire limit
// (DefaultMisfireLimit when s sets none): past it, the newest instants are dropped.
//
// The next fire is the first instant after now on due's grid (an @every schedule keeps
// the grid of its stored next fire, so missing some of it does not shift later fires).
// When due is after now, nothing fires yet and the next fire stays due.
func PlanFire(sc *cron.Schedule, s *model.Schedule, due, now time.Time, grace time.Duration) FirePlan {
	due = due.UTC()
	if due.After(now) {
		return FirePlan{Next: &due}
	}
	var p FirePlan
	if n := sc.NextAfter(due, now); !n.IsZero() {
		p.Next = &n
	}
	limit := MisfireLimit(s)
	grace = max(grace, 0)
	onTimeFrom := now.Add(-grace) // an instant before this is late
	late, lateMore := instantsIn(sc, due, due, onTimeFrom.Add(-time.Nanosecond), limit+1)
	onTime, _ := instantsIn(sc, due, onTimeFrom, now, limit+1)
	p.Missed, p.More = len(late), lateMore

	var fire []time.Time
	switch {
	case len(late) == 0:
	case s.Misfire == model.MisfireSkip:
	case s.Misfire == model.MisfireRunAll:
		fire = late
	default: // run_once
		fire = late[:1]
	}
	fire = append(fire[:len(fire):len(fire)], onTime...)
	p.Fire = fire[:min(len(fire), limit)]
	p.Dropped = len(late) + len(onTime) - len(p.Fire)
	return p
}

// MisfireLimit is the most runs one fire of s makes: its misfire_limit, or
// DefaultMisfireLimit when it sets none.
func MisfireLimit(s *model.Schedule) int {
	if s.MisfireLimit > 0 {
		return s.MisfireLimit
	}
	return DefaultMisfireLimit
}

// instantsIn lists the instants of sc's grid through due (due, and the instants after it)
// that lie in [from, to], at most limit of them, and whether there are more.
func instantsIn(sc *cron.Schedule, due, from, to time.Time, limit int) ([]time.Time, bool) {
	first := due
	if from.After(due) {
		first = sc.NextAfter(due, from.Add(-time.Nanosecond)) // the first instant >= from
	}
	if first.IsZero() || first.After(to) {
		return nil, false
	}
	if limit <= 0 {
		return nil, true
	}
	rest, more := sc.Missed(first, to, limit-1)
	return append([]time.Time{first}, rest...), more
}
