package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/stint-dev/stint/internal/model"
)

var now0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) //nolint:gochecknoglobals // a read-only test constant

func TestDecide(t *testing.T) {
	t.Parallel()
	retry3 := model.RetryPolicy{MaxAttempts: 3, InitialDelay: 5 * time.Second, FinalExitCodes: []int{2, 9}, RetryExitCodes: []int{9}}
	at := now0.Add(5 * time.Second)
	tests := []struct {
		name string
		e    Ending
		u    float64
		want Outcome
	}{
		{"succeeded", Ending{Attempt: 1, MaxAttempts: 3, Policy: retry3, Status: model.AttemptSucceeded},
			0.5, Outcome{Status: model.RunSucceeded, FinishedAt: &now0}},
		{"succeeded wins over a cancel request", Ending{Attempt: 1, MaxAttempts: 3, CancelRequested: true, Status: model.AttemptSucceeded},
			0.5, Outcome{Status: model.RunSucceeded, FinishedAt: &now0}},
		{"cancelled", Ending{Attempt: 1, MaxAttempts: 3, Status: model.AttemptCancelled, Error: "stopped"},
			0.5, Outcome{Status: model.RunCancelled, FinishedAt: &now0, Error: "stopped"}},
		{"cancel requested, failed", Ending{Attempt: 1, MaxAttempts: 3, CancelRequested: true, Status: model.AttemptFailed, ExitCode: intp(143)},
			0.5, Outcome{Status: model.RunCancelled, FinishedAt: &now0}},
		{"failed, retried after the backoff", Ending{Attempt: 1, MaxAttempts: 3, Policy: retry3, Status: model.AttemptFailed, ExitCode: intp(1), Error: "boom"},
			0.5, Outcome{Status: model.RunScheduled, ScheduledFor: at, PendingCode: model.PendingRetryBackoff,
				PendingReason: "attempt 1 failed; attempt 2 due at 2026-01-02T03:04:10Z", Error: "boom"}},
		{"timed out, in words", Ending{Attempt: 2, MaxAttempts: 3, Policy: retry3, Status: model.AttemptTimedOut},
			0.5, Outcome{Status: model.RunScheduled, ScheduledFor: now0.Add(10 * time.Second), PendingCode: model.PendingRetryBackoff,
				PendingReason: "attempt 2 timed out; attempt 3 due at 2026-01-02T03:04:15Z"}},
		{"zero backoff queues at once, keeping the due time", Ending{Attempt: 1, MaxAttempts: 3, Policy: model.RetryPolicy{Jitter: 1}, Status: model.AttemptTimedOut},
			0, Outcome{Status: model.RunQueued}},
		{"lost, a disruption: queued at once, the budget and the due time untouched", Ending{Attempt: 1, MaxAttempts: 1, Status: model.AttemptLost, Error: "lease expired"},
			0.5, Outcome{Status: model.RunQueued, Error: "lease expired", Disrupted: true}},
		{"lost with backoff in the policy, still at once", Ending{Attempt: 2, MaxAttempts: 3, Disruptions: 1, Policy: retry3, Status: model.AttemptLost},
			0.5, Outcome{Status: model.RunQueued, Disrupted: true}},
		{"lost, default disruptions spent, no attempt left", Ending{Attempt: 4, MaxAttempts: 1, Disruptions: 3, Status: model.AttemptLost, Error: "lease expired"},
			0.5, Outcome{Status: model.RunFailed, FinishedAt: &now0, Error: "lease expired"}},
		{"lost, disruptions spent, retried by the policy", Ending{Attempt: 3, MaxAttempts: 3, Disruptions: 2, Policy: withDisruptions(retry3, 2), Status: model.AttemptLost},
			0.5, Outcome{Status: model.RunScheduled, ScheduledFor: at, PendingCode: model.PendingRetryBackoff,
				PendingReason: "attempt 3 lost; attempt 4 due at 2026-01-02T03:04:10Z"}},
		{"no disruptions allowed: lost counts", Ending{Attempt: 1, MaxAttempts: 1, Policy: withDisruptions(model.RetryPolicy{}, 0), Status: model.AttemptLost},
			0.5, Outcome{Status: model.RunFailed, FinishedAt: &now0}},
		{"disruptions do not count against attempts", Ending{Attempt: 3, MaxAttempts: 1, Disruptions: 2, Status: model.AttemptFailed},
			0.5, Outcome{Status: model.RunFailed, FinishedAt: &now0}},
		{"disruptions leave the failed attempt its retry", Ending{Attempt: 3, MaxAttempts: 2, Disruptions: 2, Policy: retry3, Status: model.AttemptFailed},
			0.5, Outcome{Status: model.RunScheduled, ScheduledFor: at, PendingCode: model.PendingRetryBackoff,
				PendingReason: "attempt 3 failed; attempt 4 due at 2026-01-02T03:04:10Z"}},
		{"a cancel request wins over a disruption", Ending{Attempt: 1, MaxAttempts: 1, CancelRequested: true, Status: model.AttemptLost},
			0.5, Outcome{Status: model.RunCancelled, FinishedAt: &now0}},
		{"attempts spent", Ending{Attempt: 3, MaxAttempts: 3, Policy: retry3, Status: model.AttemptFailed, Error: "boom"},
			0.5, Outcome{Status: model.RunFailed, FinishedAt: &now0, Error: "boom"}},
		{"final exit code", Ending{Attempt: 1, MaxAttempts: 3, Policy: retry3, Status: model.AttemptFailed, ExitCode: intp(2)},
			0.5, Outcome{Status: model.RunFailed, FinishedAt: &now0}},
		{"retry exit code beats final", Ending{Attempt: 1, MaxAttempts: 3, Policy: retry3, Status: model.AttemptFailed, ExitCode: intp(9)},
			0.5, Outcome{Status: model.RunScheduled, ScheduledFor: at, PendingCode: model.PendingRetryBackoff,
				PendingReason: "attempt 1 failed; attempt 2 due at 2026-01-02T03:04:10Z"}},
		{"an unknown status is a failure", Ending{Attempt: 1, MaxAttempts: 1, Status: "exploded"},
			0.5, Outcome{Status: model.RunFailed, FinishedAt: &now0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Decide(tt.e, now0, tt.u))
		})
	}
}

func TestNeedsRun(t *testing.T) {
	t.Parallel()
	require.False(t, NeedsRun(model.AttemptSucceeded))
	require.False(t, NeedsRun(model.AttemptCancelled))
	for _, s := range []model.AttemptStatus{model.AttemptFailed, model.AttemptTimedOut, model.AttemptLost, "bogus"} {
		require.True(t, NeedsRun(s), s)
	}
	// What NeedsRun promises: without the run, the outcome is the same.
	for _, s := range []model.AttemptStatus{model.AttemptSucceeded, model.AttemptCancelled} {
		alone := Decide(Ending{Status: s, Error: "e"}, now0, 0.5)
		full := Decide(Ending{Attempt: 3, MaxAttempts: 1, Policy: model.RetryPolicy{InitialDelay: time.Hour}, Status: s, Error: "e"}, now0, 0.9)
		require.Equal(t, alone, full, s)
	}
}

func TestMaxDisruptions(t *testing.T) {
	t.Parallel()
	require.Equal(t, DefaultMaxDisruptions, MaxDisruptions(model.RetryPolicy{}))
	require.Equal(t, 0, MaxDisruptions(withDisruptions(model.RetryPolicy{}, 0)))
	require.Equal(t, 7, MaxDisruptions(withDisruptions(model.RetryPolicy{}, 7)))
}

func withDisruptions(p model.RetryPolicy, n int) model.RetryPolicy {
	p.MaxDisruptions = &n
	return p
}

// genPolicy draws a retry policy as the API allows them.
func genPolicy(t *rapid.T) model.RetryPolicy {
	initial := time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "initial"))
	var maxDisruptions *int
	if rapid.Bool().Draw(t, "set_max_disruptions") {
		n := rapid.IntRange(0, 5).Draw(t, "max_disruptions")
		maxDisruptions = &n
	}
	return model.RetryPolicy{
		MaxDisruptions: maxDisruptions,
		MaxAttempts:    rapid.IntRange(1, 12).Draw(t, "max_attempts"),
		InitialDelay:   initial,
		MaxDelay:       time.Duration(rapid.Int64Range(int64(initial), int64(24*time.Hour)).Draw(t, "max_delay")),
		Multiplier:     rapid.Float64Range(1, 10).Draw(t, "multiplier"),
		Jitter:         rapid.Float64Range(0, 1).Draw(t, "jitter"),
		FinalExitCodes: rapid.SliceOfN(rapid.IntRange(0, 5), 0, 2).Draw(t, "final"),
		RetryExitCodes: rapid.SliceOfN(rapid.IntRange(0, 5), 0, 2).Draw(t, "retry"),
	}
}

// A run fed any sequence of failing ends (lost ones among them) is retried while attempts
// or disruptions remain, never past them, each retry due no earlier than the end. Lost
// attempts are disruptions while the policy has some left and never use up the retry
// budget: the run makes at most MaxAttempts + MaxDisruptions attempts, at most MaxAttempts
// of them counted, and ends failed after exactly MaxAttempts counted attempts unless a
// final exit code ends it sooner.
func TestDecideAttemptsNeverExceedTheMax(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		p := genPolicy(t)
		maxDisruptions := MaxDisruptions(p)
		now := now0
		disruptions := 0
		for attempt := 1; ; attempt++ {
			require.LessOrEqual(t, attempt, p.MaxAttempts+maxDisruptions, "an attempt past the attempts and disruptions")
			require.LessOrEqual(t, attempt-disruptions, p.MaxAttempts, "a counted attempt past the policy's max")
			var exit *int
			if rapid.Bool().Draw(t, "has_exit") {
				exit = intp(rapid.IntRange(0, 5).Draw(t, "exit"))
			}
			status := rapid.SampledFrom([]model.AttemptStatus{model.AttemptFailed, model.AttemptTimedOut, model.AttemptLost}).Draw(t, "status")
			if status == model.AttemptLost {
				exit = nil // a lost attempt has no exit code
			}
			u := rapid.Float64Range(0, 1).Draw(t, "u")
			if u >= 1 {
				u = 0.999999
			}
			o := Decide(Ending{Attempt: attempt, MaxAttempts: p.MaxAttempts, Disruptions: disruptions, Policy: p,
				Status: status, ExitCode: exit, Error: "e"}, now, u)
			require.Equal(t, "e", o.Error)
			require.Equal(t, status == model.AttemptLost && disruptions < maxDisruptions, o.Disrupted,
				"a lost attempt with disruptions left is a disruption, and nothing else is")
			if o.Disrupted {
				disruptions++
			}
			if o.Status == model.RunFailed {
				if !FinalExit(p, exit) {
					require.Equal(t, p.MaxAttempts, attempt-disruptions, "ended failed with attempts left")
				}
				require.Equal(t, &now, o.FinishedAt)
				return
			}
			if !o.Disrupted {
				require.Less(t, attempt-disruptions, p.MaxAttempts, "retried with no attempt left")
				require.False(t, FinalExit(p, exit), "retried after a final exit code")
			}
			require.Nil(t, o.FinishedAt)
			due := now
			switch o.Status {
			case model.RunQueued:
				require.True(t, o.ScheduledFor.IsZero(), "a run queued at once keeps its due time")
				require.Empty(t, o.PendingCode)
			case model.RunScheduled:
				due = o.ScheduledFor
				require.False(t, o.Disrupted, "a disruption waits for a backoff")
				require.True(t, o.ScheduledFor.After(now))
				require.Equal(t, model.PendingRetryBackoff, o.PendingCode)
				require.Equal(t, RetryReason(attempt, status, o.ScheduledFor), o.PendingReason)
			default:
				t.Fatalf("a failing end made the run %s", o.Status)
			}
			// The next attempt starts some time after it is due.
			now = due.Add(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "wait")))
		}
	})
}

// Backoff stays within [0, MaxDelay], and within the jitter band of the delay without
// jitter.
func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		p := genPolicy(t)
		n := rapid.IntRange(-3, 200).Draw(t, "n")
		u := rapid.Float64Range(0, 1).Draw(t, "u")
		d := Backoff(p, n, u)
		maxDelay := p.MaxDelay
		if maxDelay <= 0 {
			maxDelay = DefaultMaxDelay
		}
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.LessOrEqual(t, d, maxDelay)
		flat := p
		flat.Jitter = 0
		base := float64(Backoff(flat, n, u))
		// base is truncated to the nanosecond: the delay the jitter scales is below base+1,
		// and the result is truncated again.
		band := p.Jitter*(base+1) + 1
		require.InDelta(t, base, float64(d), band, "outside the jitter band of %v", time.Duration(base))
		require.Equal(t, Backoff(flat, n, 0.5), Backoff(flat, n, u), "without jitter the draw does not matter")
	})
}

func intp(i int) *int { return &i }
