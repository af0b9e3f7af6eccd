package cron_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/cron"
)

// at parses an RFC 3339 time.
func at(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

// fires returns the next n fires after from, in RFC 3339 UTC.
func fires(t testing.TB, s *cron.Schedule, from time.Time, n int) []string {
	t.Helper()
	var out []string
	for range n {
		next := s.Next(from)
		require.False(t, next.IsZero(), "%s: no fire after %s", s, from)
		require.True(t, next.After(from), "%s: Next(%s) = %s", s, from, next)
		require.Equal(t, time.UTC, next.Location())
		out = append(out, next.Format(time.RFC3339))
		from = next
	}
	return out
}

func TestParseValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, expr, zone string
		str              string // String()
		from             string
		want             []string
	}{
		{name: "every minute", expr: "* * * * *", str: "* * * * *", from: "2030-01-02T12:00:30Z",
			want: []string{"2030-01-02T12:01:00Z", "2030-01-02T12:02:00Z"}},
		{name: "weekdays at 9", expr: "  0   9 * *  mon-fri ", str: "0 9 * * MON-FRI", from: "2030-01-04T09:00:00Z", // a Friday
			want: []string{"2030-01-07T09:00:00Z", "2030-01-08T09:00:00Z"}},
		{name: "month names and list", expr: "0 0 1 jan,Jul *", str: "0 0 1 JAN,JUL *", from: "2030-01-01T00:00:00Z",
			want: []string{"2030-07-01T00:00:00Z", "2031-01-01T00:00:00Z"}},
		{name: "month range with step", expr: "0 0 1 JAN-DEC/3 *", str: "0 0 1 JAN-DEC/3 *", from: "2030-01-01T00:00:00Z",
			want: []string{"2030-04-01T00:00:00Z", "2030-07-01T00:00:00Z", "2030-10-01T00:00:00Z", "2031-01-01T00:00:00Z"}},
		{name: "steps and ranges", expr: "10-40/15 */6 * * *", str: "10-40/15 */6 * * *", from: "2030-01-02T05:00:00Z",
			want: []string{"2030-01-02T06:10:00Z", "2030-01-02T06:25:00Z", "2030-01-02T06:40:00Z", "2030-01-02T12:10:00Z"}},
		{name: "start with step runs to the end", expr: "50/5 0 * * *", str: "50/5 0 * * *", from: "2030-01-02T00:00:00Z",
			want: []string{"2030-01-02T00:50:00Z", "2030-01-02T00:55:00Z", "2030-01-03T00:50:00Z"}},
		{name: "sunday as 7", expr: "0 0 * * 7", str: "0 0 * * 7", from: "2030-01-01T00:00:00Z", // a Tuesday
			want: []string{"2030-01-06T00:00:00Z", "2030-01-13T00:00:00Z"}},
		{name: "sunday as 7 with a step", expr: "0 0 * * 7/1", str: "0 0 * * 7/1", from: "2030-01-01T00:00:00Z",
			want: []string{"2030-01-06T00:00:00Z", "2030-01-13T00:00:00Z"}},
		{name: "a weekday with a step runs to saturday", expr: "0 0 * * 5/1", str: "0 0 * * 5/1", from: "2030-01-01T00:00:00Z",
			want: []string{"2030-01-04T00:00:00Z", "2030-01-05T00:00:00Z", "2030-01-11T00:00:00Z"}},
		{name: "sunday as 0 and SUN", expr: "0 0 * * SUN", str: "0 0 * * SUN", from: "2030-01-01T00:00:00Z",
			want: []string{"2030-01-06T00:00:00Z"}},
		{name: "day of month or weekday when both restricted", expr: "0 0 13 * FRI", str: "0 0 13 * FRI", from: "2030-01-01T00:00:00Z",
			want: []string{"2030-01-04T00:00:00Z", "2030-01-11T00:00:00Z", "2030-01-13T00:00:00Z", "2030-01-18T00:00:00Z"}},
		{name: "star-prefixed day field means both must match", expr: "0 0 */2 * MON", str: "0 0 */2 * MON", from: "2030-01-01T00:00:00Z",
			// Mondays of 2030 that are odd days: Jan 7, 21, Feb 11, 25 (not Jan 14 or 28, nor Feb 4).
			want: []string{"2030-01-07T00:00:00Z", "2030-01-21T00:00:00Z", "2030-02-11T00:00:00Z", "2030-02-25T00:00:00Z"}},
		{name: "day of month alone", expr: "0 0 31 * *", str: "0 0 31 * *", from: "2030-01-31T00:00:00Z",
			want: []string{"2030-03-31T00:00:00Z", "2030-05-31T00:00:00Z"}},
		{name: "leap day from 2027", expr: "0 0 29 2 *", str: "0 0 29 2 *", from: "2027-01-01T00:00:00Z",
			want: []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{name: "leap day across 2100, not a leap year", expr: "0 0 29 FEB *", str: "0 0 29 FEB *", from: "2096-03-01T00:00:00Z",
			want: []string{"2104-02-29T00:00:00Z"}},
		{name: "leap day on a weekend", expr: "0 0 29 2 */6", str: "0 0 29 2 */6", from: "2027-01-01T00:00:00Z",
			// The weekday field starts with "*", so both must match: 2032-02-29 is a Sunday, 2048-02-29 a Saturday.
			want: []string{"2032-02-29T00:00:00Z", "2048-02-29T00:00:00Z"}},
		{name: "february sundays or the 29th", expr: "0 0 29 2 0", str: "0 0 29 2 0", from: "2030-01-01T00:00:00Z",
			want: []string{"2030-02-03T00:00:00Z", "2030-02-10T00:00:00Z", "2030-02-17T00:00:00Z", "2030-02-24T00:00:00Z", "2031-02-02T00:00:00Z"}},
		{name: "seconds field", expr: "*/20 * * * * *", str: "*/20 * * * * *", from: "2030-01-02T10:00:05Z",
			want: []string{"2030-01-02T10:00:20Z", "2030-01-02T10:00:40Z", "2030-01-02T10:01:00Z"}},
		{name: "seconds with names", expr: "30 0 9 * * mon", str: "30 0 9 * * MON", from: "2030-01-01T00:00:00Z",
			want: []string{"2030-01-07T09:00:30Z", "2030-01-14T09:00:30Z"}},
		{name: "zero seconds field normalizes to five", expr: "0 15 10 * * *", str: "15 10 * * *", from: "2030-01-02T10:15:00Z",
			want: []string{"2030-01-03T10:15:00Z"}},
		{name: "sub-second after", expr: "0 * * * * *", str: "* * * * *", from: "2030-01-02T10:00:00.5Z",
			want: []string{"2030-01-02T10:01:00Z"}},
		{name: "yearly", expr: "@yearly", str: "@yearly", from: "2030-01-01T00:00:00Z", want: []string{"2031-01-01T00:00:00Z"}},
		{name: "annually", expr: "@annually", str: "@yearly", from: "2030-06-01T00:00:00Z", want: []string{"2031-01-01T00:00:00Z"}},
		{name: "monthly", expr: "@monthly", str: "@monthly", from: "2030-01-15T00:00:00Z", want: []string{"2030-02-01T00:00:00Z"}},
		{name: "weekly", expr: "@weekly", str: "@weekly", from: "2030-01-01T00:00:00Z", want: []string{"2030-01-06T00:00:00Z", "2030-01-13T00:00:00Z"}},
		{name: "daily", expr: "@DAILY", str: "@daily", from: "2030-01-01T00:00:00Z", want: []string{"2030-01-02T00:00:00Z"}},
		{name: "midnight", expr: "@midnight", str: "@daily", from: "2030-01-01T10:00:00Z", want: []string{"2030-01-02T00:00:00Z"}},
		{name: "hourly", expr: "@hourly", str: "@hourly", from: "2030-01-01T10:59:59Z", want: []string{"2030-01-01T11:00:00Z", "2030-01-01T12:00:00Z"}},
		{name: "every", expr: "@every 90s", str: "@every 1m30s", from: "2030-01-01T10:00:00Z", want: []string{"2030-01-01T10:01:30Z", "2030-01-01T10:03:00Z"}},
		{name: "every, whole hours", expr: "@every 120m", str: "@every 2h", from: "2030-01-01T10:00:00Z", want: []string{"2030-01-01T12:00:00Z"}},
		{name: "every, hours and minutes", expr: "@every 90m", str: "@every 1h30m", from: "2030-01-01T10:00:00Z", want: []string{"2030-01-01T11:30:00Z"}},
		{name: "every, minutes", expr: "@every 300s", str: "@every 5m", from: "2030-01-01T10:00:00Z", want: []string{"2030-01-01T10:05:00Z"}},
		{name: "every, fractions", expr: "@every 1500ms", str: "@every 1.5s", from: "2030-01-01T10:00:00Z", want: []string{"2030-01-01T10:00:01Z"}},
		{name: "every 1s", expr: "@every   1s", str: "@every 1s", from: "2030-01-01T10:00:00Z", want: []string{"2030-01-01T10:00:01Z"}},
		{name: "in Kolkata", expr: "0 2 * * 1-5", zone: "Asia/Kolkata", str: "0 2 * * 1-5", from: "2030-01-02T12:00:00Z",
			want: []string{"2030-01-02T20:30:00Z", "2030-01-03T20:30:00Z", "2030-01-06T20:30:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := cron.Parse(tt.expr, tt.zone)
			require.NoError(t, err)
			require.Equal(t, tt.str, s.String())
			require.Equal(t, tt.want, fires(t, s, at(t, tt.from), len(tt.want)))
			// The normalized form is the same schedule.
			again, err := cron.Parse(s.String(), tt.zone)
			require.NoError(t, err)
			require.Equal(t, s.String(), again.String())
			require.Equal(t, tt.want, fires(t, again, at(t, tt.from), len(tt.want)))
		})
	}
}

func TestParseZone(t *testing.T) {
	t.Parallel()
	s, err := cron.Parse("0 0 * * *", "")
	require.NoError(t, err)
	require.Equal(t, time.UTC, s.Location(), "no zone is UTC")
	s, err = cron.Parse("0 0 * * *", "America/New_York")
	require.NoError(t, err)
	require.Equal(t, "America/New_York", s.Location().String())
	require.Equal(t, "2030-01-02T05:00:00Z", s.Next(at(t, "2030-01-01T12:00:00Z")).Format(time.RFC3339))
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, zone string
		field      string
		msg        string // the whole message, or a part of it when it ends with "…"
	}{
		{"", "", "cron", "empty expression: want five fields…"},
		{"   ", "", "cron", "empty expression…"},
		{"* * * *", "", "cron", `want 5 fields (minute hour day-of-month month day-of-week) or 6 with a leading seconds field, found 4 in "* * * *"`},
		{"* * * * * * *", "", "cron", "want 5 fields…found 7…"},
		{"61 * * * *", "", "cron", `minute field "61": 61 is out of range (0-59)`},
		{"60 * * * * *", "", "cron", `seconds field "60": 60 is out of range (0-59)`},
		{"* 24 * * *", "", "cron", `hour field "24": 24 is out of range (0-23)`},
		{"0 0 0 * *", "", "cron", `day-of-month field "0": 0 is out of range (1-31)`},
		{"0 0 32 * *", "", "cron", `day-of-month field "32": 32 is out of range (1-31)`},
		{"0 0 * 13 *", "", "cron", `month field "13": 13 is out of range (1-12)`},
		{"0 0 * 0 *", "", "cron", `month field "0": 0 is out of range (1-12)`},
		{"0 0 * * 8", "", "cron", `day-of-week field "8": 8 is out of range (0-7)`},
		{"0 0 * FOO *", "", "cron", `month field "FOO": "FOO" is not a number or a name (JAN-DEC)`},
		{"0 0 * * MON-FRX", "", "cron", `day-of-week field "MON-FRX": "FRX" is not a number or a name (SUN-SAT)`},
		{"x * * * *", "", "cron", `minute field "x": "x" is not a number`},
		{"+5 * * * *", "", "cron", `minute field "+5": "+5" is not a number`},
		{"99999999999999999999 * * * *", "", "cron", `minute field "99999999999999999999": 99999999999999999999 is out of range (0-59)`},
		{"*/0 * * * *", "", "cron", `minute field "*/0": a step must be 1 or more`},
		{"*/60 * * * *", "", "cron", `minute field "*/60": step 60 is too large for the range 0-59`},
		{"0 0 * * */7", "", "cron", `day-of-week field "*/7": step 7 is too large for the range 0-6`},
		{"*/x * * * *", "", "cron", `minute field "*/x": step "x" is not a number`},
		{"5-1 * * * *", "", "cron", `minute field "5-1": range 5-1 starts after it ends (ranges do not wrap around)`},
		{"0 0 * * SAT-SUN", "", "cron", `day-of-week field "SAT-SUN": range SAT-SUN starts after it ends (ranges do not wrap around)`},
		{"1,,2 * * * *", "", "cron", `minute field "1,,2": empty item in the list`},
		{"1, * * * *", "", "cron", `minute field "1,": empty item in the list`},
		{"*-5 * * * *", "", "cron", `minute field "*-5": "*" is not a number`},
		{"-5 * * * *", "", "cron", `minute field "-5": a number is missing`},
		{"5- * * * *", "", "cron", `minute field "5-": a number is missing`},
		{"1-2-3 * * * *", "", "cron", `minute field "1-2-3": "2-3" is not a number`},
		{"*/5/5 * * * *", "", "cron", `minute field "*/5/5": step "5/5" is not a number`},
		{"0 0 L * *", "", "cron", `day-of-month field "L": "L" is not a number`},
		{"0 0 * * 5#3", "", "cron", `day-of-week field "5#3": "5#3" is not a number or a name (SUN-SAT)`},
		{"? * * * *", "", "cron", `minute field "?": "?" is not a number`},
		{"0 0 30 2 *", "", "cron", `never fires: no month allowed by the month field "2" has a day 30 or later that the day-of-month field allows`},
		{"0 0 31 4,6,9,11 *", "", "cron", "never fires…"},
		{"TZ=Europe/Berlin 0 2 * * *", "", "cron", `"TZ=Europe/Berlin": give the time zone separately, not in the expression`},
		{"CRON_TZ=UTC 0 2 * * *", "", "cron", `"CRON_TZ=UTC": give the time zone separately…`},
		{"@reboot", "", "cron", `unknown macro "@reboot": want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>`},
		{"@every", "", "cron", `@every takes one duration, such as "@every 90s" or "@every 1h30m"`},
		{"@every 1h 30m", "", "cron", "@every takes one duration…"},
		{"@every 500ms", "", "cron", "@every 500ms: the interval must be at least 1s"},
		{"@every -1m", "", "cron", "@every -1m: the interval must be at least 1s"},
		{"@every 0s", "", "cron", "@every 0s: the interval must be at least 1s"},
		{"@every soon", "", "cron", `@every "soon": not a duration such as 90s, 15m or 1h30m`},
		{"@daily 5", "", "cron", `@daily takes nothing after it, found "5"`},
		{strings.Repeat("1,", 300) + "1 * * * *", "", "cron", "expression is 609 bytes long; at most 512"},
		{"0 2 * * *", "Mars/Olympus_Mons", "timezone", `unknown time zone "Mars/Olympus_Mons": want an IANA name such as Europe/Berlin or America/New_York`},
		{"0 2 * * *", "europe/berlin", "timezone", `unknown time zone "europe/berlin"…`},
		{"0 2 * * *", "../../etc/passwd", "timezone", "unknown time zone…"},
		{"0 2 * * *", "Local", "timezone", `"Local" is not an IANA time zone; name one, such as Europe/Berlin`},
		{"@every 1m", "Nowhere", "timezone", "unknown time zone…"},
		// Both wrong: the expression is reported.
		{"bad", "Nowhere", "cron", "want 5 fields…"},
	}
	for _, tt := range tests {
		t.Run(tt.expr+" in "+tt.zone, func(t *testing.T) {
			t.Parallel()
			s, err := cron.Parse(tt.expr, tt.zone)
			require.Error(t, err)
			require.Nil(t, s)
			var ce *cron.Error
			require.True(t, errors.As(err, &ce), "%T is not a *cron.Error", err)
			require.Equal(t, tt.field, ce.Field)
			require.Equal(t, tt.field+": "+ce.Message, err.Error())
			if prefix, ok := strings.CutSuffix(tt.msg, "…"); ok {
				for part := range strings.SplitSeq(prefix, "…") {
					require.Contains(t, ce.Message, part)
				}
				require.True(t, strings.HasPrefix(ce.Message, strings.Split(prefix, "…")[0]), ce.Message)
			} else {
				require.Equal(t, tt.msg, ce.Message)
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		if _, err := cron.Parse("*/15 9-17 * JAN-JUN MON-FRI", "Europe/Berlin"); err != nil {
			b.Fatal(err)
		}
	}
}
