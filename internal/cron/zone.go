package cron

import (
	"math"
	"time"
)

// Shift is how a clock change (daylight saving time, or a zone changing its offset) affected a
// fire.
type Shift string

// The shifts.
const (
	// ShiftNone: the wall time exists once, and the fire is at it.
	ShiftNone Shift = ""
	// ShiftGap: the wall time does not exist (the clocks jumped over it); the fire is at the
	// first instant after the gap.
	ShiftGap Shift = "gap"
	// ShiftOverlap: the wall time exists twice (the clocks went back over it); the fire is at
	// the first of the two, and the second does not fire.
	ShiftOverlap Shift = "overlap"
)

// zoneSpan is the zone in force on one side of a clock change.
type zoneSpan struct {
	name   string
	offset int64 // seconds east of UTC
}

// resolution is the instant a wall time fires at.
type resolution struct {
	at    int64 // Unix seconds
	shift Shift
	// For a gap or overlap: the wall times [lo, hi) that the change skipped or repeated, and the
	// zones before and after it.
	lo, hi        int64
	before, after zoneSpan
}

// window is more than the largest difference between two offsets of one zone (about 26 hours,
// and about 16 hours of local mean time in history), so every instant that shows wall time w
// lies within window of w read as UTC.
const window = 36 * 60 * 60

// resolve returns the instant at which wall time w (seconds since 1970-01-01 00:00:00 of the
// wall clock) fires in loc: the one instant that shows it; the first of two; or, for a wall time
// that does not exist, the first instant after the gap.
func resolve(w int64, loc *time.Location) resolution {
	// Fast path: the zone in force around the instant has no change within window of it.
	_, off := time.Unix(w, 0).In(loc).Zone()
	u := w - int64(off)
	t := time.Unix(u, 0).In(loc)
	if _, offU := t.Zone(); offU == off {
		start, end := t.ZoneBounds()
		if (start.IsZero() || start.Unix() <= u-window) && (end.IsZero() || end.Unix() > u+window) {
			return resolution{at: u}
		}
	}
	return resolveNearChange(w, loc)
}

// resolveNearChange walks the spans of one offset around w in time order.
func resolveNearChange(w int64, loc *time.Location) resolution {
	var (
		first resolution
		found bool
	)
	name, off := zoneAt(loc, w-window)
	span := zoneSpan{name: name, offset: int64(off)}
	changes := offsetChanges(loc, w-window, w+window, span)
	for i := 0; i <= len(changes); i++ {
		start, end := int64(math.MinInt64), int64(math.MaxInt64)
		if i > 0 {
			c := changes[i-1]
			start, span = c.at, c.after
			if lo, hi := c.at+c.before.offset, c.at+c.after.offset; !found && lo <= w && w < hi {
				// The clocks jumped forward over w: fire when they did.
				return resolution{at: c.at, shift: ShiftGap, lo: lo, hi: hi, before: c.before, after: c.after}
			}
		}
		if i < len(changes) {
			end = changes[i].at
		}
		if u := w - span.offset; start <= u && u < end {
			if found {
				// w shows again after the change at start: the clocks went back over it.
				first.shift, first.after = ShiftOverlap, span
				first.lo, first.hi = start+span.offset, start+first.before.offset
				return first
			}
			first, found = resolution{at: u, before: span}, true
		}
	}
	if found {
		return resolution{at: first.at}
	}
	// No span shows w and no change skips it: impossible for a well-formed zone. Take what the
	// time package says.
	c := civilOf(w)
	return resolution{at: time.Date(c.year, time.Month(c.month), c.day, c.hour, c.minute, c.second, 0, loc).Unix()}
}

// offsetChange is a change of a zone's offset from UTC.
type offsetChange struct {
	at            int64 // Unix seconds: the first instant of the new offset
	before, after zoneSpan
}

// offsetChanges lists the changes of offset in (from, to]; cur is the zone in force at from.
func offsetChanges(loc *time.Location, from, to int64, cur zoneSpan) []offsetChange {
	var out []offsetChange
	for t := from; ; {
		at, ok := nextOffsetChange(loc, t, to, cur.offset)
		if !ok {
			return out
		}
		name, off := zoneAt(loc, at)
		next := zoneSpan{name: name, offset: int64(off)}
		out = append(out, offsetChange{at: at, before: cur, after: next})
		t, cur = at, next
	}
}

// nextOffsetChange returns the first instant after t, and no later than limit, whose offset
// differs from off, the offset at t.
func nextOffsetChange(loc *time.Location, t, limit int64, off int64) (int64, bool) {
	for t < limit {
		_, end := time.Unix(t, 0).In(loc).ZoneBounds()
		switch {
		case end.IsZero():
			return 0, false
		case end.Unix() > t:
			// A zone boundary; some (new year under a TZ rule, a new abbreviation) keep the offset.
			if t = end.Unix(); t > limit {
				return 0, false
			}
			if _, o := zoneAt(loc, t); int64(o) != off {
				return t, true
			}
		default:
			// ZoneBounds answered an end that is not after t (it does so in the last UTC day of
			// leap years served by a zone's TZ rule, golang/go#81583): step by the hour and
			// bisect.
			next := t + 3600
			if _, o := zoneAt(loc, next); int64(o) != off {
				for next-t > 1 {
					mid := t + (next-t)/2
					if _, o := zoneAt(loc, mid); int64(o) != off {
						next = mid
					} else {
						t = mid
					}
				}
				return next, next <= limit
			}
			t = next
		}
	}
	return 0, false
}

// zoneAt returns the zone's abbreviation and offset at Unix second t.
func zoneAt(loc *time.Location, t int64) (string, int) {
	return time.Unix(t, 0).In(loc).Zone()
}
