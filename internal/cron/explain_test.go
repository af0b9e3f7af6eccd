package cron_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/cron"
)

func TestExplain(t *testing.T) {
	t.Parallel()
	type fire struct{ at, local, wall string }
	tests := []struct {
		name, expr, zone, from string
		n                      int
		want                   []fire
		shift                  []cron.Shift
		notes                  []string
	}{
		{name: "spring forward", expr: "30 2 * * *", zone: "Europe/Berlin", from: "2024-03-30T00:00:00Z", n: 3,
			want: []fire{
				{"2024-03-30T01:30:00Z", "2024-03-30T02:30:00+01:00", "2024-03-30 02:30:00"},
				{"2024-03-31T01:00:00Z", "2024-03-31T03:00:00+02:00", "2024-03-31 02:30:00"},
				{"2024-04-01T00:30:00Z", "2024-04-01T02:30:00+02:00", "2024-04-01 02:30:00"},
			},
			shift: []cron.Shift{cron.ShiftNone, cron.ShiftGap, cron.ShiftNone},
			notes: []string{"", "02:30 does not exist on 2024-03-31 in Europe/Berlin: clocks jump from 02:00 CET to 03:00 CEST; fires at 03:00 CEST, the first instant after the gap", ""}},
		{name: "a gap's times collapse", expr: "*/15 2 * * *", zone: "Europe/Berlin", from: "2024-03-31T00:00:00Z", n: 2,
			want: []fire{
				{"2024-03-31T01:00:00Z", "2024-03-31T03:00:00+02:00", "2024-03-31 02:00:00"},
				{"2024-04-01T00:00:00Z", "2024-04-01T02:00:00+02:00", "2024-04-01 02:00:00"},
			},
			shift: []cron.Shift{cron.ShiftGap, cron.ShiftNone},
			notes: []string{"02:00 does not exist on 2024-03-31 in Europe/Berlin: clocks jump from 02:00 CET to 03:00 CEST; fires at 03:00 CEST, the first instant after the gap (the 4 scheduled times in the gap fire once, here)", ""}},
		{name: "fall back", expr: "0 1 * * *", zone: "America/New_York", from: "2024-11-03T00:00:00Z", n: 2,
			want: []fire{
				{"2024-11-03T05:00:00Z", "2024-11-03T01:00:00-04:00", "2024-11-03 01:00:00"},
				{"2024-11-04T06:00:00Z", "2024-11-04T01:00:00-05:00", "2024-11-04 01:00:00"},
			},
			shift: []cron.Shift{cron.ShiftOverlap, cron.ShiftNone},
			notes: []string{"01:00 occurs twice on 2024-11-03 in America/New_York: clocks go back from 02:00 EDT to 01:00 EST; fires at the first (EDT) only", ""}},
		{name: "seconds in the note", expr: "30 15 2 * * *", zone: "Australia/Sydney", from: "2024-10-05T00:00:00Z", n: 1,
			want:  []fire{{"2024-10-05T16:00:00Z", "2024-10-06T03:00:00+11:00", "2024-10-06 02:15:30"}},
			shift: []cron.Shift{cron.ShiftGap},
			notes: []string{"02:15:30 does not exist on 2024-10-06 in Australia/Sydney: clocks jump from 02:00 AEST to 03:00 AEDT; fires at 03:00 AEDT, the first instant after the gap"}},
		{name: "no zone", expr: "0 0 29 2 *", from: "2027-01-01T00:00:00Z", n: 2,
			want: []fire{
				{"2028-02-29T00:00:00Z", "2028-02-29T00:00:00Z", "2028-02-29 00:00:00"},
				{"2032-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2032-02-29 00:00:00"},
			},
			shift: []cron.Shift{cron.ShiftNone, cron.ShiftNone}, notes: []string{"", ""}},
		{name: "every", expr: "@every 36h", zone: "Asia/Kolkata", from: "2030-01-01T00:00:00Z", n: 2,
			want: []fire{
				{"2030-01-02T12:00:00Z", "2030-01-02T17:30:00+05:30", "2030-01-02 17:30:00"},
				{"2030-01-04T00:00:00Z", "2030-01-04T05:30:00+05:30", "2030-01-04 05:30:00"},
			},
			shift: []cron.Shift{cron.ShiftNone, cron.ShiftNone}, notes: []string{"", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.expr, tt.zone)
			got := s.Explain(at(t, tt.from), tt.n)
			require.Len(t, got, len(tt.want))
			for i, f := range got {
				require.Equal(t, tt.want[i], fire{f.At.Format(time.RFC3339), f.Local.Format(time.RFC3339), f.Wall}, "fire %d", i)
				require.Equal(t, time.UTC, f.At.Location())
				require.Equal(t, tt.shift[i], f.Shift, "fire %d", i)
				require.Equal(t, tt.shift[i] != cron.ShiftNone, f.Moved(), "fire %d", i)
				require.Equal(t, tt.notes[i], f.Note, "fire %d", i)
				require.Equal(t, s.Next(at(t, tt.from)), got[0].At, "Explain agrees with Next")
			}
		})
	}
	require.Empty(t, mustParse(t, "@daily", "").Explain(at(t, "2030-01-01T00:00:00Z"), 0))
}
