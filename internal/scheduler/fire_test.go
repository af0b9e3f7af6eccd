package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/cron"
	"github.com/stint-dev/stint/internal/model"
)

func mustParse(t testing.TB, expr, zone string) *cron.Schedule {
	t.Helper()
	sc, err := cron.Parse(expr, zone)
	require.NoError(t, err)
	return sc
}

func TestPlanFire(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	mins := func(m int) time.Time { return now.Add(time.Duration(m) * time.Minute) }
	sec := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	ptr := func(t time.Time) *time.Time { return &t }
	tests := []struct {
		name     string
		expr     string
		sched    model.Schedule
		due, now time.Time
		want     FirePlan
	}{
		{name: "on time", expr: "*/5 * * * *", due: now, now: sec(3),
			want: FirePlan{Fire: []time.Time{now}, Next: ptr(mins(5))}},
		{name: "not due yet", expr: "*/5 * * * *", due: mins(5), now: now,
			want: FirePlan{Next: ptr(mins(5))}},
		{name: "late by the grace exactly is on time", expr: "*/5 * * * *", due: now, now: mins(1),
			want: FirePlan{Fire: []time.Time{now}, Next: ptr(mins(5))}},
		{name: "run_once: one run for the late ones", expr: "*/5 * * * *", due: mins(-30), now: mins(1),
			want: FirePlan{Fire: []time.Time{mins(-30), now}, Next: ptr(mins(5)), Missed: 6, Dropped: 5}},
		{name: "skip drops the late ones only", expr: "*/5 * * * *", sched: model.Schedule{Misfire: model.MisfireSkip},
			due: mins(-30), now: mins(1), want: FirePlan{Fire: []time.Time{now}, Next: ptr(mins(5)), Missed: 6, Dropped: 6}},
		{name: "skip with every instant late", expr: "*/5 * * * *", sched: model.Schedule{Misfire: model.MisfireSkip},
			due: mins(-30), now: mins(2), want: FirePlan{Next: ptr(mins(5)), Missed: 7, Dropped: 7}},
		{name: "run_all capped by the limit", expr: "*/5 * * * *", sched: model.Schedule{Misfire: model.MisfireRunAll, MisfireLimit: 2},
			due: mins(-30), now: mins(2), want: FirePlan{Fire: []time.Time{mins(-30), mins(-25)}, Next: ptr(mins(5)), Missed: 3, More: true, Dropped: 1}},
		{name: "@every keeps its grid", expr: "@every 7s", sched: model.Schedule{Misfire: model.MisfireSkip},
			due: sec(-100), now: sec(3), want: FirePlan{
				Fire: []time.Time{sec(-51), sec(-44), sec(-37), sec(-30), sec(-23), sec(-16), sec(-9), sec(-2)},
				Next: ptr(sec(5)), Missed: 7, Dropped: 7}},
		// Europe/Berlin springs forward at 2030-03-31 01:00 UTC: 02:30 local fires at 03:00
		// CEST (01:00 UTC), 30 s before now, so on time; 01:30 CET (00:30 UTC) is late.
		{name: "calendar in a zone", expr: "30 * * * *", sched: model.Schedule{Misfire: model.MisfireRunAll},
			due:  time.Date(2030, 3, 31, 0, 30, 0, 0, time.UTC),
			now:  time.Date(2030, 3, 31, 1, 0, 30, 0, time.UTC),
			want: FirePlan{Fire: []time.Time{time.Date(2030, 3, 31, 0, 30, 0, 0, time.UTC), time.Date(2030, 3, 31, 1, 0, 0, 0, time.UTC)}, Next: ptr(time.Date(2030, 3, 31, 1, 30, 0, 0, time.UTC)), Missed: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc := mustParse(t, tt.expr, "Europe/Berlin")
			tt.sched.Cron = tt.expr
			got := PlanFire(sc, &tt.sched, tt.due, tt.now, time.Minute)
			require.Equal(t, tt.want, got)
		})
	}
}
