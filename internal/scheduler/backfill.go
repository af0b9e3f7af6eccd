package scheduler

import (
	"time"

	"github.com/stint-dev/stint/internal/cron"
	"github.com/stint-dev/stint/internal/model"
)

// BackfillInstants lists the instants of schedule sc in [from, to] that a backfill at now
// may give a run, at most limit of them, and whether there are more. Instants after now
// are not listed: they are the schedule's to fire when they come. An @every schedule's
// instants are those of the grid through anchor (anchor plus or minus whole intervals;
// GridAnchor), so they are the instants the job fires at; a calendar schedule ignores
// anchor.
func BackfillInstants(sc *cron.Schedule, anchor, from, to, now time.Time, limit int) ([]time.Time, bool) {
	if to.After(now) {
		to = now
	}
	if to.Before(from) {
		return nil, false
	}
	var first time.Time
	if every := sc.Every(); every > 0 {
		if anchor.IsZero() {
			anchor = from
		}
		k := from.Sub(anchor) / every // whole intervals from anchor toward from, rounded toward anchor
		if first = anchor.Add(k * every); first.Before(from) {
			first = first.Add(every)
		}
		first = first.UTC()
	} else if first = sc.Next(from.Add(-time.Nanosecond)); first.IsZero() {
		return nil, false
	}
	return instantsIn(sc, first, first, to, limit)
}

// GridAnchor returns an instant of job j's @every grid, for BackfillInstants: its next
// fire, which every fire moves along the grid set when the job was created (or its
// schedule last changed, or it resumed); without one (paused, disabled), the newest of
// fired, the instants it has runs for (ascending); else the grid of its creation.
func GridAnchor(j *model.Job, fired []time.Time) time.Time {
	switch {
	case j.NextFireAt != nil:
		return *j.NextFireAt
	case len(fired) > 0:
		return fired[len(fired)-1]
	}
	return j.CreatedAt
}
