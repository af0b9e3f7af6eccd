package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
)

func TestRetry(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ended := now.Add(-time.Hour)
	tests := []struct {
		name      string
		status    model.RunStatus
		jobExists bool
		wantErr   string
	}{
		{"failed reopens", model.RunFailed, true, ""},
		{"cancelled reopens", model.RunCancelled, true, ""},
		{"succeeded is final for good", model.RunSucceeded, true, "run is succeeded: invalid state"},
		{"skipped is refused", model.RunSkipped, true, "run is skipped: invalid state"},
		{"running is refused", model.RunRunning, true, "run is running: invalid state"},
		{"queued is refused", model.RunQueued, true, "run is queued: invalid state"},
		{"a deleted job's run cannot run", model.RunFailed, false, "its job was deleted: invalid state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			instant := ended.Add(-time.Minute)
			r := &model.Run{Status: tt.status, Attempt: 3, MaxAttempts: 3, FinishedAt: &ended, Error: "exit 1",
				CancelRequested: true, ScheduledFor: ended, Trigger: model.TriggerCron, Instant: &instant}
			before := *r
			err := Retry(r, tt.jobExists, now)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, model.ErrInvalidState)
				require.EqualError(t, err, tt.wantErr)
				require.Equal(t, before, *r, "a refused retry changes nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, model.RunQueued, r.Status)
			require.Equal(t, now, r.ScheduledFor)
			require.Equal(t, ended.Add(-time.Minute), *r.Instant, "a cron run keeps its instant")
			require.Equal(t, 4, r.MaxAttempts, "one more attempt in the budget")
			require.Equal(t, 3, r.Attempt, "attempts made stay counted")
			require.Nil(t, r.FinishedAt)
			require.Empty(t, r.Error)
			require.False(t, r.CancelRequested)
			require.Equal(t, model.PendingNone, r.PendingCode)
		})
	}
}
