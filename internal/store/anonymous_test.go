package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
)

func TestAnonymous(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// oneOff is an unnamed one-off job as the API builds it, with its first run.
	oneOff := func() NewJob {
		j := &model.Job{ID: "j1", Namespace: "default", Name: "j1", Enabled: true, CreatedAt: now, UpdatedAt: now,
			Spec: model.JobSpec{Command: []string{"true"}, Queue: "default", Retry: model.RetryPolicy{MaxAttempts: 3},
				Env: map[string]string{"A": "1"}, Timeout: time.Minute, Tags: []string{"t"},
				Requirements: model.Requirements{CPU: 1, Labels: map[string]string{"gpu": "a100"}}}}
		r := &model.Run{ID: "r1", JobID: "j1", JobName: "j1", Namespace: "default", Status: model.RunScheduled,
			Trigger: model.TriggerSubmit, ScheduledFor: now.Add(time.Hour), CreatedAt: now, MaxAttempts: 3}
		return NewJob{Job: j, Run: r}
	}
	require.True(t, Anonymous(oneOff()), "an unnamed one-off job, run now or later, with what to run, how and where")

	tests := []struct {
		name   string
		change func(*NewJob)
	}{
		{"no job", func(nj *NewJob) { nj.Job = nil }},
		{"no run (disabled or scheduled)", func(nj *NewJob) { nj.Run = nil }},
		{"named", func(nj *NewJob) { nj.Job.Name, nj.Run.JobName = "nightly", "nightly" }},
		{"idempotency key", func(nj *NewJob) { nj.Job.IdempotencyKey = "k" }},
		{"disabled", func(nj *NewJob) { nj.Job.Enabled = false }},
		{"next fire", func(nj *NewJob) { nj.Job.NextFireAt = &now }},
		{"schedule", func(nj *NewJob) { nj.Job.Spec.Schedule = &model.Schedule{Cron: "* * * * *"} }},
		{"concurrency policy", func(nj *NewJob) { nj.Job.Spec.Concurrency.Policy = "allow" }},
		{"concurrency max", func(nj *NewJob) { nj.Job.Spec.Concurrency.Max = 1 }},
		{"concurrency key", func(nj *NewJob) { nj.Job.Spec.Concurrency.Key = "{{.tenant}}" }},
		{"rate", func(nj *NewJob) {
			nj.Job.Spec.Concurrency.Rate = &model.RateLimit{Rate: 1, Per: time.Second}
		}},
		{"run under a limit", func(nj *NewJob) { nj.Run.Concurrency = &model.RunConcurrency{Key: "k", Max: 1} }},
		{"dependencies", func(nj *NewJob) {
			nj.Run.DependsOn = []model.Dependency{{RunID: "r0", Condition: model.CondSucceeded}}
		}},
		{"DAG member", func(nj *NewJob) { nj.Job.Spec.DAG = &model.DAGMember{ID: "r1", Entry: "a"} }},
		{"alert thresholds", func(nj *NewJob) { nj.Job.Spec.Alerts = &model.JobAlerts{Off: true} }},
		{"not a submission", func(nj *NewJob) { nj.Run.Trigger = model.TriggerManual }},
		{"run idempotency key", func(nj *NewJob) { nj.Run.IdempotencyKey = "k" }},
		{"run of another job", func(nj *NewJob) { nj.Run.JobID = "j2" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nj := oneOff()
			tt.change(&nj)
			require.False(t, Anonymous(nj))
		})
	}
}
