package cron

import (
	"errors"
	"testing"
	"time"
)

// fuzzZones are zones with gaps and overlaps of all kinds: an hour, 30 minutes (Lord_Howe), 2
// hours (Troll), a whole day (Apia), southern hemisphere, none (Kolkata, UTC).
var fuzzZones = []string{"", "Europe/Berlin", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe",
	"Asia/Kolkata", "Pacific/Apia", "America/Santiago", "Asia/Kathmandu", "Antarctica/Troll", "Pacific/Chatham",
	"Africa/Casablanca", "America/St_Johns"}

// FuzzParse: Parse never panics and refuses with a *Error naming the field; an accepted
// schedule re-parses from its String, and from any instant its next fire is later, the first
// one (none before it), followed by a later one, and at a wall time the fields allow (or at the
// end of the gap that skipped such a time). Seeds: below and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, seed := range []struct {
		expr, zone string
		sec        int64
	}{
		{"0 2 * * 1-5", "Asia/Kolkata", 1893456000},
		{"30 2 * * *", "Europe/Berlin", 1711843200},
		{"*/15 2 * * *", "Europe/Berlin", 1711843200},
		{"0 * * * *", "Europe/Berlin", 1729987200},
		{"* * * * * *", "America/New_York", 1730613600},
		{"15 2 * * *", "Australia/Lord_Howe", 1728140000},
		{"0 12 * * *", "Pacific/Apia", 1325196000},
		{"0 0 29 2 *", "", 1798761600},
		{"0 0 29 2 */6", "UTC", 1798761600},
		{"0 0 13 * FRI", "America/Santiago", 1700000000},
		{"0 0 */2 * MON", "Australia/Sydney", 1700000000},
		{"10-40/15 */6 * JAN,JUL SUN-SAT", "Europe/London", -2000000000},
		{"@every 90s", "Europe/Berlin", 0},
		{"@hourly", "America/St_Johns", 1600000000},
		{"@weekly", "Asia/Kathmandu", 2240528400},
		{"0 0 31 * *", "Europe/Berlin", 2240528400},
		{"61 * * * *", "", 0},
		{"0 0 30 2 *", "", 0},
		{"TZ=UTC 0 0 * * *", "", 0},
		{"0 2 * * *", "Mars/Olympus_Mons", 0},
		{"1,,2 * * * *", "", 0},
		{"*-5 */0 ? L 5#3", "", 0},
		{"@every 500ms", "", 0},
	} {
		f.Add(seed.expr, seed.zone, seed.sec)
	}
	f.Fuzz(func(t *testing.T, expr, zone string, sec int64) {
		s, err := Parse(expr, zone)
		var ce *Error
		if err != nil && (!errors.As(err, &ce) || (ce.Field != FieldCron && ce.Field != FieldTimezone) || ce.Message == "") {
			t.Fatalf("Parse(%q, %q): %v (%T) is not a *Error with a field and a message", expr, zone, err, err)
		}
		if err != nil && ce.Field == FieldTimezone {
			// Random zone names are seldom real: check the expression in a zone picked by sec.
			zone = fuzzZones[uint64(sec)%uint64(len(fuzzZones))]
			s, err = Parse(expr, zone)
		}
		if err != nil {
			return
		}
		again, err := Parse(s.String(), zone)
		if err != nil || again.String() != s.String() {
			t.Fatalf("%q normalizes to %q, which parses to %v, %v", expr, s.String(), again, err)
		}

		// An instant between 1850 and 2450, at a whole second or half past.
		const lo, span = -3786825600, 600 * 31556952
		from := time.Unix(lo+(sec%span+span)%span, (sec&1)*5e8)
		next := s.Next(from)
		if next.IsZero() {
			t.Fatalf("%s in %s: no fire after %s, yet Parse accepted it", s, s.loc, from)
		}
		if !next.After(from) || next.Location() != time.UTC {
			t.Fatalf("%s in %s: Next(%s) = %s", s, s.loc, from, next)
		}
		if got := again.Next(from); !got.Equal(next) {
			t.Fatalf("%s in %s: the normalized form fires at %s, not %s", s, s.loc, got, next)
		}
		if after := s.Next(next); !after.After(next) {
			t.Fatalf("%s in %s: Next(%s) = %s", s, s.loc, next, after)
		}
		if s.every > 0 {
			if !next.Equal(from.Add(s.every)) {
				t.Fatalf("%s: Next(%s) = %s", s, from, next)
			}
			return
		}
		if mid := from.Add(next.Sub(from) / 2); !s.Next(mid).Equal(next) {
			t.Fatalf("%s in %s: Next(%s) = %s but Next(%s) = %s", s, s.loc, from, next, mid, s.Next(mid))
		}
		f, ok := s.next(from)
		if !ok || f.at != next.Unix() || !s.matches(f.wall) {
			t.Fatalf("%s in %s: fire %+v after %s is not at a scheduled wall time", s, s.loc, f, from)
		}
		_, off := next.In(s.loc).Zone()
		shows := next.Unix()+int64(off) == f.wall
		switch f.res.shift {
		case ShiftGap:
			_, before := zoneAt(s.loc, next.Unix()-1)
			if shows || before == off || f.wall < f.res.lo || f.wall >= f.res.hi {
				t.Fatalf("%s in %s: %s is not the end of a gap over %s", s, s.loc, next, time.Unix(f.wall, 0).UTC())
			}
		default:
			if !shows {
				t.Fatalf("%s in %s: %s does not show the wall time %s", s, s.loc, next.In(s.loc), time.Unix(f.wall, 0).UTC())
			}
		}
	})
}
