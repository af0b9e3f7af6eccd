package alerting

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/stint-dev/stint/internal/model"
)

var t0 = time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// fired returns the subjects of res.Fire by rule.
func fired(res Result) map[Rule][]string {
	out := map[Rule][]string{}
	for _, a := range res.Fire {
		out[a.Rule] = append(out[a.Rule], a.Subject)
	}
	return out
}

func TestConditions(t *testing.T) {
	t.Parallel()
	job := Job{ID: "j1", Namespace: "default", Name: "nightly"}
	f, s := model.RunFailed, model.RunSucceeded
	cases := []struct {
		name    string
		facts   Facts
		rules   Rules
		want    map[Rule][]string
		summary string // of the one alert fired, when set
	}{
		{name: "three failures in a row", facts: Facts{Streaks: []Streak{{Job: job, Recent: []model.RunStatus{f, f, f, s}}}},
			want: map[Rule][]string{RuleJobFailing: {"job:j1"}}, summary: "job nightly failed 3 times in a row"},
		{name: "a success breaks the streak", facts: Facts{Streaks: []Streak{{Job: job, Recent: []model.RunStatus{f, s, f, f}}}}},
		{name: "fewer runs than the threshold", facts: Facts{Streaks: []Streak{{Job: job, Recent: []model.RunStatus{f, f}}}}},
		{name: "the job's own threshold", facts: Facts{Streaks: []Streak{{Job: Job{ID: "j1", Name: "x", Alerts: &model.JobAlerts{ConsecutiveFailures: 5}},
			Recent: []model.RunStatus{f, f, f, f}}}}},
		{name: "the job turned alerts off", facts: Facts{Streaks: []Streak{{Job: Job{ID: "j1", Alerts: &model.JobAlerts{Off: true}},
			Recent: []model.RunStatus{f, f, f}}}}},
		{name: "rule disabled server-wide", rules: Rules{Disabled: map[Rule]bool{RuleJobFailing: true}},
			facts: Facts{Streaks: []Streak{{Job: job, Recent: []model.RunStatus{f, f, f}}}}},

		{name: "cron: next fire overdue", facts: Facts{Cron: []CronJob{{Job: job, NextFireAt: ptr(t0.Add(-time.Minute))}}},
			want:    map[Rule][]string{RuleCronLate: {"job:j1"}},
			summary: "cron instant 2030-01-02T11:59:00Z of job nightly did not start within 1m0s: no server fired it (no leader, or its cron loop is behind)"},
		{name: "cron: next fire within grace", facts: Facts{Cron: []CronJob{{Job: job, NextFireAt: ptr(t0.Add(-59 * time.Second))}}}},
		{name: "cron: queued in a paused queue", facts: Facts{
			Queues: []Queue{{Name: "q", Paused: true}},
			Cron: []CronJob{{Job: job, NextFireAt: ptr(t0.Add(time.Hour)), Latest: []CronRun{
				{ID: "r1", Instant: t0.Add(-2 * time.Minute), Status: model.RunQueued, Queue: "q"}}}}},
			want:    map[Rule][]string{RuleCronLate: {"job:j1"}},
			summary: "cron instant 2030-01-02T11:58:00Z of job nightly did not start within 1m0s: run r1 is queued: queue q is paused"},
		{name: "cron: skipped by forbid", facts: Facts{Cron: []CronJob{{Job: job, Latest: []CronRun{
			{ID: "r1", Instant: t0.Add(-2 * time.Minute), Status: model.RunSkipped, Reason: "forbid: a run of the job is active"}}}}},
			want:    map[Rule][]string{RuleCronLate: {"job:j1"}},
			summary: "cron instant 2030-01-02T11:58:00Z of job nightly did not start within 1m0s: run r1 skipped before starting: forbid: a run of the job is active"},
		{name: "cron: no worker fits", facts: Facts{Cron: []CronJob{{Job: job, Latest: []CronRun{
			{ID: "r1", Instant: t0.Add(-2 * time.Minute), Status: model.RunQueued, PendingCode: model.PendingNoWorker, Reason: "no worker has label gpu=a100"}}}}},
			want:    map[Rule][]string{RuleCronLate: {"job:j1"}},
			summary: "cron instant 2030-01-02T11:58:00Z of job nightly did not start within 1m0s: run r1 is queued: no worker has label gpu=a100"},
		{name: "cron: started late", facts: Facts{Cron: []CronJob{{Job: job, Latest: []CronRun{
			{ID: "r1", Instant: t0.Add(-5 * time.Minute), Status: model.RunRunning, StartedAt: ptr(t0.Add(-3 * time.Minute))}}}}},
			want:    map[Rule][]string{RuleCronLate: {"job:j1"}},
			summary: "cron instant 2030-01-02T11:55:00Z of job nightly did not start within 1m0s: it started 2m0s late"},
		{name: "cron: started in time", facts: Facts{Cron: []CronJob{{Job: job, Latest: []CronRun{
			{ID: "r1", Instant: t0.Add(-5 * time.Minute), Status: model.RunSucceeded, StartedAt: ptr(t0.Add(-5*time.Minute + time.Second))}}}}}},
		{name: "cron: the job's own grace", facts: Facts{Cron: []CronJob{{Job: Job{ID: "j1", Alerts: &model.JobAlerts{LateAfter: 10 * time.Minute}},
			Latest: []CronRun{{ID: "r1", Instant: t0.Add(-5 * time.Minute), Status: model.RunQueued}}}}}},

		{name: "queue backlog", facts: Facts{Queues: []Queue{{Name: "q", Queued: 10001}}},
			want: map[Rule][]string{RuleQueueBacklog: {"queue:q"}}, summary: "queue q: 10001 runs queued (threshold 10000)"},
		{name: "queue oldest too old, paused", facts: Facts{Queues: []Queue{{Name: "q", Paused: true, Queued: 1, OldestQueued: ptr(t0.Add(-11 * time.Minute))}}},
			want: map[Rule][]string{RuleQueueBacklog: {"queue:q"}}, summary: "queue q: oldest queued for 11m0s (threshold 10m0s) (paused)"},
		{name: "queue's own thresholds", facts: Facts{Queues: []Queue{{Name: "q", Queued: 6, Alerts: &model.QueueAlerts{MaxBacklog: 5}}}},
			want: map[Rule][]string{RuleQueueBacklog: {"queue:q"}}},
		{name: "queue within thresholds", facts: Facts{Queues: []Queue{{Name: "q", Queued: 10000, OldestQueued: ptr(t0.Add(-10 * time.Minute))}}}},

		{name: "worker lost", facts: Facts{Workers: []Worker{{ID: "w1", State: model.WorkerLost, LastHeartbeat: t0.Add(-time.Minute)}, {ID: "w2", State: model.WorkerActive}}},
			want: map[Rule][]string{RuleWorkerLost: {"worker:w1"}}, summary: "worker w1 lost: last heartbeat 2030-01-02T11:59:00Z"},

		{name: "run past its timeout and grace", facts: Facts{Running: []Running{{ID: "r1", Job: Job{ID: "j1", Name: "etl", Timeout: time.Minute}, AttemptStarted: t0.Add(-3 * time.Minute)}}},
			want: map[Rule][]string{RuleRunTooLong: {"run:r1"}}, summary: "run r1 of job etl running for 3m0s (expected at most 2m0s)"},
		{name: "run without timeout or max_duration", facts: Facts{Running: []Running{{ID: "r1", Job: job, AttemptStarted: t0.Add(-time.Hour)}}}},
		{name: "run past its max_duration", facts: Facts{Running: []Running{{ID: "r1", Job: Job{ID: "j1", Alerts: &model.JobAlerts{MaxDuration: time.Minute}}, AttemptStarted: t0.Add(-90 * time.Second)}}},
			want: map[Rule][]string{RuleRunTooLong: {"run:r1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := Evaluate(nil, tc.facts, tc.rules, t0)
			want := tc.want
			if want == nil {
				want = map[Rule][]string{}
			}
			require.Equal(t, want, fired(res))
			require.Empty(t, res.Resolve)
			if tc.summary != "" {
				require.Len(t, res.Fire, 1)
				require.Equal(t, tc.summary, res.Fire[0].Summary)
				require.Equal(t, t0, res.Fire[0].StartedAt)
				require.Equal(t, Firing, res.Fire[0].State)
			}
		})
	}
}

func TestLinks(t *testing.T) {
	t.Parallel()
	res := Evaluate(nil, Facts{
		Streaks: []Streak{{Job: Job{ID: "j1"}, Recent: []model.RunStatus{model.RunFailed, model.RunFailed, model.RunFailed}}},
		Queues:  []Queue{{Name: "q", Queued: 1e6}},
		Workers: []Worker{{ID: "w", State: model.WorkerLost}},
		Running: []Running{{ID: "r", Job: Job{Timeout: time.Second}, AttemptStarted: t0.Add(-time.Hour)}},
	}, Rules{}, t0)
	links := map[Rule]string{}
	for _, a := range res.Fire {
		links[a.Rule] = a.Link
	}
	require.Equal(t, map[Rule]string{RuleJobFailing: "/ui/jobs/j1", RuleQueueBacklog: "/ui/queues",
		RuleWorkerLost: "/ui/workers", RuleRunTooLong: "/ui/runs/r"}, links)
}

// apply folds a result into the open alerts, as the Alerter persists it.
func apply(open []Alert, res Result, n *int) []Alert {
	byKey := map[key]int{}
	for i, a := range open {
		byKey[key{a.Rule, a.Subject}] = i
	}
	for _, a := range res.Update {
		open[byKey[key{a.Rule, a.Subject}]] = a
	}
	drop := map[key]bool{}
	for _, a := range res.Resolve {
		drop[key{a.Rule, a.Subject}] = true
	}
	var out []Alert
	for _, a := range open {
		if !drop[key{a.Rule, a.Subject}] {
			out = append(out, a)
		}
	}
	for _, a := range res.Fire {
		*n++
		a.ID = fmt.Sprint(*n)
		out = append(out, a)
	}
	return out
}

func TestStreakOfUnexaminedJobStays(t *testing.T) {
	t.Parallel()
	f := []model.RunStatus{model.RunFailed, model.RunFailed, model.RunFailed}
	n := 0
	open := apply(nil, Evaluate(nil, Facts{Streaks: []Streak{{Job: Job{ID: "a"}, Recent: f}}}, Rules{}, t0), &n)
	require.Len(t, open, 1)
	// A later read that examined other jobs only leaves it firing, however long.
	res := Evaluate(open, Facts{Streaks: []Streak{{Job: Job{ID: "b"}}}}, Rules{}, t0.Add(time.Hour))
	require.True(t, res.Empty())
	// Once the job's runs are read again and it succeeded, it clears, then resolves.
	ok := Facts{Streaks: []Streak{{Job: Job{ID: "a"}, Recent: []model.RunStatus{model.RunSucceeded}}}}
	res = Evaluate(open, ok, Rules{}, t0.Add(2*time.Hour))
	require.Len(t, res.Update, 1)
	open = apply(open, res, &n)
	res = Evaluate(open, ok, Rules{}, t0.Add(2*time.Hour+time.Minute))
	require.Len(t, res.Resolve, 1)
	require.Equal(t, t0.Add(2*time.Hour+time.Minute), *res.Resolve[0].ResolvedAt)
}

func TestScannedAlertsStayWhenUnread(t *testing.T) {
	t.Parallel()
	n := 0
	late := Facts{Cron: []CronJob{{Job: Job{ID: "c"}, NextFireAt: ptr(t0.Add(-time.Hour))}},
		Queues:  []Queue{{Name: "q", Queued: 10001}},
		Running: []Running{{ID: "r", Job: Job{ID: "j", Alerts: &model.JobAlerts{MaxDuration: time.Minute}}, AttemptStarted: t0.Add(-time.Hour)}}}
	open := apply(nil, Evaluate(nil, late, Rules{}, t0), &n)
	var rules []Rule
	for _, a := range open {
		rules = append(rules, a.Rule)
	}
	require.ElementsMatch(t, []Rule{RuleCronLate, RuleQueueBacklog, RuleRunTooLong}, rules)
	// A read without the cron jobs, queues and running runs neither clears them nor fires
	// others, however long.
	require.True(t, Evaluate(open, Facts{ScansUnread: true}, Rules{}, t0.Add(time.Hour)).Empty())
	// A read with them, the job, queue and run gone, clears them (complete lists).
	res := Evaluate(open, Facts{}, Rules{}, t0.Add(2*time.Hour))
	require.Len(t, res.Update, 3)
}

func TestDisablingResolvesAtOnce(t *testing.T) {
	t.Parallel()
	n := 0
	facts := Facts{Workers: []Worker{{ID: "w", State: model.WorkerLost}}}
	open := apply(nil, Evaluate(nil, facts, Rules{}, t0), &n)
	res := Evaluate(open, facts, Rules{Disabled: map[Rule]bool{RuleWorkerLost: true}}, t0.Add(time.Second))
	require.Len(t, res.Resolve, 1)
	require.Empty(t, res.Fire)
}

// TestOnceProperty drives one subject of each complete rule through random samples of its
// condition at increasing times and checks the transitions: per subject, fires and resolves
// alternate (one alert open at most), an alert fires only when its condition holds and no
// alert is open, and it resolves only after the condition was clear for the whole
// hysteresis, never while it holds.
func TestOnceProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		hyst := time.Duration(rapid.Int64Range(1, 300).Draw(t, "hysteresis s")) * time.Second
		rules := Rules{Hysteresis: hyst}
		now := t0
		var open []Alert
		n := 0
		clearSince := map[string]*time.Time{} // per subject, while an alert is open
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			now = now.Add(time.Duration(rapid.Int64Range(0, 120).Draw(t, "gap s")) * time.Second)
			lost := rapid.Bool().Draw(t, "lost")
			queued := rapid.SampledFrom([]int{0, 10000, 10001}).Draw(t, "queued")
			facts := Facts{Workers: []Worker{{ID: "w", State: map[bool]model.WorkerState{true: model.WorkerLost, false: model.WorkerActive}[lost]}},
				Queues: []Queue{{Name: "q", Queued: queued}}}
			holds := map[string]bool{"worker:w": lost, "queue:q": queued > 10000}
			if rapid.Bool().Draw(t, "repeat") { // evaluating twice at one instant changes nothing more
				res := Evaluate(open, facts, rules, now)
				open = apply(open, res, &n)
			}
			res := Evaluate(open, facts, rules, now)
			isOpen := map[string]bool{}
			for _, a := range open {
				isOpen[a.Subject] = true
			}
			for _, a := range res.Fire {
				if !holds[a.Subject] || isOpen[a.Subject] {
					t.Fatalf("fired %s (holds %v, open %v)", a.Subject, holds[a.Subject], isOpen[a.Subject])
				}
			}
			for _, a := range res.Resolve {
				if holds[a.Subject] || !isOpen[a.Subject] {
					t.Fatalf("resolved %s while it holds or is not open", a.Subject)
				}
				since := clearSince[a.Subject]
				if since == nil || now.Sub(*since) < hyst {
					t.Fatalf("resolved %s before it was clear for %s", a.Subject, hyst)
				}
			}
			for subject, h := range holds {
				if h && !isOpen[subject] && len(res.Fire) == 0 {
					t.Fatalf("%s holds with no alert and nothing fired", subject)
				}
			}
			open = apply(open, res, &n)
			for subject, h := range holds {
				switch {
				case h:
					delete(clearSince, subject)
				case clearSince[subject] == nil:
					at := now
					clearSince[subject] = &at
				}
			}
			if again := Evaluate(open, facts, rules, now); len(again.Fire) > 0 {
				t.Fatalf("a second evaluation at the same instant fired again: %v", again.Fire)
			}
		}
	})
}
