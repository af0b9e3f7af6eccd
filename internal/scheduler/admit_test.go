package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
)

func TestReserveAllowsABurstThenSpaces(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &model.RateLimit{Rate: 3, Per: time.Minute}
	var tat time.Time
	var got []time.Duration
	for range 6 {
		var at time.Time
		at, tat = Reserve(tat, now, r)
		got = append(got, at.Sub(now))
	}
	require.Equal(t, []time.Duration{0, 0, 0, 20 * time.Second, 40 * time.Second, time.Minute}, got,
		"three at once, then one every 20s: never more than 3 in any minute")

	// Idle for a while: the burst is available again.
	later := now.Add(10 * time.Minute)
	at, _ := Reserve(tat, later, r)
	require.Equal(t, later, at)
}

func TestTurnAt(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &model.RateLimit{Rate: 3, Per: time.Minute}
	var tat time.Time
	for range 3 {
		_, tat = Reserve(tat, now, r)
	}
	require.Equal(t, now.Add(20*time.Second), TurnAt(tat, r), "after a burst of 3, the next turn is 20s on")
	for _, asking := range []time.Time{now, now.Add(20 * time.Second), now.Add(time.Hour)} {
		want := TurnAt(tat, r)
		if want.Before(asking) {
			want = asking
		}
		at, _ := Reserve(tat, asking, r)
		require.Equal(t, want, at, "a run asking at %s starts at the turn, or at once once it came", asking)
	}
	require.Equal(t, now.Add(20*time.Second), TurnAt(tat, r), "the turn stays where it came while untaken")
}

func TestAdmit(t *testing.T) {
	c := &model.RunConcurrency{Max: 2, Policy: model.ConcurrencyForbid}
	require.Equal(t, AdmitRun, Admit(c, 1))
	require.Equal(t, SkipRun, Admit(c, 2))
	c.Policy = model.ConcurrencyReplace
	require.Equal(t, ReplaceRuns, Admit(c, 2))
	c.Policy = model.ConcurrencyQueue
	require.Equal(t, HoldRun, Admit(c, 3))
	require.Equal(t, AdmitRun, Admit(&model.RunConcurrency{Max: 0}, 100), "no max: a rate limit alone")
}

func TestAdmissionPreview(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy model.ConcurrencyPolicy
		active int
		want   string
	}{
		{"room left", model.ConcurrencyQueue, 1, ""},
		{"queue waits", model.ConcurrencyQueue, 2, `concurrency limit: 2 of 2 runs of job "report" active: a new run would wait for one to end`},
		{"allow waits too", model.ConcurrencyAllow, 2, `concurrency limit: 2 of 2 runs of job "report" active: a new run would wait for one to end`},
		{"forbid skips", model.ConcurrencyForbid, 2, `concurrency limit: 2 of 2 runs of job "report" active: a new run would be skipped (policy forbid)`},
		{"replace cancels", model.ConcurrencyReplace, 3, `concurrency limit: 3 of 2 runs of job "report" active: a new run would cancel the oldest (policy replace)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &model.RunConcurrency{Max: 2, Policy: tt.policy}
			require.Equal(t, tt.want, AdmissionPreview(c, tt.active, "report"))
		})
	}
}
