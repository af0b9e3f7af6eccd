package scheduler

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
)

func TestNewRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	job := &model.Job{ID: "j1", Name: "nightly", Namespace: "ns", Spec: model.JobSpec{Queue: "q", Priority: 3,
		Args: json.RawMessage(`{"a": 1}`), Concurrency: model.Concurrency{Policy: "forbid"}}}
	tests := []struct {
		name   string
		due    time.Time
		status model.RunStatus
		at     time.Time
	}{
		{"zero due is now", time.Time{}, model.RunQueued, now},
		{"a past due is now", now.Add(-time.Hour), model.RunQueued, now},
		{"a later due is scheduled", now.Add(time.Hour), model.RunScheduled, now.Add(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewRun("r1", job, model.TriggerManual, nil, tt.due, now)
			require.Equal(t, "r1", r.ID)
			require.Nil(t, r.Instant, "only a cron run has an instant")
			require.Equal(t, tt.status, r.Status)
			require.Equal(t, tt.at, r.ScheduledFor)
			require.Equal(t, 1, r.MaxAttempts, "at least one attempt")
			require.JSONEq(t, `{"a": 1}`, string(r.Args), "the job's args by default")
			require.Equal(t, &model.RunConcurrency{Key: "job:j1", Max: 1, Policy: model.ConcurrencyForbid}, r.Concurrency)
			if tt.status == model.RunScheduled {
				require.Equal(t, model.PendingNotDue, r.PendingCode)
			}
		})
	}
}

func TestNewCronRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	job := &model.Job{ID: "j1", Name: "nightly", Namespace: "ns", Spec: model.JobSpec{Queue: "q",
		Args: json.RawMessage(`{"a": 1}`), Retry: model.RetryPolicy{MaxAttempts: 3}}}
	tests := []struct {
		name   string
		at     time.Time
		status model.RunStatus
		code   model.PendingCode
	}{
		{"fired ahead of its instant: scheduled for it", now.Add(2 * time.Second), model.RunScheduled, model.PendingNotDue},
		{"fired at its instant: queued", now, model.RunQueued, model.PendingNone},
		{"a late instant (misfire, backfill): queued, still due at the instant", now.Add(-time.Hour), model.RunQueued, model.PendingNone},
		{"an instant given in a zone is held in UTC", now.Add(-time.Minute).In(berlin), model.RunQueued, model.PendingNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewCronRun("r1", job, tt.at, now)
			require.Equal(t, "r1", r.ID)
			require.Equal(t, model.TriggerCron, r.Trigger)
			require.Equal(t, tt.status, r.Status)
			require.Equal(t, tt.code, r.PendingCode)
			require.NotNil(t, r.Instant)
			require.Equal(t, tt.at.UTC(), *r.Instant)
			require.Equal(t, time.UTC, r.Instant.Location())
			require.Equal(t, tt.at.UTC(), r.ScheduledFor, "due at its instant")
			require.Equal(t, now, r.CreatedAt)
			require.Equal(t, 3, r.MaxAttempts)
			require.JSONEq(t, `{"a": 1}`, string(r.Args), "the job's args")
		})
	}
}

func TestRunConcurrency(t *testing.T) {
	t.Parallel()
	rate := &model.RateLimit{Rate: 5, Per: time.Minute}
	tests := []struct {
		name string
		c    model.Concurrency
		args string
		want *model.RunConcurrency
	}{
		{"no limit", model.Concurrency{}, "", nil},
		{"allow with a max", model.Concurrency{Max: 3}, "", &model.RunConcurrency{Key: "job:j1", Max: 3, Policy: model.ConcurrencyAllow}},
		{"queue defaults to one", model.Concurrency{Policy: "queue"}, "", &model.RunConcurrency{Key: "job:j1", Max: 1, Policy: model.ConcurrencyQueue}},
		{"a rate alone", model.Concurrency{Rate: rate}, "", &model.RunConcurrency{Key: "job:j1", Policy: model.ConcurrencyAllow, Rate: rate}},
		{"a key template over the args", model.Concurrency{Max: 1, Key: "c-{{.customer}}"}, `{"customer": "acme"}`,
			&model.RunConcurrency{Key: "key:ns:c-acme", Max: 1, Policy: model.ConcurrencyAllow}},
		{"a key that does not render falls back to the job's", model.Concurrency{Max: 1, Key: "c-{{.customer}}"}, `{}`,
			&model.RunConcurrency{Key: "job:j1", Max: 1, Policy: model.ConcurrencyAllow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := &model.Job{ID: "j1", Namespace: "ns", Spec: model.JobSpec{Concurrency: tt.c}}
			var args json.RawMessage
			if tt.args != "" {
				args = json.RawMessage(tt.args)
			}
			require.Equal(t, tt.want, RunConcurrency(job, args))
		})
	}
	_, err := RenderKey(&model.Job{Spec: model.JobSpec{Concurrency: model.Concurrency{Key: "c-{{.customer}}"}}}, json.RawMessage(`{}`))
	require.ErrorContains(t, err, "customer")
}
