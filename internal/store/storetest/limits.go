package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// limited builds a run of j under a concurrency limit on key.
func (f *fx) limited(j *model.Job, key string, max int, policy model.ConcurrencyPolicy, mods ...func(*model.Run)) *model.Run {
	return f.run(j, append([]func(*model.Run){func(r *model.Run) {
		r.Concurrency = &model.RunConcurrency{Key: key, Max: max, Policy: policy}
	}}, mods...)...)
}

// createOne creates one run and returns its result (Err required nil).
func (f *fx) createOne(r *model.Run) store.CreateRunResult {
	f.t.Helper()
	res, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{r}, Now: t0})
	require.NoError(f.t, err)
	require.Len(f.t, res, 1)
	require.NoError(f.t, res[0].Err)
	return res[0]
}

func testLimits(t *testing.T, open OpenFunc) {
	t.Run("QueueHoldsUntilTheSlotFrees", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("q")
		f.createJob(j, nil)
		a := f.createOne(f.limited(j, "job:q", 1, model.ConcurrencyQueue)).Run
		b := f.createOne(f.limited(j, "job:q", 1, model.ConcurrencyQueue)).Run
		require.Equal(t, model.RunQueued, a.Status)
		require.Equal(t, model.RunWaiting, b.Status)
		require.Equal(t, model.PendingConcurrencyLimit, b.PendingCode)
		require.Contains(t, b.PendingReason, "1 of 1")
		require.Equal(t, model.RunWaiting, f.getRun(b.ID).Status, "stored as held")

		l := f.leaseOne("w", at(time.Second))
		require.Equal(t, a.ID, l.Run.ID, "a held run is not leased")
		require.Empty(t, f.lease("w", 5, at(time.Second)))

		res := f.complete(store.Completion{RunID: a.ID, Token: l.Token, Status: model.AttemptSucceeded}, at(2*time.Second), nil)
		require.NoError(t, res.Err)
		require.Len(t, res.Admitted, 1, "the end of a frees its slot for b in the same transaction")
		require.Equal(t, b.ID, res.Admitted[0].ID)
		require.Equal(t, model.RunQueued, res.Admitted[0].Status)
		require.Empty(t, f.getRun(b.ID).PendingCode)
		require.Equal(t, b.ID, f.leaseOne("w", at(3*time.Second)).Run.ID)
	})

	t.Run("AllowRunsSideBySideUpToMax", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("allow")
		f.createJob(j, nil)
		var runs []*model.Run
		for range 4 {
			runs = append(runs, f.createOne(f.limited(j, "job:allow", 2, model.ConcurrencyAllow)).Run)
		}
		require.Equal(t, []model.RunStatus{model.RunQueued, model.RunQueued, model.RunWaiting, model.RunWaiting},
			[]model.RunStatus{runs[0].Status, runs[1].Status, runs[2].Status, runs[3].Status})
		// Cancelling a holder admits the oldest held run; cancelling a held one admits none.
		changed, err := f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{runs[3].ID}, Reason: "no", Now: at(time.Second)})
		require.NoError(t, err)
		require.Len(t, changed, 1)
		changed, err = f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{runs[0].ID}, Reason: "no", Now: at(time.Second)})
		require.NoError(t, err)
		require.Len(t, changed, 2)
		require.Equal(t, model.RunCancelled, changed[0].Status)
		require.Equal(t, runs[2].ID, changed[1].ID)
		require.Equal(t, model.RunQueued, changed[1].Status)
		require.Equal(t, model.RunCancelled, f.getRun(runs[3].ID).Status)
	})

	t.Run("ForbidSkips", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("forbid")
		f.createJob(j, nil)
		a := f.createOne(f.limited(j, "job:forbid", 1, model.ConcurrencyForbid)).Run
		b := f.createOne(f.limited(j, "job:forbid", 1, model.ConcurrencyForbid)).Run
		require.Equal(t, model.RunQueued, a.Status)
		require.Equal(t, model.RunSkipped, b.Status)
		require.Contains(t, b.Error, "forbid")
		require.NotNil(t, f.getRun(b.ID).FinishedAt)
		l := f.leaseOne("w", at(time.Second))
		f.finish(l, model.AttemptSucceeded, nil, at(2*time.Second))
		c := f.createOne(f.limited(j, "job:forbid", 1, model.ConcurrencyForbid)).Run
		require.Equal(t, model.RunQueued, c.Status, "the skipped run took no slot; a's end freed its own")
	})

	t.Run("ReplaceCancelsTheOldest", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("replace")
		f.createJob(j, nil)
		a := f.createOne(f.limited(j, "job:r", 1, model.ConcurrencyReplace)).Run
		res := f.createOne(f.limited(j, "job:r", 1, model.ConcurrencyReplace))
		require.Equal(t, model.RunQueued, res.Run.Status, "a was not running: cancelled at once, b admitted")
		require.Len(t, res.Replaced, 1)
		require.Equal(t, a.ID, res.Replaced[0].ID)
		require.Equal(t, model.RunCancelled, f.getRun(a.ID).Status)
		require.Contains(t, f.getRun(a.ID).Error, res.Run.ID)

		b := res.Run
		l := f.leaseOne("w", at(time.Second))
		require.Equal(t, b.ID, l.Run.ID)
		res = f.createOne(f.limited(j, "job:r", 1, model.ConcurrencyReplace))
		require.Equal(t, model.RunWaiting, res.Run.Status, "b is running: it is asked to stop and c waits for it")
		require.True(t, res.Replaced[0].CancelRequested)
		done := f.complete(store.Completion{RunID: b.ID, Token: l.Token, Status: model.AttemptCancelled}, at(2*time.Second), nil)
		require.NoError(t, done.Err)
		require.Equal(t, model.RunCancelled, done.Run.Status)
		require.Len(t, done.Admitted, 1)
		require.Equal(t, res.Run.ID, done.Admitted[0].ID)
	})

	t.Run("KeyIsSharedAcrossJobs", func(t *testing.T) {
		f := setup(t, open)
		j1, j2 := f.job("one"), f.job("two")
		f.createJob(j1, nil)
		f.createJob(j2, nil)
		a := f.createOne(f.limited(j1, "customer-7", 1, model.ConcurrencyQueue)).Run
		b := f.createOne(f.limited(j2, "customer-7", 1, model.ConcurrencyQueue)).Run
		c := f.createOne(f.limited(j2, "customer-8", 1, model.ConcurrencyQueue)).Run
		require.Equal(t, model.RunQueued, a.Status)
		require.Equal(t, model.RunWaiting, b.Status)
		require.Equal(t, model.RunQueued, c.Status, "another key has its own slots")
	})

	t.Run("FirstRunOfNewJob", func(t *testing.T) {
		f := setup(t, open)
		j1, j2 := f.job("one"), f.job("two")
		res := f.createJob(j1, f.limited(j1, "shared", 1, model.ConcurrencyQueue))
		require.Equal(t, model.RunQueued, res.Run.Status)
		res = f.createJob(j2, f.limited(j2, "shared", 1, model.ConcurrencyQueue))
		require.Equal(t, model.RunWaiting, res.Run.Status)
	})

	t.Run("LostAndRetriedRunsKeepTheRules", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("lost", func(j *model.Job) { j.Spec.Retry.MaxDisruptions = intp(0) })
		f.createJob(j, nil)
		f.register("w", "s1", t0)
		a := f.createOne(f.limited(j, "job:lost", 1, model.ConcurrencyQueue)).Run
		b := f.createOne(f.limited(j, "job:lost", 1, model.ConcurrencyQueue)).Run
		f.leaseOne("w", at(time.Second))
		// The worker comes back with a new session: a's attempt is lost and a fails (one
		// attempt, no disruption allowed), which admits b.
		_, changed := f.register("w", "s2", at(2*time.Second))
		require.Len(t, changed, 2)
		require.Equal(t, a.ID, changed[0].ID)
		require.Equal(t, model.RunFailed, changed[0].Status)
		require.Equal(t, b.ID, changed[1].ID)
		require.Equal(t, model.RunQueued, changed[1].Status)

		// A manual retry of a waits: b holds the slot.
		r, err := f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: a.ID, Now: at(3 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, model.RunWaiting, r.Status)
		require.Equal(t, model.PendingConcurrencyLimit, r.PendingCode)
		l := f.leaseOne("w", at(4*time.Second))
		require.Equal(t, b.ID, l.Run.ID)
		done := f.finish(l, model.AttemptSucceeded, nil, at(5*time.Second))
		require.Equal(t, model.RunSucceeded, done.Status)
		require.Equal(t, model.RunQueued, f.getRun(a.ID).Status, "the retried run got the slot")

		admitted, err := f.s.AdmitHeld(f.ctx, &store.AdmitHeldParams{Now: at(6 * time.Second)})
		require.NoError(t, err)
		require.Empty(t, admitted, "nothing was left to repair")
	})

	t.Run("RateLimitSpacesAdmissions", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("rated")
		f.createJob(j, nil)
		rated := func() *model.Run {
			return f.limited(j, "key:default:api", 0, model.ConcurrencyAllow, func(r *model.Run) {
				r.Concurrency.Rate = &model.RateLimit{Rate: 2, Per: time.Minute}
			})
		}
		var runs []*model.Run
		for range 4 {
			runs = append(runs, f.createOne(rated()).Run)
		}
		require.Equal(t, model.RunQueued, runs[0].Status)
		require.Equal(t, model.RunQueued, runs[1].Status, "a burst of Rate")
		require.Equal(t, model.RunWaiting, runs[2].Status)
		require.Equal(t, model.PendingRateLimited, runs[2].PendingCode)
		require.Contains(t, runs[2].PendingReason, at(30*time.Second).Format(time.RFC3339))

		next, ok, err := f.s.NextRelease(f.ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, at(30*time.Second), next, "then one every Per/Rate")

		got, err := f.s.ReleaseDue(f.ctx, &store.ReleaseDueParams{Now: at(29 * time.Second)})
		require.NoError(t, err)
		require.Empty(t, got, "not before its turn")
		got, err = f.s.ReleaseDue(f.ctx, &store.ReleaseDueParams{Now: at(30 * time.Second)})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, runs[2].ID, got[0].ID)
		require.Equal(t, model.RunQueued, f.getRun(runs[2].ID).Status)
		next, _, err = f.s.NextRelease(f.ctx)
		require.NoError(t, err)
		require.Equal(t, at(time.Minute), next)
	})

	t.Run("RateLimitAndMaxTogether", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("both")
		f.createJob(j, nil)
		both := func() *model.Run {
			return f.limited(j, "job:both", 1, model.ConcurrencyQueue, func(r *model.Run) {
				r.Concurrency.Rate = &model.RateLimit{Rate: 1, Per: time.Minute}
			})
		}
		a := f.createOne(both()).Run
		b := f.createOne(both()).Run
		require.Equal(t, model.RunQueued, a.Status)
		require.Equal(t, model.PendingConcurrencyLimit, b.PendingCode, "no slot: it waits for one first")

		l := f.leaseOne("w", at(time.Second))
		res := f.complete(store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded}, at(10*time.Second), nil)
		require.NoError(t, res.Err)
		require.Empty(t, res.Admitted, "a slot is free, but the rate allows the next start only at one minute")
		held := f.getRun(b.ID)
		require.Equal(t, model.PendingRateLimited, held.PendingCode)

		got, err := f.s.ReleaseDue(f.ctx, &store.ReleaseDueParams{Now: at(time.Minute)})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, model.RunQueued, f.getRun(b.ID).Status)
	})
}
