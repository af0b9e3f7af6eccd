package cron

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// matches reports whether the fields allow wall time w, checked without the code under test.
func (s *Schedule) matches(w int64) bool {
	t := time.Unix(w, 0).UTC()
	in := func(set uint64, v int) bool { return set&(1<<v) != 0 }
	dom, dow := in(s.dom, t.Day()), in(s.dow, int(t.Weekday()))
	day := dom || dow
	if s.dayAnd {
		day = dom && dow
	}
	return day && in(s.month, int(t.Month())) && in(s.hour, t.Hour()) && in(s.minute, t.Minute()) && in(s.second, t.Second())
}

// oracle lists the fires in [from, to) by walking every minute of real time: an instant fires
// when the wall time it shows is scheduled and has not shown before (so a repeated time fires at
// its first occurrence), and an instant where the clocks jumped forward fires when any wall time
// they jumped over is scheduled. For minute-level schedules in zones whose offsets are whole
// minutes.
func oracle(s *Schedule, from, to time.Time) []time.Time {
	var out []time.Time
	seen := map[int64]bool{}
	wallOf := func(t time.Time) int64 {
		_, off := t.In(s.loc).Zone()
		return t.Unix() + int64(off)
	}
	prevWall := wallOf(from.Add(-time.Minute))
	for t := from; t.Before(to); t = t.Add(time.Minute) {
		w := wallOf(t)
		fires := s.matches(w) && !seen[w]
		for skipped := prevWall + 60; skipped < w && !fires; skipped += 60 {
			fires = s.matches(skipped)
		}
		if fires {
			out = append(out, t)
		}
		seen[w] = true
		prevWall = w
	}
	return out
}

// TestNextAgainstOracle compares Next with the oracle over four days around every clock change
// of several zones.
func TestNextAgainstOracle(t *testing.T) {
	t.Parallel()
	exprs := []string{
		"30 2 * * *", "*/15 2 * * *", "0 * * * *", "*/7 * * * *", "0 0 * * *", "15,45 1-3 * * 0",
		"0 2 * * MON-FRI", "@hourly", "0,30 2,3 * * *", "59 23 * * *", "0 1 * * *", "30 0 * * *",
		"*/20 * 13 * 5", "10 */2 * * *",
	}
	zones := []struct {
		name     string
		from, to string
	}{
		{"Europe/Berlin", "2024-01-01", "2026-01-01"},
		{"America/New_York", "2024-01-01", "2026-01-01"},
		{"Australia/Sydney", "2024-01-01", "2026-01-01"},
		{"Australia/Lord_Howe", "2024-01-01", "2026-01-01"},
		{"America/Santiago", "2024-01-01", "2026-01-01"},
		{"America/St_Johns", "2024-01-01", "2025-01-01"},
		{"Pacific/Apia", "2011-06-01", "2012-06-01"},
		{"Europe/Berlin", "2040-01-01", "2041-06-01"}, // served by the zone's TZ rule
	}
	for _, z := range zones {
		loc, err := time.LoadLocation(z.name)
		require.NoError(t, err)
		from, err := time.Parse(time.DateOnly, z.from)
		require.NoError(t, err)
		to, err := time.Parse(time.DateOnly, z.to)
		require.NoError(t, err)
		var changes []offsetChange
		name, off := zoneAt(loc, from.Unix())
		changes = offsetChanges(loc, from.Unix(), to.Unix(), zoneSpan{name: name, offset: int64(off)})
		require.NotEmpty(t, changes, "%s has clock changes between %s and %s", z.name, z.from, z.to)
		for _, c := range changes {
			for _, expr := range exprs {
				t.Run(fmt.Sprintf("%s %s %s", z.name, time.Unix(c.at, 0).UTC().Format(time.RFC3339), expr), func(t *testing.T) {
					t.Parallel()
					s, err := Parse(expr, z.name)
					require.NoError(t, err)
					start := time.Unix(c.at, 0).Add(-48 * time.Hour).Truncate(time.Hour)
					end := start.Add(96 * time.Hour)
					want := oracle(s, start, end)
					var got []time.Time
					for next := s.Next(start.Add(-time.Second)); next.Before(end); next = s.Next(next) {
						got = append(got, next)
					}
					require.Equal(t, fmtTimes(want), fmtTimes(got))
				})
			}
		}
	}
}

func fmtTimes(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format(time.RFC3339)
	}
	return out
}

// TestOffsetChanges checks the list of clock changes against known ones.
func TestOffsetChanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		zone     string
		from, to string
		want     []string // at before after
	}{
		{"Europe/Berlin", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"2024-03-31T01:00:00Z CET+3600 CEST+7200", "2024-10-27T01:00:00Z CEST+7200 CET+3600"}},
		{"Australia/Lord_Howe", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"2024-04-06T15:00:00Z +11+39600 +1030+37800", "2024-10-05T15:30:00Z +1030+37800 +11+39600"}},
		{"Asia/Kolkata", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", nil},
		{"UTC", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", nil},
		// Across the end of a leap year served by the TZ rule (golang/go#81583).
		{"Europe/Berlin", "2040-10-01T00:00:00Z", "2041-04-01T00:00:00Z",
			[]string{"2040-10-28T01:00:00Z CEST+7200 CET+3600", "2041-03-31T01:00:00Z CET+3600 CEST+7200"}},
	}
	for _, tt := range tests {
		t.Run(tt.zone+" "+tt.from, func(t *testing.T) {
			t.Parallel()
			loc, err := time.LoadLocation(tt.zone)
			require.NoError(t, err)
			from, err := time.Parse(time.RFC3339, tt.from)
			require.NoError(t, err)
			to, err := time.Parse(time.RFC3339, tt.to)
			require.NoError(t, err)
			name, off := zoneAt(loc, from.Unix())
			var got []string
			for _, c := range offsetChanges(loc, from.Unix(), to.Unix(), zoneSpan{name: name, offset: int64(off)}) {
				got = append(got, fmt.Sprintf("%s %s%+d %s%+d", time.Unix(c.at, 0).UTC().Format(time.RFC3339),
					c.before.name, c.before.offset, c.after.name, c.after.offset))
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// TestNextNever: a schedule with no fire answers the zero Time after a bounded search. Parse
// refuses such expressions, so the fields are set by hand.
func TestNextNever(t *testing.T) {
	t.Parallel()
	s, err := Parse("0 0 29 2 *", "Europe/Berlin")
	require.NoError(t, err)
	s.dom = 1 << 30 // 0 0 30 2 *
	from := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	require.True(t, s.Next(from).IsZero())
	got, more := s.Missed(from, from.AddDate(5, 0, 0), 10)
	require.Empty(t, got)
	require.False(t, more)
	require.True(t, s.NextAfter(from, from).IsZero())
	require.Empty(t, s.Explain(from, 3))
}
