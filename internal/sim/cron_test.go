package sim

import (
	"testing"
	"time"
)

// The DST oracle is the simulation's own reading of docs/cron.md, apart from package cron:
// it must tell the instants the rules allow from those they do not.
func TestDSTOracle(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	// 2026-03-08: 02:00 EST -> 03:00 EDT at 07:00 UTC. 2026-11-01: 02:00 EDT -> 01:00 EST at 06:00 UTC.
	springEnd := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC).In(ny)
	firstHalfPastOne := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC).In(ny)  // 01:30 EDT
	secondHalfPastOne := time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC).In(ny) // 01:30 EST
	for _, tc := range []struct {
		name               string
		at                 time.Time
		afterGap, repeated bool
	}{
		{"the end of the spring gap", springEnd, true, false},
		{"a second before it", springEnd.Add(-time.Second), false, false},
		{"a minute after it", springEnd.Add(time.Minute), false, false},
		{"01:30 EDT, first of two", firstHalfPastOne, false, false},
		{"01:30 EST, its repeat", secondHalfPastOne, false, true},
		{"02:30 EST, once", secondHalfPastOne.Add(time.Hour), false, false},
	} {
		if got := afterGap(tc.at); got != tc.afterGap {
			t.Errorf("%s (%s): afterGap %v, want %v", tc.name, tc.at, got, tc.afterGap)
		}
		if got := secondOccurrence(tc.at); got != tc.repeated {
			t.Errorf("%s (%s): secondOccurrence %v, want %v", tc.name, tc.at, got, tc.repeated)
		}
	}
	spec := cronSpecs[1] // "30 1 * * *"
	if spec.expr != "30 1 * * *" || !spec.wall(firstHalfPastOne) || spec.wall(springEnd) {
		t.Errorf("%q names 01:30 and not 03:00", spec.expr)
	}
}
