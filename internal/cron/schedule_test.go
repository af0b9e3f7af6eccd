package cron_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/cron"
)

func mustParse(t testing.TB, expr, zone string) *cron.Schedule {
	t.Helper()
	s, err := cron.Parse(expr, zone)
	require.NoError(t, err)
	return s
}

// TestNextAcrossClockChanges: a wall time in a spring-forward gap fires once, at the end of the
// gap; a wall time repeated by a fall-back change fires once, at its first occurrence, so
// schedules that fire every hour (or more often) do not fire in the repeated hour.
func TestNextAcrossClockChanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, zone, expr, from string
		want                   []string // UTC
	}{
		// Europe/Berlin: 2024-03-31 02:00 CET -> 03:00 CEST (01:00Z); 2024-10-27 03:00 CEST -> 02:00 CET (01:00Z).
		{name: "berlin spring: skipped time fires at the end of the gap", zone: "Europe/Berlin", expr: "30 2 * * *", from: "2024-03-30T12:00:00Z",
			want: []string{"2024-03-31T01:00:00Z", "2024-04-01T00:30:00Z"}},
		{name: "berlin spring: a skipped hour fires once, not four times", zone: "Europe/Berlin", expr: "*/15 2 * * *", from: "2024-03-30T12:00:00Z",
			want: []string{"2024-03-31T01:00:00Z", "2024-04-01T00:00:00Z", "2024-04-01T00:15:00Z"}},
		{name: "berlin spring: hourly fires once for 02:00 and 03:00", zone: "Europe/Berlin", expr: "0 * * * *", from: "2024-03-30T23:30:00Z",
			want: []string{"2024-03-31T00:00:00Z", "2024-03-31T01:00:00Z", "2024-03-31T02:00:00Z"}},
		{name: "berlin spring: times after the gap are untouched", zone: "Europe/Berlin", expr: "30 3 * * *", from: "2024-03-30T12:00:00Z",
			want: []string{"2024-03-31T01:30:00Z"}},
		{name: "berlin fall: repeated time fires at the first only", zone: "Europe/Berlin", expr: "30 2 * * *", from: "2024-10-26T12:00:00Z",
			want: []string{"2024-10-27T00:30:00Z", "2024-10-28T01:30:00Z"}},
		{name: "berlin fall: hourly does not fire in the repeated hour", zone: "Europe/Berlin", expr: "0 * * * *", from: "2024-10-26T22:30:00Z",
			want: []string{"2024-10-26T23:00:00Z", "2024-10-27T00:00:00Z", "2024-10-27T02:00:00Z", "2024-10-27T03:00:00Z"}},
		{name: "berlin fall: every 30 minutes of 2am", zone: "Europe/Berlin", expr: "*/30 2 * * *", from: "2024-10-26T23:50:00Z",
			want: []string{"2024-10-27T00:00:00Z", "2024-10-27T00:30:00Z", "2024-10-28T01:00:00Z"}},
		{name: "berlin fall: from inside the repeated hour", zone: "Europe/Berlin", expr: "30 2 * * *", from: "2024-10-27T01:10:00Z", // 02:10 CET
			want: []string{"2024-10-28T01:30:00Z"}},
		{name: "berlin fall: every second, from inside the repeated hour", zone: "Europe/Berlin", expr: "* * * * * *", from: "2024-10-27T01:59:58Z", // 02:59:58 CET
			// 02:59:59 CET is a repeat of 02:59:59 CEST: the next fire is 03:00 CET.
			want: []string{"2024-10-27T02:00:00Z", "2024-10-27T02:00:01Z"}},
		{name: "berlin fall: every second, end of the first 2am", zone: "Europe/Berlin", expr: "* * * * * *", from: "2024-10-27T00:59:58Z", // 02:59:58 CEST
			// 03:00 CEST does not show: the clocks read 02:00 CET, which was already fired at 02:00 CEST.
			want: []string{"2024-10-27T00:59:59Z", "2024-10-27T02:00:00Z"}},
		{name: "berlin spring: every second jumps the gap", zone: "Europe/Berlin", expr: "* * * * * *", from: "2024-03-31T00:59:58Z", // 01:59:58 CET
			want: []string{"2024-03-31T00:59:59Z", "2024-03-31T01:00:00Z", "2024-03-31T01:00:01Z"}},
		// America/New_York: 2024-03-10 02:00 EST -> 03:00 EDT (07:00Z); 2024-11-03 02:00 EDT -> 01:00 EST (06:00Z).
		{name: "new york spring", zone: "America/New_York", expr: "30 2 * * *", from: "2024-03-09T12:00:00Z",
			want: []string{"2024-03-10T07:00:00Z", "2024-03-11T06:30:00Z"}},
		{name: "new york fall", zone: "America/New_York", expr: "30 1 * * *", from: "2024-11-02T12:00:00Z",
			want: []string{"2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"}},
		{name: "new york fall hourly", zone: "America/New_York", expr: "0 * * * *", from: "2024-11-03T04:30:00Z",
			want: []string{"2024-11-03T05:00:00Z", "2024-11-03T07:00:00Z"}},
		// Australia/Sydney: 2024-04-07 03:00 AEDT -> 02:00 AEST (16:00Z the day before); 2024-10-06 02:00 AEST -> 03:00 AEDT (16:00Z).
		{name: "sydney fall (april)", zone: "Australia/Sydney", expr: "30 2 * * *", from: "2024-04-06T00:00:00Z",
			want: []string{"2024-04-06T15:30:00Z", "2024-04-07T16:30:00Z"}},
		{name: "sydney spring (october)", zone: "Australia/Sydney", expr: "30 2 * * *", from: "2024-10-05T00:00:00Z",
			want: []string{"2024-10-05T16:00:00Z", "2024-10-06T15:30:00Z"}},
		// Australia/Lord_Howe moves by 30 minutes: 2024-04-07 02:00 +11 -> 01:30 +1030 (15:00Z the day before);
		// 2024-10-06 02:00 +1030 -> 02:30 +11 (15:30Z the day before).
		{name: "lord howe fall", zone: "Australia/Lord_Howe", expr: "45 1 * * *", from: "2024-04-06T00:00:00Z",
			want: []string{"2024-04-06T14:45:00Z", "2024-04-07T15:15:00Z"}},
		{name: "lord howe spring", zone: "Australia/Lord_Howe", expr: "15 2 * * *", from: "2024-10-05T00:00:00Z",
			want: []string{"2024-10-05T15:30:00Z", "2024-10-06T15:15:00Z"}},
		{name: "lord howe spring, the time after the gap", zone: "Australia/Lord_Howe", expr: "30 2 * * *", from: "2024-10-05T00:00:00Z",
			want: []string{"2024-10-05T15:30:00Z", "2024-10-06T15:30:00Z"}},
		// Asia/Kolkata has no DST.
		{name: "kolkata", zone: "Asia/Kolkata", expr: "30 2 * * *", from: "2024-03-30T00:00:00Z",
			want: []string{"2024-03-30T21:00:00Z", "2024-03-31T21:00:00Z", "2024-04-01T21:00:00Z"}},
		// Far ahead, the zone's TZ rule serves the offsets, and ZoneBounds is wrong in the last UTC
		// day of a leap year (golang/go#81583).
		{name: "berlin new year 2041", zone: "Europe/Berlin", expr: "0 * * * *", from: "2040-12-30T22:30:00Z",
			want: []string{"2040-12-30T23:00:00Z", "2040-12-31T00:00:00Z", "2040-12-31T01:00:00Z"}},
		{name: "berlin spring 2040 under the TZ rule", zone: "Europe/Berlin", expr: "30 2 * * *", from: "2040-03-24T12:00:00Z",
			want: []string{"2040-03-25T01:00:00Z", "2040-03-26T00:30:00Z"}},
		{name: "sydney across new year 2041", zone: "Australia/Sydney", expr: "0 11 * * *", from: "2040-12-30T00:00:00Z",
			want: []string{"2040-12-31T00:00:00Z", "2041-01-01T00:00:00Z"}},
		// Pacific/Apia skipped 2011-12-30 whole (-10 -> +14 at 10:00Z).
		{name: "apia skipped day", zone: "Pacific/Apia", expr: "0 12 * * *", from: "2011-12-29T12:00:00Z",
			want: []string{"2011-12-29T22:00:00Z", "2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.expr, tt.zone)
			require.Equal(t, tt.want, fires(t, s, at(t, tt.from), len(tt.want)))
		})
	}
}

func TestEveryKeepsAbsoluteSpacing(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ zone, prev string }{
		{"Europe/Berlin", "2024-03-30T22:00:00Z"},    // across spring forward
		{"Europe/Berlin", "2024-10-26T22:00:00Z"},    // across fall back
		{"America/New_York", "2024-11-03T03:00:00Z"}, // across fall back
		{"Australia/Lord_Howe", "2024-10-05T13:00:00Z"},
	} {
		t.Run(tt.zone+" "+tt.prev, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, "@every 1h", tt.zone)
			prev := at(t, tt.prev)
			got, more := s.Missed(prev, prev.Add(6*time.Hour), 100)
			require.False(t, more)
			require.Len(t, got, 6)
			for i, g := range got {
				require.Equal(t, prev.Add(time.Duration(i+1)*time.Hour), g, "fire %d", i)
			}
			// Next and NextAfter keep the same spacing.
			require.Equal(t, prev.Add(time.Hour), s.Next(prev))
			require.Equal(t, prev.Add(4*time.Hour), s.NextAfter(prev, prev.Add(3*time.Hour+time.Minute)))
			// Explain shows the wall time, whatever the clocks did.
			for i, f := range s.Explain(prev, 6) {
				require.Equal(t, got[i], f.At)
				require.False(t, f.Moved())
			}
		})
	}
}

func TestMissed(t *testing.T) {
	t.Parallel()
	quarter := mustParse(t, "*/15 * * * *", "Europe/Berlin")
	prev, now := at(t, "2030-01-02T10:00:00Z"), at(t, "2030-01-02T12:00:00Z")
	all := []string{"10:15", "10:30", "10:45", "11:00", "11:15", "11:30", "11:45", "12:00"}
	hm := func(ts []time.Time) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Format("15:04"))
		}
		return out
	}
	tests := []struct {
		name     string
		s        *cron.Schedule
		prev     time.Time
		now      time.Time
		limit    int
		want     []string
		wantMore bool
	}{
		{name: "all, now included", s: quarter, prev: prev, now: now, limit: 100, want: all},
		{name: "exactly the cap", s: quarter, prev: prev, now: now, limit: 8, want: all},
		{name: "capped", s: quarter, prev: prev, now: now, limit: 3, want: all[:3], wantMore: true},
		{name: "cap zero says whether any", s: quarter, prev: prev, now: now, limit: 0, wantMore: true},
		{name: "none due", s: quarter, prev: prev, now: prev.Add(14 * time.Minute), limit: 10},
		{name: "now before prev", s: quarter, prev: now, now: prev, limit: 10},
		{name: "zero prev missed nothing", s: quarter, prev: time.Time{}, now: now, limit: 10},
		{name: "every, anchored at prev", s: mustParse(t, "@every 25m", ""), prev: prev.Add(7 * time.Second), now: now, limit: 10,
			want: []string{"10:25", "10:50", "11:15", "11:40"}},
		{name: "every, capped", s: mustParse(t, "@every 25m", ""), prev: prev, now: now, limit: 2,
			want: []string{"10:25", "10:50"}, wantMore: true},
		{name: "every, the grid point at now is included", s: mustParse(t, "@every 30m", ""), prev: prev, now: now, limit: 10,
			want: []string{"10:30", "11:00", "11:30", "12:00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, more := tt.s.Missed(tt.prev, tt.now, tt.limit)
			require.Equal(t, tt.want, hm(got))
			require.Equal(t, tt.wantMore, more)
		})
	}
}

// TestMissedEveryYear: a year missed at @every 1s is counted, not walked.
func TestMissedEveryYear(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "@every 1s", "")
	prev := at(t, "2030-01-01T00:00:00Z")
	now := prev.AddDate(1, 0, 0)
	got, more := s.Missed(prev, now, 5)
	require.True(t, more)
	require.Equal(t, []time.Time{prev.Add(1 * time.Second), prev.Add(2 * time.Second), prev.Add(3 * time.Second),
		prev.Add(4 * time.Second), prev.Add(5 * time.Second)}, got)
	got, more = s.Missed(prev, now, 0)
	require.Empty(t, got)
	require.True(t, more)
	require.Equal(t, now.Add(time.Second), s.NextAfter(prev, now))
	// The test would take minutes if Missed walked 31.5 million instants: see BenchmarkMissedEveryYear.
}

func TestNextAfter(t *testing.T) {
	t.Parallel()
	every := mustParse(t, "@every 10m", "")
	daily := mustParse(t, "0 3 * * *", "Europe/Berlin")
	prev := at(t, "2030-01-02T10:00:05Z")
	tests := []struct {
		name      string
		s         *cron.Schedule
		prev, now time.Time
		want      string
	}{
		{name: "every: next grid point", s: every, prev: prev, now: prev.Add(25 * time.Minute), want: "2030-01-02T10:30:05Z"},
		{name: "every: on a grid point, the one after", s: every, prev: prev, now: prev.Add(20 * time.Minute), want: "2030-01-02T10:30:05Z"},
		{name: "every: now is prev", s: every, prev: prev, now: prev, want: "2030-01-02T10:10:05Z"},
		{name: "every: now before prev", s: every, prev: prev, now: prev.Add(-time.Hour), want: "2030-01-02T10:10:05Z"},
		{name: "every: no prev anchors at now", s: every, now: prev, want: "2030-01-02T10:10:05Z"},
		{name: "every: long ago", s: every, prev: prev, now: prev.AddDate(10, 0, 0).Add(time.Second), want: "2040-01-02T10:10:05Z"},
		{name: "calendar: Next(now)", s: daily, prev: at(t, "2030-01-01T02:00:00Z"), now: prev, want: "2030-01-03T02:00:00Z"},
		{name: "calendar: never before prev", s: daily, prev: at(t, "2030-01-03T02:00:00Z"), now: prev, want: "2030-01-04T02:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tt.s.NextAfter(tt.prev, tt.now).Format(time.RFC3339))
		})
	}
}

func BenchmarkNext(b *testing.B) {
	from := time.Date(2030, 1, 2, 12, 34, 56, 0, time.UTC)
	for _, bc := range []struct{ expr, zone string }{
		{"0 2 * * 1-5", "Asia/Kolkata"},
		{"*/15 * * * *", "Europe/Berlin"},
		{"30 2 * * *", "Europe/Berlin"},
		{"0 0 29 2 *", ""},
		{"*/10 * * * * *", "America/New_York"},
	} {
		s := mustParse(b, bc.expr, bc.zone)
		b.Run(fmt.Sprintf("%s in %s", bc.expr, s.Location()), func(b *testing.B) {
			t := from
			for b.Loop() {
				t = s.Next(t)
				if t.Year() > 2200 {
					t = from
				}
			}
		})
	}
}

func BenchmarkMissedEveryYear(b *testing.B) {
	s := mustParse(b, "@every 1s", "")
	prev := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := prev.AddDate(1, 0, 0)
	for b.Loop() {
		if _, more := s.Missed(prev, now, 100); !more {
			b.Fatal("a year at @every 1s is more than 100 fires")
		}
	}
}
