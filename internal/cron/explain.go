package cron

import (
	"fmt"
	"time"
)

// Fire is one fire of a schedule, as Explain describes it.
type Fire struct {
	At    time.Time // the instant, in UTC
	Local time.Time // At in the schedule's zone
	// Wall is the wall-clock time the schedule named, "2006-01-02 15:04:05" in the schedule's
	// zone. It differs from Local's wall time when the clocks jumped over it.
	Wall  string
	Shift Shift  // how a clock change affected this fire
	Note  string // for a shifted fire: what happened, in a sentence
}

// Moved reports whether a clock change moved the fire: the wall time it was meant for does not
// exist, or exists twice and this is the first of the two.
func (f Fire) Moved() bool { return f.Shift != ShiftNone }

const wallLayout = "2006-01-02 15:04:05"

// Explain returns the first n fires strictly after from, saying of each whether a clock change
// moved it and how. It returns fewer when the schedule has no more.
func (s *Schedule) Explain(from time.Time, n int) []Fire {
	out := make([]Fire, 0, max(min(n, 1000), 0))
	if s.every > 0 {
		for i := 1; i <= n; i++ {
			at := from.Add(time.Duration(i) * s.every).UTC()
			local := at.In(s.loc)
			out = append(out, Fire{At: at, Local: local, Wall: local.Format(wallLayout)})
		}
		return out
	}
	for t := from; len(out) < n; {
		f, ok := s.next(t)
		if !ok {
			break
		}
		out = append(out, s.describe(f))
		t = time.Unix(f.at, 0)
	}
	return out
}

func (s *Schedule) describe(f fire) Fire {
	at := time.Unix(f.at, 0).UTC()
	local := at.In(s.loc)
	out := Fire{At: at, Local: local, Wall: time.Unix(f.wall, 0).UTC().Format(wallLayout), Shift: f.res.shift}
	r := f.res
	meant := time.Unix(f.wall, 0).UTC()
	day := meant.Format("2006-01-02")
	switch r.shift {
	case ShiftGap:
		out.Note = fmt.Sprintf("%s does not exist on %s in %s: clocks jump from %s %s to %s %s; fires at %s %s, the first instant after the gap",
			clockOf(f.wall), day, s.loc, clockOf(r.lo), r.before.name, clockOf(r.hi), r.after.name, clockOf(r.hi), r.after.name)
		if n := s.countWalls(r.lo, r.hi); n > 1 {
			out.Note += fmt.Sprintf(" (the %d scheduled times in the gap fire once, here)", n)
		}
	case ShiftOverlap:
		out.Note = fmt.Sprintf("%s occurs twice on %s in %s: clocks go back from %s %s to %s %s; fires at the first (%s) only",
			clockOf(f.wall), day, s.loc, clockOf(r.hi), r.before.name, clockOf(r.lo), r.after.name, r.before.name)
	}
	return out
}

// countWalls counts the scheduled wall times in [lo, hi).
func (s *Schedule) countWalls(lo, hi int64) int {
	n := 0
	limit := civilOf(hi).year
	for w := lo; ; w++ {
		c, ok := s.nextWall(civilOf(w), limit)
		if !ok {
			return n
		}
		if w = c.wall(); w >= hi {
			return n
		}
		n++
	}
}

// clockOf shows a wall time of day: 15:04, or 15:04:05 when it has seconds.
func clockOf(wall int64) string {
	t := time.Unix(wall, 0).UTC()
	if t.Second() != 0 {
		return t.Format("15:04:05")
	}
	return t.Format("15:04")
}
