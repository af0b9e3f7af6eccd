package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// cronJob creates an enabled noop job on schedule s whose next fire is next (nil: computed
// from the clock, as the API does).
func cronJob(t *testing.T, e *Engine, b *testBundle, s model.Schedule, c model.Concurrency, next *time.Time) *model.Job {
	t.Helper()
	now := b.clk.Now()
	jobID := id.New(now)
	job := &model.Job{
		ID: jobID, Namespace: model.DefaultNamespace, Name: "cron-" + jobID, Enabled: true,
		Spec: model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Retry: model.RetryPolicy{MaxAttempts: 1},
			Schedule: &s, Concurrency: c},
		CreatedAt: now, UpdatedAt: now,
	}
	if next == nil {
		next = NextFireAt(job, now)
	}
	job.NextFireAt = next
	res, err := e.SubmitJobs(context.Background(), []store.NewJob{{Job: job}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	return res[0].Job
}

// runsOf lists a job's runs, oldest first.
func runsOf(t *testing.T, b *testBundle, jobID string) []*model.Run {
	t.Helper()
	page, err := b.store.ListRuns(context.Background(), &store.ListRunsParams{JobID: jobID, Limit: 1000})
	require.NoError(t, err)
	out := page.Runs
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func nextFireOf(t *testing.T, b *testBundle, jobID string) *time.Time {
	t.Helper()
	j, err := b.store.GetJob(context.Background(), &store.GetJobParams{IDOrName: jobID})
	require.NoError(t, err)
	return j.NextFireAt
}

func TestCronMisfirePolicies(t *testing.T) {
	// The server was down from 11:00 to 12:02: the instants 11:00, 11:05, ..., 12:00 (13 of
	// them) were missed.
	down := t0.Add(-time.Hour)
	cases := []struct {
		name  string
		sched model.Schedule
		want  []time.Time
		stats model.CronStats // missed counts up to the cap (plus the first instant)
	}{
		{"skip", model.Schedule{Cron: "*/5 * * * *", Misfire: model.MisfireSkip}, nil, model.CronStats{Missed: 13, Dropped: 13}},
		{"run_once", model.Schedule{Cron: "*/5 * * * *"}, []time.Time{down}, model.CronStats{Runs: 1, Missed: 13, Dropped: 12}},
		{"run_all capped", model.Schedule{Cron: "*/5 * * * *", Misfire: model.MisfireRunAll, MisfireLimit: 3},
			[]time.Time{down, down.Add(5 * time.Minute), down.Add(10 * time.Minute)}, model.CronStats{Runs: 3, Missed: 4, Dropped: 1}},
		{"run_all", model.Schedule{Cron: "*/30 * * * *", Misfire: model.MisfireRunAll},
			[]time.Time{down, down.Add(30 * time.Minute), t0}, model.CronStats{Runs: 3, Missed: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, b := setupAt(t, t0.Add(2*time.Minute)) // the clock never reads an earlier time
			j := cronJob(t, e, b, tc.sched, model.Concurrency{}, &down)
			next := nextAfter(t, tc.sched, t0.Add(2*time.Minute))
			waitFor(t, func() bool { n := nextFireOf(t, b, j.ID); return n != nil && n.Equal(next) }, "recovered in one step")
			var got []time.Time
			for _, r := range runsOf(t, b, j.ID) {
				got = append(got, r.ScheduledFor)
			}
			slices.SortFunc(got, time.Time.Compare) // runs of one fire share a creation instant
			require.Equal(t, tc.want, got)
			// The counters move just after the fire's commit.
			waitFor(t, func() bool { return e.CronStats() == tc.stats }, fmt.Sprintf("stats %+v", e.CronStats()))
		})
	}
}

// TestCronGraceAfterOutage: an instant late by at most the misfire grace (a minute) fires
// under every policy; the policy decides only about the instants later than that.
func TestCronGraceAfterOutage(t *testing.T) {
	every := func(d time.Duration, from, to time.Time) []time.Time {
		var out []time.Time
		for at := from; !at.After(to); at = at.Add(d) {
			out = append(out, at)
		}
		return out
	}
	// A 20 s outage of an @every 1s job: its 21 instants, t0-20s .. t0, are each at most
	// 20 s late.
	short := t0.Add(-20 * time.Second)
	all := every(time.Second, short, t0)
	// A 2 min outage of an @every 10s job: t0-120s .. t0-70s (6) are late, t0-60s .. t0 (7)
	// on time.
	long := t0.Add(-2 * time.Minute)
	late, onTime := every(10*time.Second, long, t0.Add(-70*time.Second)), every(10*time.Second, t0.Add(-time.Minute), t0)
	cases := []struct {
		name  string
		sched model.Schedule
		due   time.Time
		want  []time.Time
		stats model.CronStats
	}{
		{"20s skip", model.Schedule{Cron: "@every 1s", Misfire: model.MisfireSkip}, short, all, model.CronStats{Runs: 21}},
		{"20s run_once", model.Schedule{Cron: "@every 1s"}, short, all, model.CronStats{Runs: 21}},
		{"20s run_all", model.Schedule{Cron: "@every 1s", Misfire: model.MisfireRunAll}, short, all, model.CronStats{Runs: 21}},
		// The limit caps on-time runs too; the count of dropped ones stops at limit + 1.
		{"20s run_once over its limit", model.Schedule{Cron: "@every 1s", MisfireLimit: 5}, short, all[:5],
			model.CronStats{Runs: 5, Dropped: 1}},
		{"2m skip", model.Schedule{Cron: "@every 10s", Misfire: model.MisfireSkip}, long, onTime,
			model.CronStats{Runs: 7, Missed: 6, Dropped: 6}},
		{"2m run_once", model.Schedule{Cron: "@every 10s"}, long, append([]time.Time{long}, onTime...),
			model.CronStats{Runs: 8, Missed: 6, Dropped: 5}},
		{"2m run_all", model.Schedule{Cron: "@every 10s", Misfire: model.MisfireRunAll}, long, append(late, onTime...),
			model.CronStats{Runs: 13, Missed: 6}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, b := setup(t)
			j := cronJob(t, e, b, tc.sched, model.Concurrency{}, &tc.due)
			next := t0.Add(time.Second)
			if tc.due == long {
				next = t0.Add(10 * time.Second)
			}
			waitFor(t, func() bool { n := nextFireOf(t, b, j.ID); return n != nil && n.Equal(next) }, "recovered in one step, on the job's grid")
			var got []time.Time
			for _, r := range runsOf(t, b, j.ID) {
				got = append(got, r.ScheduledFor)
			}
			slices.SortFunc(got, time.Time.Compare)
			require.Equal(t, tc.want, got)
			waitFor(t, func() bool { return e.CronStats() == tc.stats }, fmt.Sprintf("stats %+v", e.CronStats()))
		})
	}
}

func nextAfter(t *testing.T, s model.Schedule, now time.Time) time.Time {
	t.Helper()
	next := scheduleNext(&s, true, now)
	require.NotNil(t, next)
	return *next
}

func TestCronMissedForAYearRecoversAtOnce(t *testing.T) {
	e, b := setup(t)
	yearAgo := t0.AddDate(-1, 0, 0)
	j := cronJob(t, e, b, model.Schedule{Cron: "* * * * * *", Misfire: model.MisfireRunAll}, model.Concurrency{}, &yearAgo)
	waitFor(t, func() bool { n := nextFireOf(t, b, j.ID); return n != nil && n.Equal(t0.Add(time.Second)) }, "next fire is the next second")
	require.Len(t, runsOf(t, b, j.ID), scheduler.DefaultMisfireLimit, "run_all stops at its cap")
}

func TestCronConcurrencyPolicies(t *testing.T) {
	cases := []struct {
		policy string
		max    int
		want   []model.RunStatus // the runs after three ticks, no worker running them
	}{
		{"allow", 2, []model.RunStatus{model.RunQueued, model.RunQueued, model.RunWaiting}},
		{"queue", 0, []model.RunStatus{model.RunQueued, model.RunWaiting, model.RunWaiting}},
		{"forbid", 0, []model.RunStatus{model.RunQueued, model.RunSkipped, model.RunSkipped}},
		{"replace", 0, []model.RunStatus{model.RunCancelled, model.RunCancelled, model.RunQueued}},
	}
	for _, tc := range cases {
		t.Run(tc.policy, func(t *testing.T) {
			e, b := setup(t)
			j := cronJob(t, e, b, model.Schedule{Cron: "* * * * *"}, model.Concurrency{Policy: tc.policy, Max: tc.max}, nil)
			for i := 1; i <= 3; i++ {
				at := t0.Add(time.Duration(i) * time.Minute)
				waitTimer(t, b, at)
				b.clk.Set(at)
				waitFor(t, func() bool { return len(runsOf(t, b, j.ID)) == i }, fmt.Sprintf("one run per tick (%d); pending timers %v", i, b.clk.Pending()))
			}
			var got []model.RunStatus
			for _, r := range runsOf(t, b, j.ID) {
				got = append(got, r.Status)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestCronQueuedRunStartsWhenTheActiveOneEnds(t *testing.T) {
	e, b := setup(t)
	register(t, e, "w1")
	// Every 5 s: the second tick comes while the first run's lease (10 s) is alive.
	j := cronJob(t, e, b, model.Schedule{Cron: "*/5 * * * * *"}, model.Concurrency{Policy: "queue"}, nil)
	at := t0.Add(5 * time.Second)
	waitTimer(t, b, at)
	b.clk.Set(at)
	waitFor(t, func() bool { return len(runsOf(t, b, j.ID)) == 1 }, "first tick")
	l := lease(t, e, "w1", 5, 0)
	require.Len(t, l.Leases, 1)

	at = at.Add(5 * time.Second)
	waitTimer(t, b, at)
	b.clk.Set(at)
	waitFor(t, func() bool { return len(runsOf(t, b, j.ID)) == 2 }, "second tick")
	held := runsOf(t, b, j.ID)[1]
	require.Equal(t, model.RunWaiting, held.Status)
	require.Equal(t, model.PendingConcurrencyLimit, held.PendingCode)
	require.Empty(t, lease(t, e, "w1", 5, 0).Leases, "the held run is not leased")

	complete(t, e, l.Leases[0], "succeeded")
	require.Equal(t, model.RunQueued, getRun(t, b, held.ID).Status, "admitted by the first run's end")
	again := lease(t, e, "w1", 5, 0)
	require.Len(t, again.Leases, 1)
	require.Equal(t, held.ID, again.Leases[0].Run.ID)
}

func TestCronLeadCreatesRunsAheadOfTheirInstant(t *testing.T) {
	const lead = 2 * time.Second
	e, b := setup(t, func(c *Config) { c.CronLead = lead })
	free := cronJob(t, e, b, model.Schedule{Cron: "*/7 * * * *"}, model.Concurrency{}, nil)
	limited := cronJob(t, e, b, model.Schedule{Cron: "*/7 * * * *"}, model.Concurrency{Policy: "forbid"}, nil)
	instant := t0.Add(7 * time.Minute)

	waitTimer(t, b, instant.Add(-lead))
	b.clk.Set(instant.Add(-lead))
	waitFor(t, func() bool { return len(runsOf(t, b, free.ID)) == 1 }, "the free job fires ahead")
	ahead := runsOf(t, b, free.ID)[0]
	require.Equal(t, model.RunScheduled, ahead.Status, "created ahead, due at its instant")
	require.Equal(t, instant, ahead.ScheduledFor)
	require.Empty(t, runsOf(t, b, limited.ID), "a limited job fires at its instant, when its admission is decided")

	// Both the cron loop (for the limited job) and the promoter sleep until the instant.
	waitFor(t, func() bool {
		n := 0
		for _, at := range b.clk.Pending() {
			if at.Equal(instant) {
				n++
			}
		}
		return n >= 2
	}, "two loops asleep until the instant")
	b.clk.Set(instant)
	register(t, e, "w1")
	waitFor(t, func() bool {
		lease(t, e, "w1", 2, 0)
		return getRun(t, b, ahead.ID).Status == model.RunRunning
	}, "leasable at its instant")
	waitFor(t, func() bool { return len(runsOf(t, b, limited.ID)) == 1 }, "the limited job fired at its instant")
	require.Equal(t, instant, runsOf(t, b, limited.ID)[0].ScheduledFor)
}

func TestRescheduleDropsRunsCreatedAhead(t *testing.T) {
	const lead = 2 * time.Second
	e, b := setup(t, func(c *Config) { c.CronLead = lead })
	j := cronJob(t, e, b, model.Schedule{Cron: "*/7 * * * *"}, model.Concurrency{}, nil)
	instant := t0.Add(7 * time.Minute)
	waitTimer(t, b, instant.Add(-lead))
	b.clk.Set(instant.Add(-lead))
	waitFor(t, func() bool { return len(runsOf(t, b, j.ID)) == 1 }, "fired ahead")

	// The schedule changes before the instant: the run made for the old rule goes.
	spec := j.Spec
	spec.Schedule = &model.Schedule{Cron: "*/11 * * * *"}
	now := b.clk.Now()
	next := NextFireAt(&model.Job{Spec: spec, Enabled: true}, now)
	_, err := e.UpdateJob(context.Background(), &store.UpdateJobParams{ID: j.ID, Spec: spec, Enabled: true, NextFireAt: next, Reschedule: true})
	require.NoError(t, err)
	require.Empty(t, runsOf(t, b, j.ID), "the run created ahead for the old rule is dropped")
	require.Equal(t, t0.Add(11*time.Minute), *nextFireOf(t, b, j.ID))
}

func TestRateLimitedQueueWakesWorkersAtItsNextTurn(t *testing.T) {
	e, b := setup(t)
	register(t, e, "w1")
	_, err := e.UpdateQueue(context.Background(), &store.UpdateQueueParams{Name: model.DefaultQueue,
		RateLimit: &model.RateLimit{Rate: 1, Per: 10 * time.Second}})
	require.NoError(t, err)
	submit(t, e, b, time.Time{}, model.RetryPolicy{MaxAttempts: 1})
	second := submit(t, e, b, time.Time{}, model.RetryPolicy{MaxAttempts: 1})

	require.Len(t, lease(t, e, "w1", 5, 0).Leases, 1, "one turn now")
	got := make(chan int, 1)
	go func() { got <- len(lease(t, e, "w1", 5, 30*time.Second).Leases) }()
	waitTimer(t, b, t0.Add(30*time.Second)) // the worker's long poll waits
	// The release loop sleeps until the queue's next turn, or is yet to look: on a busy
	// machine it may look only once the clock has moved, and tells of the turn then.
	waitTimer(t, b, t0.Add(10*time.Second))
	b.clk.Set(t0.Add(10 * time.Second))
	require.Equal(t, 1, <-got, "the waiting worker is woken at the turn and leases the second run")
	require.Equal(t, model.RunRunning, getRun(t, b, second.ID).Status)
}
