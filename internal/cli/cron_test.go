package cli

import "testing"

func TestCronExplain(t *testing.T) {
	t.Parallel()
	// No case makes a request: the fake API answers none.
	runCLICases(t, []cliCase{
		{
			// --tz, the old spelling, still works (deprecated: one spelling, --timezone, as in submit).
			name:      "old spelling of the zone flag",
			args:      []string{"cron", "explain", "@daily", "--tz", "Asia/Kolkata", "--count", "1"},
			stdoutHas: []string{"Flag --tz has been deprecated, use --timezone", "@daily in Asia/Kolkata"},
		},
		{
			name: "weekdays in Kolkata, from now",
			args: []string{"cron", "explain", "0 2 * * 1-5", "--timezone", "Asia/Kolkata"},
			stdout: `0 2 * * 1-5 in Asia/Kolkata, the next 5 fires after 2030-01-02T12:00:00Z:
UTC                   LOCAL                      DST
2030-01-02T20:30:00Z  2030-01-03T02:00:00+05:30  -
2030-01-03T20:30:00Z  2030-01-04T02:00:00+05:30  -
2030-01-06T20:30:00Z  2030-01-07T02:00:00+05:30  -
2030-01-07T20:30:00Z  2030-01-08T02:00:00+05:30  -
2030-01-08T20:30:00Z  2030-01-09T02:00:00+05:30  -
`,
		},
		{
			name: "spring forward in Berlin",
			args: []string{"cron", "explain", "30 2 * * *", "--timezone", "Europe/Berlin", "--from", "2030-03-30T00:00:00Z", "--count", "3"},
			stdout: `30 2 * * * in Europe/Berlin, the next 3 fires after 2030-03-30T00:00:00Z:
UTC                   LOCAL                      DST
2030-03-30T01:30:00Z  2030-03-30T02:30:00+01:00  -
2030-03-31T01:00:00Z  2030-03-31T03:00:00+02:00  02:30 does not exist on 2030-03-31 in Europe/Berlin: clocks jump from 02:00 CET to 03:00 CEST; fires at 03:00 CEST, the first instant after the gap
2030-04-01T00:30:00Z  2030-04-01T02:30:00+02:00  -
`,
		},
		{
			name: "fall back in New York",
			args: []string{"cron", "explain", "0 * * * *", "--timezone", "America/New_York", "--from", "2030-11-03T04:30:00+00:00", "--count", "3"},
			stdout: `0 * * * * in America/New_York, the next 3 fires after 2030-11-03T04:30:00Z:
UTC                   LOCAL                      DST
2030-11-03T05:00:00Z  2030-11-03T01:00:00-04:00  01:00 occurs twice on 2030-11-03 in America/New_York: clocks go back from 02:00 EDT to 01:00 EST; fires at the first (EDT) only
2030-11-03T07:00:00Z  2030-11-03T02:00:00-05:00  -
2030-11-03T08:00:00Z  2030-11-03T03:00:00-05:00  -
`,
		},
		{
			name: "no zone is UTC; macros normalized",
			args: []string{"cron", "explain", "@annually", "--count", "2"},
			stdout: `@yearly in UTC, the next 2 fires after 2030-01-02T12:00:00Z:
UTC                   LOCAL                 DST
2031-01-01T00:00:00Z  2031-01-01T00:00:00Z  -
2032-01-01T00:00:00Z  2032-01-01T00:00:00Z  -
`,
		},
		{
			name: "json",
			args: []string{"cron", "explain", "*/15 2 * * *", "--timezone", "Europe/Berlin", "--from", "2030-03-31T00:00:00Z", "--count", "2", "--json"},
			stdout: `{
  "expression": "*/15 2 * * *",
  "timezone": "Europe/Berlin",
  "from": "2030-03-31T00:00:00Z",
  "fires": [
    {
      "utc": "2030-03-31T01:00:00Z",
      "local": "2030-03-31T03:00:00+02:00",
      "wall": "2030-03-31 02:00:00",
      "moved": true,
      "shift": "gap",
      "note": "02:00 does not exist on 2030-03-31 in Europe/Berlin: clocks jump from 02:00 CET to 03:00 CEST; fires at 03:00 CEST, the first instant after the gap (the 4 scheduled times in the gap fire once, here)"
    },
    {
      "utc": "2030-04-01T00:00:00Z",
      "local": "2030-04-01T02:00:00+02:00",
      "wall": "2030-04-01 02:00:00",
      "moved": false
    }
  ]
}
`,
		},
		{
			name: "every, json",
			args: []string{"cron", "explain", "@every 90m", "--count", "1", "--json"},
			stdout: `{
  "expression": "@every 1h30m",
  "timezone": "UTC",
  "from": "2030-01-02T12:00:00Z",
  "fires": [
    {
      "utc": "2030-01-02T13:30:00Z",
      "local": "2030-01-02T13:30:00Z",
      "wall": "2030-01-02 13:30:00",
      "moved": false
    }
  ]
}
`,
		},
		{
			name: "every, yaml",
			args: []string{"cron", "explain", "@every 90m", "--count", "1", "-o", "yaml"},
			stdout: `expression: '@every 1h30m'
fires:
- local: "2030-01-02T13:30:00Z"
  moved: false
  utc: "2030-01-02T13:30:00Z"
  wall: "2030-01-02 13:30:00"
from: "2030-01-02T12:00:00Z"
timezone: UTC
`,
		},
		{name: "bad zone", args: []string{"cron", "explain", "0 2 * * *", "--timezone", "Mars/Olympus_Mons"}, code: 2,
			stderr: `stint: --timezone: unknown time zone "Mars/Olympus_Mons": want an IANA name such as Europe/Berlin or America/New_York`},
		{name: "bad expression", args: []string{"cron", "explain", "61 2 * * *"}, code: 2,
			stderr: `stint: EXPRESSION "61 2 * * *": minute field "61": 61 is out of range (0-59)` + "\nRun 'stint cron explain --help' for usage."},
		{name: "expression that never fires", args: []string{"cron", "explain", "0 0 30 2 *"}, code: 2,
			stderr: `stint: EXPRESSION "0 0 30 2 *": never fires`},
		{name: "bad every", args: []string{"cron", "explain", "@every 10ms"}, code: 2,
			stderr: "@every 10ms: the interval must be at least 1s"},
		{name: "unquoted expression", args: []string{"cron", "explain", "0", "2", "*", "*", "*"}, code: 2,
			stderr: "stint: EXPRESSION: give it as one quoted argument, such as '0 2 * * 1-5' (got 5 arguments)"},
		{name: "no expression", args: []string{"cron", "explain"}, code: 2, stderr: "stint: missing EXPRESSION"},
		{name: "bad from", args: []string{"cron", "explain", "@daily", "--from", "tomorrow"}, code: 2,
			stderr: `stint: invalid argument "tomorrow" for "--from" flag: want an RFC 3339 time such as 2030-01-02T15:04:05Z`},
		{name: "count zero", args: []string{"cron", "explain", "@daily", "--count", "0"}, code: 2, stderr: "stint: --count: must be from 1 to 1000"},
		{name: "count too large", args: []string{"cron", "explain", "@daily", "--count", "1001"}, code: 2, stderr: "--count: must be from 1 to 1000"},
		{name: "cron alone shows help", args: []string{"cron"}, stdoutHas: []string{"Usage:", "explain"}},
		{name: "unknown subcommand", args: []string{"cron", "next"}, code: 2, stderr: `unknown command "next" for "stint cron"`},
	})
}
