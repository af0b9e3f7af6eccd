package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// words is what a run says about itself after a transition: its state, why it waits, and
// why it ended.
type words struct {
	Status model.RunStatus
	Code   model.PendingCode
	Reason string
	Error  string
}

func wordsOf(r *model.Run) words {
	return words{Status: r.Status, Code: r.PendingCode, Reason: r.PendingReason, Error: r.Error}
}

// testWording pins the exact pending code, reason and error of every transition, as
// literal text: both engines must say the same, in the words of the scheduler package.
// Each case drives one transition and returns the run as the store answered it and the
// words it must have; the run read back must have them too. t0 is 2026-01-02T03:04:05Z.
func testWording(t *testing.T, open OpenFunc) {
	failed := func(f *fx, l *model.Lease, now time.Time, rand func() float64) *model.Run {
		f.t.Helper()
		res := f.complete(store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptFailed, ExitCode: intp(1), Error: "exit status 1"}, now, rand)
		require.NoError(f.t, res.Err)
		return res.Run
	}
	half := func() float64 { return 0.5 }
	// rescue ends the one expired lease at now and returns its run.
	rescue := func(f *fx, now time.Time) *model.Run {
		f.t.Helper()
		rescued, err := f.s.RescueExpired(f.ctx, &store.RescueExpiredParams{Now: now, Limit: 10})
		require.NoError(f.t, err)
		require.Len(f.t, rescued, 1)
		return rescued[0]
	}
	retrying := func(p model.RetryPolicy) func(*model.Job) { return func(j *model.Job) { j.Spec.Retry = p } }
	limitedJob := func(f *fx, key string, max int, policy model.ConcurrencyPolicy) (*model.Job, *model.Run) {
		j := f.job("limited")
		f.createJob(j, nil)
		holder := f.createOne(f.limited(j, key, max, policy)).Run
		return j, holder
	}
	// after creates a run of a new job that depends on ups (condition succeeded).
	after := func(f *fx, name string, ups ...*model.Run) *model.Run {
		f.t.Helper()
		j := f.job(name)
		return f.createJob(j, f.run(j, func(r *model.Run) {
			for _, u := range ups {
				r.DependsOn = append(r.DependsOn, model.Dependency{RunID: u.ID, Condition: model.CondSucceeded})
			}
		})).Run
	}

	cases := []struct {
		name  string
		drive func(f *fx) (*model.Run, words)
	}{
		{"new run not due", func(f *fx) (*model.Run, words) {
			j := f.job("later")
			r := f.run(j, func(r *model.Run) { r.ScheduledFor = at(time.Hour) })
			scheduler.Release(r, t0)
			return f.createJob(j, r).Run, words{model.RunScheduled, model.PendingNotDue, "not due until 2026-01-02T04:04:05Z", ""}
		}},
		{"retry with backoff", func(f *fx) (*model.Run, words) {
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 3, InitialDelay: 5 * time.Second}))
			l := f.leaseOne("w", t0)
			return failed(f, l, at(time.Minute), nil), words{model.RunScheduled, model.PendingRetryBackoff,
				"attempt 1 failed; attempt 2 due at 2026-01-02T03:05:10Z", "exit status 1"}
		}},
		{"retry with jitter, due within the second", func(f *fx) (*model.Run, words) {
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Second, Jitter: 0.5}))
			l := f.leaseOne("w", t0)
			return failed(f, l, at(time.Minute), func() float64 { return 0.25 }), words{model.RunScheduled, model.PendingRetryBackoff,
				"attempt 1 failed; attempt 2 due at 2026-01-02T03:05:05.75Z", "exit status 1"}
		}},
		{"retry at once", func(f *fx) (*model.Run, words) {
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 3, Jitter: 1}))
			l := f.leaseOne("w", t0)
			return failed(f, l, at(time.Minute), drawZero), words{model.RunQueued, model.PendingNone, "", "exit status 1"}
		}},
		{"attempts exhausted", func(f *fx) (*model.Run, words) {
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 2, Jitter: 1}))
			failed(f, f.leaseOne("w", t0), at(time.Second), drawZero)
			r := failed(f, f.leaseOne("w", at(2*time.Second)), at(3*time.Second), drawZero)
			require.Equal(f.t, 2, r.Attempt)
			return r, words{model.RunFailed, model.PendingNone, "", "exit status 1"}
		}},
		{"final exit code", func(f *fx) (*model.Run, words) {
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 3, FinalExitCodes: []int{1}}))
			return failed(f, f.leaseOne("w", t0), at(time.Second), half), words{model.RunFailed, model.PendingNone, "", "exit status 1"}
		}},
		{"timed out", func(f *fx) (*model.Run, words) {
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 3, InitialDelay: 5 * time.Second}))
			l := f.leaseOne("w", t0)
			res := f.complete(store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptTimedOut, Error: "timed out after 30s"}, at(time.Minute), half)
			require.NoError(f.t, res.Err)
			return res.Run, words{model.RunScheduled, model.PendingRetryBackoff,
				"attempt 1 timed out; attempt 2 due at 2026-01-02T03:05:10Z", "timed out after 30s"}
		}},
		{"cancelled while queued", func(f *fx) (*model.Run, words) {
			_, r := f.submit("a")
			changed, err := f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{r.ID}, Reason: "cancelled by request", Now: at(time.Second)})
			require.NoError(f.t, err)
			require.Len(f.t, changed, 1)
			return changed[0], words{model.RunCancelled, model.PendingNone, "", "cancelled by request"}
		}},
		{"cancelled while running", func(f *fx) (*model.Run, words) {
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 3}))
			l := f.leaseOne("w", t0)
			_, err := f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{l.Run.ID}, Reason: "cancelled by request", Now: at(time.Second)})
			require.NoError(f.t, err)
			// The worker stops it; what it says of the attempt is the run's error.
			res := f.complete(store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptFailed, ExitCode: intp(143), Error: "terminated"}, at(2*time.Second), half)
			require.NoError(f.t, res.Err)
			return res.Run, words{model.RunCancelled, model.PendingNone, "", "terminated"}
		}},
		{"lost by lease expiry, a disruption", func(f *fx) (*model.Run, words) {
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 3, InitialDelay: 5 * time.Second}))
			f.leaseOne("w", t0) // expires at t0+30s
			r := rescue(f, at(time.Minute))
			require.Equal(f.t, 1, r.Disruptions)
			return r, words{model.RunQueued, model.PendingNone, "", "lease expired"}
		}},
		{"lost by lease expiry, disruptions spent", func(f *fx) (*model.Run, words) {
			f.submit("a")
			for i := range scheduler.DefaultMaxDisruptions {
				f.leaseOne("w", at(time.Duration(i)*time.Minute))
				require.Equal(f.t, i+1, rescue(f, at(time.Duration(i)*time.Minute+time.Minute)).Disruptions)
			}
			f.leaseOne("w", at(time.Hour))
			r := rescue(f, at(2*time.Hour))
			require.Equal(f.t, scheduler.DefaultMaxDisruptions+1, r.Attempt)
			require.Equal(f.t, scheduler.DefaultMaxDisruptions, r.Disruptions)
			return r, words{model.RunFailed, model.PendingNone, "", "lease expired"}
		}},
		{"lost by lease expiry, no disruption allowed", func(f *fx) (*model.Run, words) {
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 3, InitialDelay: 5 * time.Second, MaxDisruptions: intp(0)}))
			f.leaseOne("w", t0)
			return rescue(f, at(time.Minute)), words{model.RunScheduled, model.PendingRetryBackoff,
				"attempt 1 lost; attempt 2 due at 2026-01-02T03:05:10Z", "lease expired"}
		}},
		{"lost by lease expiry, no disruption allowed, no attempt left", func(f *fx) (*model.Run, words) {
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 1, MaxDisruptions: intp(0)}))
			f.leaseOne("w", t0)
			return rescue(f, at(time.Minute)), words{model.RunFailed, model.PendingNone, "", "lease expired"}
		}},
		{"lost by worker re-register, a disruption", func(f *fx) (*model.Run, words) {
			f.register("w", "s1", t0)
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 3, InitialDelay: 5 * time.Second}))
			f.leaseOne("w", t0)
			_, lost, err := f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{ID: "w", Session: "s2", Capacity: model.Capacity{Slots: 4}, Now: at(time.Minute), Takeover: true})
			require.NoError(f.t, err)
			require.Len(f.t, lost, 1)
			require.Equal(f.t, 1, lost[0].Disruptions)
			return lost[0], words{model.RunQueued, model.PendingNone, "", "worker restarted (new session)"}
		}},
		{"lost by worker re-register, no disruption allowed", func(f *fx) (*model.Run, words) {
			f.register("w", "s1", t0)
			f.submit("a", retrying(model.RetryPolicy{MaxAttempts: 3, InitialDelay: 5 * time.Second, MaxDisruptions: intp(0)}))
			f.leaseOne("w", t0)
			_, lost, err := f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{ID: "w", Session: "s2", Capacity: model.Capacity{Slots: 4}, Now: at(time.Minute), Takeover: true})
			require.NoError(f.t, err)
			require.Len(f.t, lost, 1)
			return lost[0], words{model.RunScheduled, model.PendingRetryBackoff,
				"attempt 1 lost; attempt 2 due at 2026-01-02T03:05:10Z", "worker restarted (new session)"}
		}},
		{"job deleted", func(f *fx) (*model.Run, words) {
			j, _ := f.submit("a")
			changed, err := f.s.DeleteJob(f.ctx, &store.DeleteJobParams{ID: j.ID, Now: at(time.Second)})
			require.NoError(f.t, err)
			require.Len(f.t, changed, 1)
			return changed[0], words{model.RunCancelled, model.PendingNone, "", "job deleted"}
		}},
		{"concurrency hold", func(f *fx) (*model.Run, words) {
			j, _ := limitedJob(f, "job:k", 1, model.ConcurrencyQueue)
			return f.createOne(f.limited(j, "job:k", 1, model.ConcurrencyQueue)).Run,
				words{model.RunWaiting, model.PendingConcurrencyLimit, `concurrency limit: 1 of 1 runs of "job:k" active`, ""}
		}},
		{"forbid skip", func(f *fx) (*model.Run, words) {
			j, _ := limitedJob(f, "job:k", 1, model.ConcurrencyForbid)
			return f.createOne(f.limited(j, "job:k", 1, model.ConcurrencyForbid)).Run,
				words{model.RunSkipped, model.PendingNone, "", `skipped: concurrency policy forbid, 1 of 1 runs of "job:k" active`}
		}},
		{"replace cancels the holder", func(f *fx) (*model.Run, words) {
			j, _ := limitedJob(f, "job:k", 1, model.ConcurrencyReplace)
			res := f.createOne(f.limited(j, "job:k", 1, model.ConcurrencyReplace))
			require.Len(f.t, res.Replaced, 1)
			return res.Replaced[0], words{model.RunCancelled, model.PendingNone, "",
				"cancelled: replaced by run " + res.Run.ID + " (concurrency policy replace)"}
		}},
		{"rate-limit hold", func(f *fx) (*model.Run, words) {
			j := f.job("rated")
			f.createJob(j, nil)
			rated := func(r *model.Run) { r.Concurrency.Rate = &model.RateLimit{Rate: 1, Per: time.Minute} }
			f.createOne(f.limited(j, "job:k", 0, model.ConcurrencyAllow, rated))
			return f.createOne(f.limited(j, "job:k", 0, model.ConcurrencyAllow, rated)).Run,
				words{model.RunWaiting, model.PendingRateLimited, `rate limit: 1 per 1m0s on "job:k"; starts at 2026-01-02T03:05:05Z`, ""}
		}},
		{"released by the end of the holder, not due yet", func(f *fx) (*model.Run, words) {
			j, holder := limitedJob(f, "job:k", 1, model.ConcurrencyQueue)
			held := f.createOne(f.limited(j, "job:k", 1, model.ConcurrencyQueue, func(r *model.Run) { r.ScheduledFor = at(time.Hour) })).Run
			require.Equal(f.t, model.RunWaiting, held.Status)
			l := f.leaseOne("w", t0)
			require.Equal(f.t, holder.ID, l.Run.ID)
			res := f.complete(store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded}, at(time.Second), nil)
			require.NoError(f.t, res.Err)
			require.Len(f.t, res.Admitted, 1)
			return res.Admitted[0], words{model.RunScheduled, model.PendingNotDue, "not due until 2026-01-02T04:04:05Z", ""}
		}},
		{"released by the end of the holder", func(f *fx) (*model.Run, words) {
			j, _ := limitedJob(f, "job:k", 1, model.ConcurrencyQueue)
			held := f.createOne(f.limited(j, "job:k", 1, model.ConcurrencyQueue)).Run
			l := f.leaseOne("w", t0)
			res := f.complete(store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded}, at(time.Second), nil)
			require.NoError(f.t, res.Err)
			require.Len(f.t, res.Admitted, 1)
			require.Equal(f.t, held.ID, res.Admitted[0].ID)
			return res.Admitted[0], words{model.RunQueued, model.PendingNone, "", ""}
		}},
		{"waiting for one upstream run", func(f *fx) (*model.Run, words) {
			_, up := f.submit("up")
			return after(f, "down", up), words{model.RunWaiting, model.PendingDependencies, "waiting for 1 upstream run", ""}
		}},
		{"waiting for several upstream runs", func(f *fx) (*model.Run, words) {
			_, a := f.submit("a")
			_, b := f.submit("b")
			_, c := f.submit("c")
			return after(f, "down", a, b, c), words{model.RunWaiting, model.PendingDependencies, "waiting for 3 upstream runs", ""}
		}},
		{"waiting for fewer as upstream runs end", func(f *fx) (*model.Run, words) {
			_, a := f.submit("a")
			_, b := f.submit("b")
			_, c := f.submit("c")
			down := after(f, "down", a, b, c)
			f.finish(f.leaseOne("w", t0), model.AttemptSucceeded, intp(0), at(time.Second))
			return f.getRun(down.ID), words{model.RunWaiting, model.PendingDependencies, "waiting for 2 upstream runs", ""}
		}},
		{"released when the last upstream run succeeds", func(f *fx) (*model.Run, words) {
			_, up := f.submit("up")
			down := after(f, "down", up)
			res := f.complete(store.Completion{RunID: up.ID, Token: f.leaseOne("w", t0).Token, Status: model.AttemptSucceeded}, at(time.Second), nil)
			require.NoError(f.t, res.Err)
			require.Len(f.t, res.Admitted, 1)
			require.Equal(f.t, down.ID, res.Admitted[0].ID)
			return res.Admitted[0], words{model.RunQueued, model.PendingNone, "", ""}
		}},
		{"skipped by a broken dependency", func(f *fx) (*model.Run, words) {
			_, up := f.submit("up")
			down := after(f, "down", up)
			f.finish(f.leaseOne("w", t0), model.AttemptFailed, intp(1), at(time.Second))
			return f.getRun(down.ID), words{model.RunSkipped, model.PendingNone, "",
				"skipped: upstream run " + up.ID + " ended failed, needed succeeded"}
		}},
		{"skipped in cascade", func(f *fx) (*model.Run, words) {
			_, up := f.submit("up")
			mid := after(f, "mid", up)
			down := after(f, "down", mid)
			f.finish(f.leaseOne("w", t0), model.AttemptFailed, intp(1), at(time.Second))
			return f.getRun(down.ID), words{model.RunSkipped, model.PendingNone, "",
				"skipped: upstream run " + mid.ID + " ended skipped, needed succeeded"}
		}},
		{"skipped at creation", func(f *fx) (*model.Run, words) {
			_, up := f.submit("up")
			f.finish(f.leaseOne("w", t0), model.AttemptFailed, intp(1), at(time.Second))
			return after(f, "down", up), words{model.RunSkipped, model.PendingNone, "",
				"skipped: upstream run " + up.ID + " ended failed, needed succeeded"}
		}},
		{"reopened behind an upstream run", func(f *fx) (*model.Run, words) {
			_, up := f.submit("up")
			down := after(f, "down", up)
			f.finish(f.leaseOne("w", t0), model.AttemptFailed, intp(1), at(time.Second))
			reopened, err := f.s.ReopenRuns(f.ctx, &store.ReopenRunsParams{RunIDs: []string{up.ID, down.ID}, Now: at(2 * time.Second)})
			require.NoError(f.t, err)
			require.Len(f.t, reopened, 2)
			require.Equal(f.t, words{model.RunQueued, model.PendingNone, "", ""}, wordsOf(reopened[0]))
			return reopened[1], words{model.RunWaiting, model.PendingDependencies, "waiting for 1 upstream run", ""}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := setup(t, open)
			got, want := c.drive(f)
			require.Equal(f.t, want, wordsOf(got), "as the store answered")
			require.Equal(f.t, want, wordsOf(f.getRun(got.ID)), "as read back")
		})
	}
}
