package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

func testCompletion(t *testing.T, open OpenFunc) {
	t.Run("Rules", func(t *testing.T) {
		t.Parallel()
		// Full jitter: a draw of 0 retries at once.
		retry3 := model.RetryPolicy{MaxAttempts: 3, Jitter: 1, FinalExitCodes: []int{2, 9}, RetryExitCodes: []int{9}}
		withDelay := func(d time.Duration, jitter float64) model.RetryPolicy {
			p := retry3
			p.InitialDelay, p.Jitter = d, jitter
			return p
		}
		noDisruptions := func(p model.RetryPolicy) model.RetryPolicy {
			p.MaxDisruptions = intp(0)
			return p
		}
		cases := []struct {
			name        string
			policy      model.RetryPolicy
			cancelReq   bool
			status      model.AttemptStatus
			exit        *int
			u           *float64 // the Rand's draw; nil: Rand is nil
			wantStatus  model.RunStatus
			wantPending model.PendingCode
			wantDelay   time.Duration
			wantDisrupt int
		}{
			{name: "succeeded", policy: retry3, status: model.AttemptSucceeded, exit: intp(0), u: floatp(0), wantStatus: model.RunSucceeded},
			{name: "failed, attempts left, zero backoff", policy: retry3, status: model.AttemptFailed, exit: intp(1), u: floatp(0), wantStatus: model.RunQueued},
			{name: "failed, attempts left, backoff", policy: withDelay(5*time.Second, 0), status: model.AttemptFailed, exit: intp(1), u: floatp(0), wantStatus: model.RunScheduled, wantPending: model.PendingRetryBackoff, wantDelay: 5 * time.Second},
			{name: "failed, nil Rand draws the middle", policy: withDelay(4*time.Second, 1), status: model.AttemptFailed, exit: intp(1), wantStatus: model.RunScheduled, wantPending: model.PendingRetryBackoff, wantDelay: 4 * time.Second},
			{name: "failed, jitter spreads by the draw", policy: withDelay(4*time.Second, 0.5), status: model.AttemptFailed, exit: intp(1), u: floatp(0.75), wantStatus: model.RunScheduled, wantPending: model.PendingRetryBackoff, wantDelay: 5 * time.Second},
			{name: "failed, no attempt left", policy: model.RetryPolicy{MaxAttempts: 1}, status: model.AttemptFailed, exit: intp(1), u: floatp(0), wantStatus: model.RunFailed},
			{name: "final exit code", policy: retry3, status: model.AttemptFailed, exit: intp(2), u: floatp(0), wantStatus: model.RunFailed},
			{name: "retry exit code beats final", policy: retry3, status: model.AttemptFailed, exit: intp(9), u: floatp(0), wantStatus: model.RunQueued},
			{name: "failed without exit code", policy: retry3, status: model.AttemptFailed, u: floatp(0), wantStatus: model.RunQueued},
			{name: "timed out", policy: withDelay(time.Minute, 0), status: model.AttemptTimedOut, u: floatp(0), wantStatus: model.RunScheduled, wantPending: model.PendingRetryBackoff, wantDelay: time.Minute},
			{name: "lost, a disruption", policy: retry3, status: model.AttemptLost, u: floatp(0), wantStatus: model.RunQueued, wantDisrupt: 1},
			{name: "lost, a disruption at once despite a backoff", policy: withDelay(time.Minute, 0), status: model.AttemptLost, u: floatp(0), wantStatus: model.RunQueued, wantDisrupt: 1},
			{name: "lost, a disruption with no attempt left", policy: model.RetryPolicy{MaxAttempts: 1}, status: model.AttemptLost, u: floatp(0), wantStatus: model.RunQueued, wantDisrupt: 1},
			{name: "lost, no disruption allowed", policy: noDisruptions(model.RetryPolicy{MaxAttempts: 1}), status: model.AttemptLost, u: floatp(0), wantStatus: model.RunFailed},
			{name: "lost, no disruption allowed, retried by the policy", policy: noDisruptions(withDelay(time.Minute, 0)), status: model.AttemptLost, u: floatp(0), wantStatus: model.RunScheduled, wantPending: model.PendingRetryBackoff, wantDelay: time.Minute},
			{name: "cancelled", policy: retry3, status: model.AttemptCancelled, u: floatp(0), wantStatus: model.RunCancelled},
			{name: "cancel requested, failed", policy: retry3, cancelReq: true, status: model.AttemptFailed, exit: intp(143), u: floatp(0), wantStatus: model.RunCancelled},
			{name: "cancel requested, timed out", policy: retry3, cancelReq: true, status: model.AttemptTimedOut, u: floatp(0), wantStatus: model.RunCancelled},
			// The work finished before the stop reached it: the truth is that it succeeded.
			{name: "cancel requested, succeeded", policy: retry3, cancelReq: true, status: model.AttemptSucceeded, exit: intp(0), u: floatp(0), wantStatus: model.RunSucceeded},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				f := setup(t, open)
				_, r := f.submit("a", func(j *model.Job) { j.Spec.Retry = c.policy })
				leasedAt := at(time.Second)
				l := f.leaseOne("w", leasedAt)
				require.Equal(t, r.ID, l.Run.ID)
				if c.cancelReq {
					_, err := f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{r.ID}, Reason: "stop", Now: leasedAt})
					require.NoError(t, err)
				}
				var draws *randRecorder
				var rand func() float64
				if c.u != nil {
					draws = &randRecorder{u: *c.u}
					rand = draws.fn
				}
				now := at(time.Minute)
				res, err := f.s.CompleteAttempts(f.ctx, &store.CompleteAttemptsParams{Now: now, Rand: rand,
					Completions: []store.Completion{{RunID: r.ID, Token: l.Token, Status: c.status, ExitCode: c.exit, Error: "why " + c.name}}})
				require.NoError(t, err)
				require.Len(t, res, 1)
				require.NoError(t, res[0].Err)
				got := res[0].Run
				require.Equal(t, c.wantStatus, got.Status)
				require.Equal(t, c.wantPending, got.PendingCode)
				if c.wantPending != model.PendingNone {
					require.Equal(t, scheduler.RetryReason(1, c.status, now.Add(c.wantDelay)), got.PendingReason)
				} else {
					require.Empty(t, got.PendingReason)
				}
				require.Equal(t, "why "+c.name, got.Error)
				require.Equal(t, 1, got.Attempt)
				require.Equal(t, c.wantDisrupt, got.Disruptions)
				require.Empty(t, got.WorkerID)
				require.Empty(t, got.LeaseToken)
				require.Nil(t, got.LeaseExpiresAt)
				require.Equal(t, timep(leasedAt), got.StartedAt)
				if c.wantStatus.Final() {
					require.Equal(t, timep(now), got.FinishedAt)
					require.Equal(t, r.ScheduledFor, got.ScheduledFor)
				} else {
					require.Nil(t, got.FinishedAt)
					if c.wantDelay > 0 {
						require.Equal(t, now.Add(c.wantDelay), got.ScheduledFor)
					} else {
						require.Equal(t, r.ScheduledFor, got.ScheduledFor, "queued again at once: the due time is kept")
					}
					require.False(t, got.CancelRequested)
				}
				if draws != nil {
					if c.status == model.AttemptSucceeded || c.status == model.AttemptCancelled {
						require.Zero(t, draws.draws, "the end of a success or a cancellation draws nothing")
					} else {
						require.Equal(t, 1, draws.draws, "one draw per failing end")
					}
				}

				read := f.getRun(r.ID)
				require.Equal(t, []model.Attempt{{
					RunID: r.ID, N: 1, WorkerID: "w", Status: c.status, ExitCode: c.exit, Error: "why " + c.name,
					StartedAt: leasedAt, FinishedAt: timep(now),
				}}, read.Attempts)
				require.Equal(t, got, store.Ended(withoutAttempts(read)), "the result is the stored run as an end returns it")

				// The lease is spent.
				again := f.complete(store.Completion{RunID: r.ID, Token: l.Token, Status: model.AttemptSucceeded}, now, nil)
				require.ErrorIs(t, again.Err, model.ErrLeaseLost)
				require.Nil(t, again.Run)
			})
		}
	})

	t.Run("Fencing", func(t *testing.T) {
		f := setup(t, open)
		j, r := f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 3 })
		queued := f.createRuns(f.run(j, func(r *model.Run) { r.ScheduledFor = at(time.Hour) }))[0]
		l := f.leaseOne("w", t0)
		require.Equal(t, r.ID, l.Run.ID)
		before := f.getRun(r.ID)

		for _, c := range []store.Completion{
			{RunID: r.ID, Token: "stale", Status: model.AttemptSucceeded, ExitCode: intp(0)},
			{RunID: r.ID, Token: "", Status: model.AttemptFailed},
			{RunID: "missing", Token: l.Token, Status: model.AttemptSucceeded},
			{RunID: queued.ID, Token: l.Token, Status: model.AttemptSucceeded},
		} {
			res := f.complete(c, at(time.Second), nil)
			require.ErrorIs(t, res.Err, model.ErrLeaseLost, "%+v", c)
			require.Nil(t, res.Run)
		}
		require.Equal(t, before, f.getRun(r.ID), "a refused completion writes nothing")
		require.Equal(t, model.RunQueued, f.getRun(queued.ID).Status)

		// A new attempt fences off the old one.
		f.finish(l, model.AttemptFailed, intp(1), at(2*time.Second))
		l2 := f.leaseOne("w", at(3*time.Second))
		require.Equal(t, r.ID, l2.Run.ID)
		res := f.complete(store.Completion{RunID: r.ID, Token: l.Token, Status: model.AttemptSucceeded}, at(4*time.Second), nil)
		require.ErrorIs(t, res.Err, model.ErrLeaseLost)
		require.Equal(t, model.RunRunning, f.getRun(r.ID).Status)
		require.Len(t, f.getRun(r.ID).Attempts, 2)
	})

	t.Run("Batch", func(t *testing.T) {
		f := setup(t, open)
		j, _ := f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 2 })
		f.createRuns(f.run(j), f.run(j))
		ls := f.lease("w", 3, t0)
		require.Len(t, ls, 3)
		now := at(time.Second)
		res, err := f.s.CompleteAttempts(f.ctx, &store.CompleteAttemptsParams{
			Completions: []store.Completion{
				{RunID: ls[0].Run.ID, Token: ls[0].Token, Status: model.AttemptSucceeded, ExitCode: intp(0)},
				{RunID: ls[1].Run.ID, Token: "stale", Status: model.AttemptSucceeded},
				{RunID: ls[2].Run.ID, Token: ls[2].Token, Status: model.AttemptFailed, ExitCode: intp(1), Error: "boom"},
				{RunID: ls[0].Run.ID, Token: ls[0].Token, Status: model.AttemptFailed}, // a repeat in the same batch
			},
			Now:  now,
			Rand: drawZero,
		})
		require.NoError(t, err)
		require.Len(t, res, 4)
		require.NoError(t, res[0].Err)
		require.Equal(t, model.RunSucceeded, res[0].Run.Status)
		require.ErrorIs(t, res[1].Err, model.ErrLeaseLost)
		require.NoError(t, res[2].Err)
		require.Equal(t, model.RunQueued, res[2].Run.Status)
		require.Equal(t, "boom", res[2].Run.Error)
		require.ErrorIs(t, res[3].Err, model.ErrLeaseLost, "the first completion spent the lease")

		require.Equal(t, model.RunSucceeded, f.getRun(ls[0].Run.ID).Status)
		require.Equal(t, model.RunRunning, f.getRun(ls[1].Run.ID).Status)
		require.Equal(t, model.RunQueued, f.getRun(ls[2].Run.ID).Status)

		res, err = f.s.CompleteAttempts(f.ctx, &store.CompleteAttemptsParams{Now: now})
		require.NoError(t, err)
		require.Empty(t, res)
	})

	t.Run("InvalidStatusIsFailure", func(t *testing.T) {
		f := setup(t, open)
		f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 1 })
		l := f.leaseOne("w", t0)
		res := f.complete(store.Completion{RunID: l.Run.ID, Token: l.Token, Status: "exploded", Error: "?"}, at(time.Second), nil)
		require.NoError(t, res.Err)
		require.Equal(t, model.RunFailed, res.Run.Status)
		require.Equal(t, model.AttemptFailed, f.getRun(l.Run.ID).Attempts[0].Status)
	})

	t.Run("ManyAttempts", func(t *testing.T) {
		f := setup(t, open)
		_, r := f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 4 })
		for n := 1; n <= 4; n++ {
			l := f.leaseOne("w", at(time.Duration(n)*time.Minute))
			require.Equal(t, n, l.Run.Attempt)
			got := f.getRun(r.ID)
			require.Len(t, got.Attempts, n)
			require.Equal(t, model.AttemptRunning, got.Attempts[n-1].Status)
			end := f.finish(l, model.AttemptTimedOut, nil, at(time.Duration(n)*time.Minute+time.Second))
			if n < 4 {
				require.Equal(t, model.RunQueued, end.Status)
			} else {
				require.Equal(t, model.RunFailed, end.Status)
			}
		}
		hist := f.getRun(r.ID).Attempts
		require.Len(t, hist, 4)
		for i, a := range hist {
			require.Equal(t, i+1, a.N)
			require.Equal(t, model.AttemptTimedOut, a.Status)
			require.Equal(t, at(time.Duration(i+1)*time.Minute), a.StartedAt)
		}
	})
}

func floatp(f float64) *float64 { return &f }
