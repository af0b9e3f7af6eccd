package scheduler

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/stint-dev/stint/internal/cron"
	"github.com/stint-dev/stint/internal/model"
)

// Calendar expressions and zones for the property tests: zones with clock changes of one
// hour, half an hour, and none; expressions that fire in the hours the clocks change.
var (
	propExprs = []string{"*/7 * * * * *", "30 2 * * *", "0 * * * *", "*/15 * * * *", "*/5 2 * * *", "0 9 * * 1-5", "* * * * *", "0 0 29 2 *"}
	propZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"}
	// propStarts are near clock changes: Berlin's of 2030-03-31 and 2030-10-27, New York's
	// of 2030-03-10, Lord Howe's of 2030-04-07.
	propStarts = []time.Time{
		time.Date(2030, 3, 30, 22, 0, 0, 0, time.UTC), time.Date(2030, 10, 26, 23, 0, 0, 0, time.UTC),
		time.Date(2030, 3, 10, 5, 0, 0, 0, time.UTC), time.Date(2030, 4, 6, 13, 0, 0, 0, time.UTC),
		time.Date(2028, 2, 28, 0, 0, 0, 0, time.UTC),
	}
	propPolicies = []string{"", model.MisfireSkip, model.MisfireRunOnce, model.MisfireRunAll}
)

// TestPlanFireProperties runs a schedule through consecutive PlanFire calls, each from the
// previous call's next fire, at increasing nows, and checks every call against the
// schedule's instants walked one by one.
func TestPlanFireProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		var expr, zone string
		if rapid.Bool().Draw(t, "every") {
			longest := rapid.SampledFrom([]int{10, 120, 7200}).Draw(t, "longest")
			expr = fmt.Sprintf("@every %ds", rapid.IntRange(1, longest).Draw(t, "interval"))
			zone = rapid.SampledFrom(propZones).Draw(t, "zone")
		} else {
			expr = rapid.SampledFrom(propExprs).Draw(t, "expr")
			zone = rapid.SampledFrom(propZones).Draw(t, "zone")
		}
		sc, err := cron.Parse(expr, zone)
		if err != nil {
			t.Fatalf("parse %q in %s: %v", expr, zone, err)
		}
		s := &model.Schedule{Cron: expr, Timezone: zone,
			Misfire:      rapid.SampledFrom(propPolicies).Draw(t, "policy"),
			MisfireLimit: rapid.IntRange(0, 40).Draw(t, "limit")}
		limit := MisfireLimit(s)
		grace := time.Duration(rapid.Int64Range(0, int64(5*time.Minute)).Draw(t, "grace"))
		now := rapid.SampledFrom(propStarts).Draw(t, "start").Add(time.Duration(rapid.Int64Range(0, int64(2*time.Hour)).Draw(t, "offset")))
		due := sc.Next(now) // the job is created at now
		fired := map[time.Time]bool{}

		calls := rapid.IntRange(1, 25).Draw(t, "calls")
		for call := range calls {
			// Gaps within about the grace, of minutes (an outage), or of hours.
			longest := rapid.SampledFrom([]time.Duration{2*grace + 1, 10 * time.Minute, 3 * time.Hour}).Draw(t, "longest gap")
			gap := time.Duration(rapid.Int64Range(0, int64(longest)).Draw(t, "gap"))
			now = now.Add(gap)
			p := PlanFire(sc, s, due, now, grace)

			// The instants due in [due, now], walked one by one; next is the first after now.
			var due2now []time.Time
			next := due
			for ; !next.After(now); next = sc.NextAfter(next, next) {
				due2now = append(due2now, next)
			}
			if p.Next == nil || !p.Next.Equal(next) {
				t.Fatalf("call %d at %s from %s: next %v, want %s", call, now, due, p.Next, next)
			}
			if !p.Next.After(now) {
				t.Fatalf("call %d: next %s is not after now %s", call, p.Next, now)
			}
			if len(p.Fire) > limit {
				t.Fatalf("call %d: %d instants fire, over the limit %d", call, len(p.Fire), limit)
			}
			inFire := map[time.Time]bool{}
			lateFired := 0
			for i, at := range p.Fire {
				switch {
				case at.After(now):
					t.Fatalf("call %d: %s fires after now %s", call, at, now)
				case fired[at]:
					t.Fatalf("call %d: %s fires a second time", call, at)
				case i > 0 && !at.After(p.Fire[i-1]):
					t.Fatalf("call %d: instants out of order: %v", call, p.Fire)
				}
				fired[at], inFire[at] = true, true
				if now.Sub(at) > grace {
					lateFired++
				}
			}
			late := 0
			for _, at := range due2now {
				if now.Sub(at) > grace {
					late++
					continue
				}
				if !inFire[at] && len(p.Fire) < limit {
					t.Fatalf("call %d at %s: on-time instant %s skipped (fired %v)", call, now, at, p.Fire)
				}
			}
			for at := range inFire {
				if !containsTime(due2now, at) {
					t.Fatalf("call %d: %s is not an instant due in [%s, %s]", call, at, due, now)
				}
			}
			switch s.Misfire {
			case model.MisfireSkip:
				if lateFired > 0 {
					t.Fatalf("call %d: skip fired %d late instants", call, lateFired)
				}
			case model.MisfireRunAll:
				if lateFired < min(late, limit) {
					t.Fatalf("call %d: run_all fired %d of %d late instants (limit %d)", call, lateFired, late, limit)
				}
			default:
				if lateFired > 1 || late > 0 && lateFired == 0 {
					t.Fatalf("call %d: run_once fired %d of %d late instants", call, lateFired, late)
				}
			}
			if late > 0 && p.Missed == 0 {
				t.Fatalf("call %d: %d late instants, none counted missed", call, late)
			}
			if len(due2now) > 0 {
				due = next
			}
		}
	})
}

func containsTime(ts []time.Time, at time.Time) bool {
	for _, t := range ts {
		if t.Equal(at) {
			return true
		}
	}
	return false
}
