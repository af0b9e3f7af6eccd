package cron

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zones resolve the same on a host without a zoneinfo database
)

// The parts of a job's schedule that an *Error can be about.
const (
	FieldCron     = "cron"
	FieldTimezone = "timezone"
)

// Error is a bad cron expression or time zone. Field is FieldCron or FieldTimezone, so that an
// API can report it under schedule.cron or schedule.timezone; Message says what is wrong.
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Field + ": " + e.Message }

func cronError(format string, a ...any) *Error {
	return &Error{Field: FieldCron, Message: fmt.Sprintf(format, a...)}
}

// maxExprLen bounds an expression; the longest sensible one is far shorter.
const maxExprLen = 512

// Parse parses a cron expression (see the package doc for the syntax) in an IANA time zone;
// an empty zone is UTC. A bad expression or zone is an *Error that says which and why.
func Parse(expr, timezone string) (*Schedule, error) {
	s, err := parseExpr(expr)
	if err != nil {
		return nil, err
	}
	if s.loc, err = loadZone(timezone); err != nil {
		return nil, err
	}
	return s, nil
}

// loadZone loads an IANA time zone; "" is UTC.
func loadZone(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		// time.LoadLocation would answer with the host's zone, which differs between servers.
		return nil, &Error{Field: FieldTimezone, Message: `"Local" is not an IANA time zone; name one, such as Europe/Berlin`}
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, &Error{Field: FieldTimezone, Message: fmt.Sprintf("unknown time zone %q: want an IANA name such as Europe/Berlin or America/New_York", name)}
	}
	return loc, nil
}

// field is one calendar field of an expression: its name in messages, its range, and the
// names its values may have.
type field struct {
	name     string
	min, max int      // the range of "*"
	maxValue int      // the largest value that may be written (7, Sunday, for day-of-week)
	names    []string // names[i] stands for min+i
}

// The six fields, seconds first. Read-only tables: parsing needs them and nothing changes them.
var (
	secondField = field{name: "seconds", min: 0, max: 59, maxValue: 59}
	minuteField = field{name: "minute", min: 0, max: 59, maxValue: 59}
	hourField   = field{name: "hour", min: 0, max: 23, maxValue: 23}
	domField    = field{name: "day-of-month", min: 1, max: 31, maxValue: 31}
	monthField  = field{name: "month", min: 1, max: 12, maxValue: 12,
		names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}}
	dowField = field{name: "day-of-week", min: 0, max: 6, maxValue: 7,
		names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}}
)

// macros are the expressions that the @ names stand for (a read-only table, like the fields).
var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// canonicalMacro is the name String gives a macro.
var canonicalMacro = map[string]string{"@annually": "@yearly", "@midnight": "@daily"}

func parseExpr(expr string) (*Schedule, error) {
	if len(expr) > maxExprLen {
		return nil, cronError("expression is %d bytes long; at most %d", len(expr), maxExprLen)
	}
	words := strings.Fields(expr)
	if len(words) == 0 {
		return nil, cronError(`empty expression: want five fields such as "0 2 * * *" (minute hour day-of-month month day-of-week), six with a leading seconds field, or a macro such as @daily`)
	}
	if strings.HasPrefix(words[0], "@") {
		return parseMacro(words)
	}
	if up := strings.ToUpper(words[0]); strings.HasPrefix(up, "TZ=") || strings.HasPrefix(up, "CRON_TZ=") {
		return nil, cronError("%q: give the time zone separately, not in the expression", words[0])
	}
	return parseFields(words)
}

func parseMacro(words []string) (*Schedule, error) {
	name := strings.ToLower(words[0])
	if name == "@every" {
		if len(words) != 2 {
			return nil, cronError(`@every takes one duration, such as "@every 90s" or "@every 1h30m"`)
		}
		d, err := time.ParseDuration(words[1])
		if err != nil {
			return nil, cronError("@every %q: not a duration such as 90s, 15m or 1h30m", words[1])
		}
		if d < time.Second {
			return nil, cronError("@every %s: the interval must be at least 1s", words[1])
		}
		return &Schedule{text: "@every " + shortDuration(d), every: d}, nil
	}
	expr, ok := macros[name]
	if !ok {
		return nil, cronError("unknown macro %q: want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>", words[0])
	}
	if len(words) > 1 {
		return nil, cronError("%s takes nothing after it, found %q", name, strings.Join(words[1:], " "))
	}
	s, err := parseFields(strings.Fields(expr))
	if err != nil {
		return nil, fmt.Errorf("macro %s: %w", name, err) // a bug in the table above
	}
	s.text = name
	if c, ok := canonicalMacro[name]; ok {
		s.text = c
	}
	return s, nil
}

// shortDuration is d as Go writes it, less zero minutes and seconds: 1h, 1h30m, 90m is 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func parseFields(words []string) (*Schedule, error) {
	var secondText string
	switch len(words) {
	case 5:
		secondText = "0"
	case 6:
		secondText, words = words[0], words[1:]
	default:
		return nil, cronError("want 5 fields (minute hour day-of-month month day-of-week) or 6 with a leading seconds field, found %d in %q",
			len(words), strings.Join(words, " "))
	}
	s := &Schedule{}
	var err error
	parse := func(text string, f field) uint64 {
		if err != nil {
			return 0
		}
		var bits uint64
		if bits, err = parseField(text, f); err != nil {
			err = cronError("%s field %q: %v", f.name, text, err)
		}
		return bits
	}
	s.second = parse(secondText, secondField)
	s.minute = parse(words[0], minuteField)
	s.hour = parse(words[1], hourField)
	s.dom = parse(words[2], domField)
	s.month = parse(words[3], monthField)
	s.dow = parse(words[4], dowField)
	if err != nil {
		return nil, err
	}
	if s.dow&(1<<7) != 0 { // 7 is Sunday too
		s.dow = s.dow&^(1<<7) | 1
	}
	// Vixie cron: a day field written with a leading "*" does not restrict the day, so a day must
	// then match both fields (one of them trivially); when both restrict it, either will do.
	s.dayAnd = strings.HasPrefix(words[2], "*") || strings.HasPrefix(words[4], "*")
	if err := neverFires(s, words[3]); err != nil {
		return nil, err
	}
	upper := make([]string, len(words))
	for i, w := range words {
		upper[i] = strings.ToUpper(w)
	}
	if secondText != "0" { // a seconds field of 0 is the five-field form
		s.text = strings.ToUpper(secondText) + " "
	}
	s.text += strings.Join(upper, " ")
	return s, nil
}

// neverFires refuses a schedule whose days of the month fall in none of its months (0 0 30 2 *).
// Every other combination occurs within the 400-year cycle of the calendar.
func neverFires(s *Schedule, monthText string) error {
	if !s.dayAnd {
		return nil // any weekday occurs in every month
	}
	longest := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		if s.month&(1<<m) != 0 && s.dom&(uint64(1)<<(longest[m]+1)-2) != 0 {
			return nil
		}
	}
	first := 1
	for s.dom&(1<<first) == 0 {
		first++
	}
	return cronError("never fires: no month allowed by the month field %q has a day %d or later that the day-of-month field allows", monthText, first)
}

// parseField parses a comma-separated list of items into a bitset of the values it allows.
func parseField(text string, f field) (uint64, error) {
	var bits uint64
	for item := range strings.SplitSeq(text, ",") {
		if item == "" {
			return 0, errors.New("empty item in the list")
		}
		b, err := parseItem(item, f)
		if err != nil {
			return 0, err
		}
		bits |= b
	}
	return bits, nil
}

// parseItem parses "*", "N", "N-M", each with an optional "/STEP", and "N/STEP" (N to the end).
func parseItem(item string, f field) (uint64, error) {
	base, stepText, hasStep := strings.Cut(item, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepText)
		if err != nil || !isDigits(stepText) {
			return 0, fmt.Errorf("step %q is not a number", stepText)
		}
		if n < 1 {
			return 0, errors.New("a step must be 1 or more")
		}
		if n > f.max-f.min {
			return 0, fmt.Errorf("step %d is too large for the range %d-%d", n, f.min, f.max)
		}
		step = n
	}
	var lo, hi int
	if base == "*" {
		lo, hi = f.min, f.max
	} else {
		loText, hiText, isRange := strings.Cut(base, "-")
		var err error
		if lo, err = f.value(loText); err != nil {
			return 0, err
		}
		switch {
		case isRange:
			if hi, err = f.value(hiText); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("range %s starts after it ends (ranges do not wrap around)", base)
			}
		case hasStep:
			// To the end of the range: Sunday written as 7, past the day-of-week range's
			// end (6), is an end of its own.
			hi = max(f.max, lo)
		default:
			hi = lo
		}
	}
	var bits uint64
	for v := lo; v <= hi; v += step {
		bits |= 1 << v
	}
	return bits, nil
}

// value parses a number or a name of the field.
func (f field) value(text string) (int, error) {
	if text == "" {
		return 0, errors.New("a number is missing")
	}
	if isDigits(text) {
		n, err := strconv.Atoi(text)
		if err != nil || n < f.min || n > f.maxValue {
			return 0, fmt.Errorf("%s is out of range (%d-%d)", text, f.min, f.maxValue)
		}
		return n, nil
	}
	for i, name := range f.names {
		if strings.EqualFold(text, name) {
			return f.min + i, nil
		}
	}
	if len(f.names) > 0 {
		return 0, fmt.Errorf("%q is not a number or a name (%s-%s)", text, f.names[0], f.names[len(f.names)-1])
	}
	return 0, fmt.Errorf("%q is not a number", text)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
