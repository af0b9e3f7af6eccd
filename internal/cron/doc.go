// Package cron is the time logic of cron schedules: it parses an expression in an IANA time
// zone into a Schedule and answers when it fires. It is pure: no clock reads, no globals, no
// I/O past loading the zone; every instant is passed in, and a Schedule is immutable and safe
// for concurrent use.
//
// # Expressions
//
// Five fields (minute hour day-of-month month day-of-week) or six with a leading seconds field;
// lists, ranges, steps, month and weekday names (JAN, MON-FRI), 0 or 7 for Sunday; the macros
// @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly and @every <Go duration>
// of at least 1s. When both day fields are restricted a day matches either (Vixie cron); a day
// field that starts with "*" counts as unrestricted, also "*/2" (Vixie cron again). Parse
// refuses an expression that can never fire (0 0 30 2 *). A bad expression or zone is an *Error
// whose Field is FieldCron or FieldTimezone.
//
// # Time zones and clock changes
//
// Calendar fields are matched against the wall clock of the schedule's zone (UTC when none is
// given). Each scheduled wall-clock time fires at most once:
//
//   - a wall time that does not exist (the gap of a spring-forward change) fires once, at the
//     first instant after the gap; all the scheduled times inside one gap fire together then
//     (*/15 2 * * * in Europe/Berlin fires once, at 03:00 CEST, on the last Sunday of March);
//   - a wall time that exists twice (the repeated hour of a fall-back change) fires once, at
//     its first occurrence; the repeated occurrence never fires, so an hourly schedule does not
//     fire again at the second 02:00.
//
// @every schedules are spaced in absolute time and ignore clock changes; their zone only says
// in which wall time Explain shows them.
//
// # Why the parser is ours
//
// We parse the standard grammar ourselves. github.com/robfig/cron/v3 (v3.0.1, unchanged since
// 2020) refuses 7 for Sunday and silently rounds @every to whole seconds; its maintained fork
// github.com/netresearch/go-cron (v0.9.1) refuses upper-case THU (it takes the H for a hash
// expression), silently reads "*-5" as "*" and changed its day-field semantics in a minor
// release, and neither names the bad field in its errors; github.com/adhocore/gronx matches
// strings tick by tick and exposes no parsed fields. The grammar is small, and the hard part,
// the next instant under the DST rules above, none of them computes, so a dependency would have
// brought quirks to guard against without saving that work.
package cron
