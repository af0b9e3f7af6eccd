package cron

import (
	"math/bits"
	"time"
)

// searchYears bounds the search for the next fire. The Gregorian calendar repeats its dates and
// weekdays every 400 years, so a schedule with no fire in 401 years has none at all.
const searchYears = 401

// Schedule is a parsed cron expression in a time zone. Its methods are pure and safe for
// concurrent use.
type Schedule struct {
	text  string
	loc   *time.Location
	every time.Duration // > 0 for @every, whose fields below are unused

	// Bit v of a set is set when value v is allowed.
	second, minute, hour, dom, month, dow uint64
	// dayAnd: a day must match both day fields (one of them starts with "*"); otherwise either.
	dayAnd bool
}

// Location returns the time zone the calendar fields are read in.
func (s *Schedule) Location() *time.Location { return s.loc }

// String returns the expression normalized: single spaces, upper-case names, a macro's canonical
// name, @every with Go's form of its duration. Parse(s.String(), zone) is the same schedule.
func (s *Schedule) String() string { return s.text }

// Every returns the interval of an @every schedule, or 0 for a calendar schedule.
func (s *Schedule) Every() time.Duration { return s.every }

// Next returns the first fire instant strictly after after, in UTC, or the zero Time when there
// is none within 401 years (a schedule that Parse accepts always has one). For @every it is
// after plus the interval; NextAfter keeps an @every schedule on its grid.
func (s *Schedule) Next(after time.Time) time.Time {
	if s.every > 0 {
		return after.Add(s.every).UTC()
	}
	f, ok := s.next(after)
	if !ok {
		return time.Time{}
	}
	return time.Unix(f.at, 0).UTC()
}

// NextAfter returns the first fire instant strictly after now and after prev, the instant of the
// previous fire. An @every schedule fires on the grid prev + k*interval (k >= 1), anchored at
// now when prev is zero; a calendar schedule fires at Next(max(prev, now)).
func (s *Schedule) NextAfter(prev, now time.Time) time.Time {
	if s.every == 0 {
		if now.Before(prev) {
			now = prev
		}
		return s.Next(now)
	}
	switch {
	case prev.IsZero():
		return now.Add(s.every).UTC()
	case now.Before(prev):
		return prev.Add(s.every).UTC()
	}
	k := now.Sub(prev) / s.every // whole intervals since prev
	return prev.Add(k * s.every).Add(s.every).UTC()
}

// Missed returns the fire instants in (prev, now], in order and in UTC, at most limit of them,
// and whether there are more. An @every schedule's instants are prev + k*interval, computed
// without walking the grid. A zero prev has missed nothing.
func (s *Schedule) Missed(prev, now time.Time, limit int) (instants []time.Time, more bool) {
	if prev.IsZero() || !now.After(prev) {
		return nil, false
	}
	limit = max(limit, 0)
	if s.every > 0 {
		n := int64(now.Sub(prev) / s.every)
		k := min(n, int64(limit))
		instants = make([]time.Time, 0, k)
		for i := int64(1); i <= k; i++ {
			instants = append(instants, prev.Add(time.Duration(i)*s.every).UTC())
		}
		return instants, n > k
	}
	for t := s.Next(prev); !t.IsZero() && !t.After(now); t = s.Next(t) {
		if len(instants) == limit {
			return instants, true
		}
		instants = append(instants, t)
	}
	return instants, false
}

// fire is a calendar fire: the instant, the wall time it was meant for, and how a clock change
// affected it.
type fire struct {
	at   int64 // Unix seconds
	wall int64 // the wall time meant, in seconds since 1970-01-01 00:00:00 of the wall clock
	res  resolution
}

// next returns the first fire of a calendar schedule strictly after after.
//
// Wall times map to instants in order (a gap's times all map to its end, a repeated time to its
// first occurrence), so the first fire is at the first scheduled wall time later than after's
// own whose instant is later than after; only in a repeated range can a later wall time map to
// an earlier instant, and that range is skipped whole.
func (s *Schedule) next(after time.Time) (fire, bool) {
	_, off := after.In(s.loc).Zone()
	afterSec := after.Unix() // whole seconds: a fire at afterSec is not after after
	w := afterSec + int64(off) + 1
	limit := civilOf(w).year + searchYears
	for {
		c, ok := s.nextWall(civilOf(w), limit)
		if !ok {
			return fire{}, false
		}
		w = c.wall()
		r := resolve(w, s.loc)
		if r.at > afterSec {
			return fire{at: r.at, wall: w, res: r}, true
		}
		if r.shift != ShiftNone && r.hi > w {
			w = r.hi // the rest of this gap or repeated range maps to instants no later
		} else {
			w++
		}
	}
}

// civil is a wall-clock time: a date and a time of day, in no zone.
type civil struct{ year, month, day, hour, minute, second int }

func civilOf(wall int64) civil {
	t := time.Unix(wall, 0).UTC()
	y, m, d := t.Date()
	h, mi, sec := t.Clock()
	return civil{y, int(m), d, h, mi, sec}
}

// wall returns c in seconds since 1970-01-01 00:00:00 of the same (UTC-like) clock.
func (c civil) wall() int64 {
	return time.Date(c.year, time.Month(c.month), c.day, c.hour, c.minute, c.second, 0, time.UTC).Unix()
}

// nextWall returns the first wall time at or after c that the fields allow, searching no later
// than the end of year limit. c's fields may run one past their range (hour 24); the search
// carries them over.
func (s *Schedule) nextWall(c civil, limit int) (civil, bool) {
	for c.year <= limit {
		m := nextBit(s.month, c.month)
		if m < 0 {
			c = civil{year: c.year + 1, month: 1, day: 1}
			continue
		}
		if m != c.month {
			c = civil{year: c.year, month: m, day: 1}
		}
		d := nextBit(s.dayMask(c.year, c.month), c.day)
		if d < 0 {
			c = civil{year: c.year, month: c.month + 1, day: 1}
			continue
		}
		if d != c.day {
			c.day, c.hour, c.minute, c.second = d, 0, 0, 0
		}
		h := nextBit(s.hour, c.hour)
		if h < 0 {
			c.day, c.hour, c.minute, c.second = c.day+1, 0, 0, 0
			continue
		}
		if h != c.hour {
			c.hour, c.minute, c.second = h, 0, 0
		}
		mi := nextBit(s.minute, c.minute)
		if mi < 0 {
			c.hour, c.minute, c.second = c.hour+1, 0, 0
			continue
		}
		if mi != c.minute {
			c.minute, c.second = mi, 0
		}
		sec := nextBit(s.second, c.second)
		if sec < 0 {
			c.minute, c.second = c.minute+1, 0
			continue
		}
		c.second = sec
		return c, true
	}
	return civil{}, false
}

// dayMask returns the days (bits 1-31) of a month that the day fields allow.
func (s *Schedule) dayMask(year, month int) uint64 {
	days := time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
	first := int(time.Date(year, time.Month(month), 1, 0, 0, 0, 0, time.UTC).Weekday())
	var byWeekday uint64
	for wd := range 7 {
		if s.dow&(1<<wd) == 0 {
			continue
		}
		for d := 1 + (wd-first+7)%7; d <= days; d += 7 {
			byWeekday |= 1 << d
		}
	}
	valid := uint64(1)<<(days+1) - 2
	if s.dayAnd {
		return s.dom & byWeekday & valid
	}
	return (s.dom | byWeekday) & valid
}

// nextBit returns the smallest set bit of set at from or above, or -1.
func nextBit(set uint64, from int) int {
	if from < 0 {
		from = 0
	}
	if from > 63 {
		return -1
	}
	rest := set >> from
	if rest == 0 {
		return -1
	}
	return from + bits.TrailingZeros64(rest)
}
