package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// testDeps checks runs that wait for other runs: released the moment their conditions hold,
// skipped (with the reason) the moment one can no longer hold, skips cascading, resolution
// in the transaction of the upstream's end, and graphs created all or nothing.
func testDeps(t *testing.T, open OpenFunc) {
	dep := func(r *model.Run, c model.Condition) model.Dependency {
		return model.Dependency{RunID: r.ID, Condition: c}
	}
	// after creates a run of a new job that depends on deps.
	after := func(f *fx, name string, deps ...model.Dependency) *model.Run {
		f.t.Helper()
		j := f.job(name)
		res := f.createJob(j, f.run(j, func(r *model.Run) { r.DependsOn = deps }))
		return res.Run
	}

	t.Run("WaitsThenReleased", func(t *testing.T) {
		f := setup(t, open)
		_, up := f.submit("extract")
		down := after(f, "load", dep(up, model.CondSucceeded))
		require.Equal(t, model.RunWaiting, down.Status)
		require.Equal(t, model.PendingDependencies, down.PendingCode)
		require.Equal(t, "waiting for 1 upstream run", down.PendingReason)
		got := f.getRun(down.ID)
		require.Equal(t, []model.Dependency{dep(up, model.CondSucceeded)}, got.DependsOn)
		page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{Status: model.RunWaiting})
		require.NoError(t, err)
		require.Len(t, page.Runs, 1)
		require.Equal(t, []model.Dependency{dep(up, model.CondSucceeded)}, page.Runs[0].DependsOn, "lists show dependencies too")
		require.True(t, f.getRun(up.ID).HasDependants)

		// Not leasable while waiting.
		l := f.leaseOne("w", at(time.Second))
		require.Equal(t, up.ID, l.Run.ID)
		require.Empty(t, f.lease("w", 10, at(time.Second)))

		res := f.complete(store.Completion{RunID: up.ID, Token: l.Token, Status: model.AttemptSucceeded, ExitCode: intp(0)}, at(2*time.Second), nil)
		require.NoError(t, res.Err)
		require.Len(t, res.Admitted, 1, "the released dependant is reported with the end")
		require.Equal(t, down.ID, res.Admitted[0].ID)
		require.Equal(t, model.RunQueued, res.Admitted[0].Status)
		got = f.getRun(down.ID)
		require.Equal(t, model.RunQueued, got.Status)
		require.Equal(t, model.PendingNone, got.PendingCode)
		require.Empty(t, got.PendingReason)
		require.Equal(t, down.ID, f.leaseOne("w", at(3*time.Second)).Run.ID)
	})

	t.Run("BrokenSkipsAndCascades", func(t *testing.T) {
		f := setup(t, open)
		_, up := f.submit("extract") // one attempt: a failure is final
		d := after(f, "transform", dep(up, model.CondSucceeded))
		e := after(f, "load", dep(d, model.CondSucceeded))
		cleanup := after(f, "cleanup", dep(d, model.CondFinished))
		onFail := after(f, "alert", dep(up, model.CondFailed))
		l := f.leaseOne("w", t0)
		res := f.complete(store.Completion{RunID: up.ID, Token: l.Token, Status: model.AttemptFailed, ExitCode: intp(1)}, at(time.Second), nil)
		require.NoError(t, res.Err)
		require.Equal(t, model.RunFailed, res.Run.Status)

		gotD := f.getRun(d.ID)
		require.Equal(t, model.RunSkipped, gotD.Status)
		require.Equal(t, scheduler.BrokenReason(up.ID, model.RunFailed, model.CondSucceeded), gotD.Error)
		require.Equal(t, timep(at(time.Second)), gotD.FinishedAt)
		require.Empty(t, gotD.PendingCode)
		gotE := f.getRun(e.ID)
		require.Equal(t, model.RunSkipped, gotE.Status, "skips cascade")
		require.Equal(t, scheduler.BrokenReason(d.ID, model.RunSkipped, model.CondSucceeded), gotE.Error)
		require.Equal(t, model.RunQueued, f.getRun(cleanup.ID).Status, "finished holds for a skipped run")
		require.Equal(t, model.RunQueued, f.getRun(onFail.ID).Status, "failed holds for a failed run")

		var ids []string
		for _, r := range res.Admitted {
			ids = append(ids, r.ID)
		}
		require.ElementsMatch(t, []string{d.ID, e.ID, cleanup.ID, onFail.ID}, ids)
	})

	t.Run("FanInWaitsForAll", func(t *testing.T) {
		f := setup(t, open)
		var deps []model.Dependency
		for i := range 3 {
			_, u := f.submit(fmt.Sprintf("part-%d", i))
			deps = append(deps, dep(u, model.CondSucceeded))
		}
		join := after(f, "join", deps...)
		require.Equal(t, model.RunWaiting, join.Status)
		ls := f.lease("w", 3, t0)
		require.Len(t, ls, 3)
		f.finish(ls[0], model.AttemptSucceeded, intp(0), at(time.Second))
		got := f.getRun(join.ID)
		require.Equal(t, model.RunWaiting, got.Status)
		require.Equal(t, "waiting for 2 upstream runs", got.PendingReason)
		// The last two end in one batch: released once.
		res, err := f.s.CompleteAttempts(f.ctx, &store.CompleteAttemptsParams{Now: at(2 * time.Second), Completions: []store.Completion{
			{RunID: ls[1].Run.ID, Token: ls[1].Token, Status: model.AttemptSucceeded, ExitCode: intp(0)},
			{RunID: ls[2].Run.ID, Token: ls[2].Token, Status: model.AttemptSucceeded, ExitCode: intp(0)},
		}})
		require.NoError(t, err)
		released := 0
		for _, r := range res {
			require.NoError(t, r.Err)
			released += len(r.Admitted)
		}
		require.Equal(t, 1, released)
		require.Equal(t, model.RunQueued, f.getRun(join.ID).Status)
	})

	t.Run("CancelledUpstreamSkips", func(t *testing.T) {
		f := setup(t, open)
		_, up := f.submit("extract")
		down := after(f, "load", dep(up, model.CondSucceeded))
		changed, err := f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{up.ID}, Reason: "by hand", Now: at(time.Second)})
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(changed, func(r *model.Run) bool { return r.ID == down.ID && r.Status == model.RunSkipped }),
			"the skipped dependant is reported with the cancel")
		require.Equal(t, scheduler.BrokenReason(up.ID, model.RunCancelled, model.CondSucceeded), f.getRun(down.ID).Error)
	})

	t.Run("LostUpstreamSkips", func(t *testing.T) {
		f := setup(t, open)
		_, up := f.submit("extract", func(j *model.Job) { j.Spec.Retry.MaxDisruptions = intp(0) })
		down := after(f, "load", dep(up, model.CondSucceeded))
		f.leaseOne("w", t0) // 30 s lease, never renewed
		rescued, err := f.s.RescueExpired(f.ctx, &store.RescueExpiredParams{Now: at(time.Minute)})
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(rescued, func(r *model.Run) bool { return r.ID == down.ID }))
		require.Equal(t, model.RunSkipped, f.getRun(down.ID).Status)
	})

	t.Run("UpstreamAlreadyEnded", func(t *testing.T) {
		f := setup(t, open)
		_, ok := f.submit("ok")
		_, bad := f.submit("bad")
		ls := f.lease("w", 2, t0)
		for _, l := range ls {
			status := model.AttemptSucceeded
			if l.Run.ID == bad.ID {
				status = model.AttemptFailed
			}
			f.complete(store.Completion{RunID: l.Run.ID, Token: l.Token, Status: status, ExitCode: intp(0)}, at(time.Second), nil)
		}
		require.Equal(t, model.RunQueued, after(f, "ready", dep(ok, model.CondSucceeded)).Status)
		skipped := after(f, "never", dep(ok, model.CondSucceeded), dep(bad, model.CondSucceeded))
		require.Equal(t, model.RunSkipped, skipped.Status)
		require.Equal(t, scheduler.BrokenReason(bad.ID, model.RunFailed, model.CondSucceeded), skipped.Error)
		delayed := f.job("later")
		r := f.createJob(delayed, f.run(delayed, func(r *model.Run) {
			r.DependsOn = []model.Dependency{dep(ok, model.CondFinished)}
			r.Status, r.ScheduledFor, r.PendingCode, r.PendingReason = model.RunScheduled, at(time.Hour), model.PendingNotDue, "not due"
		})).Run
		require.Equal(t, model.RunScheduled, r.Status, "met at creation: as the caller made it")
	})

	t.Run("ReleasedWhenNotDueIsScheduled", func(t *testing.T) {
		f := setup(t, open)
		_, up := f.submit("extract")
		j := f.job("load")
		down := f.createJob(j, f.run(j, func(r *model.Run) {
			r.DependsOn = []model.Dependency{dep(up, model.CondSucceeded)}
			r.ScheduledFor = at(time.Hour)
		})).Run
		require.Equal(t, model.RunWaiting, down.Status)
		f.finish(f.leaseOne("w", t0), model.AttemptSucceeded, intp(0), at(time.Second))
		got := f.getRun(down.ID)
		require.Equal(t, model.RunScheduled, got.Status)
		require.Equal(t, model.PendingNotDue, got.PendingCode)
	})

	t.Run("MissingUpstream", func(t *testing.T) {
		f := setup(t, open)
		j, _ := f.submit("load")
		res, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Now: t0, Runs: []*model.Run{
			f.run(j, func(r *model.Run) { r.DependsOn = []model.Dependency{{RunID: "nope", Condition: model.CondSucceeded}} }),
		}})
		require.NoError(t, err)
		require.ErrorIs(t, res[0].Err, model.ErrNotFound)
		require.ErrorContains(t, res[0].Err, "nope")
	})

	t.Run("GraphAllOrNothing", func(t *testing.T) {
		f := setup(t, open)
		a, b, c := f.job("a"), f.job("b"), f.job("c")
		ra := f.run(a)
		rb := f.run(b, func(r *model.Run) { r.DependsOn = []model.Dependency{dep(ra, model.CondSucceeded)} })
		rc := f.run(c, func(r *model.Run) {
			r.DependsOn = []model.Dependency{dep(ra, model.CondSucceeded), dep(rb, model.CondFinished)}
		})
		g, err := f.s.CreateGraph(f.ctx, &store.CreateGraphParams{Now: t0, Jobs: []store.NewJob{{Job: a, Run: ra}, {Job: b, Run: rb}, {Job: c, Run: rc}}})
		require.NoError(t, err)
		require.Len(t, g.Jobs, 3)
		require.Equal(t, []model.RunStatus{model.RunQueued, model.RunWaiting, model.RunWaiting},
			[]model.RunStatus{g.Runs[0].Status, g.Runs[1].Status, g.Runs[2].Status})
		// A second graph whose last entry fails (its upstream does not exist) leaves nothing.
		before := f.countJobs()
		d, e := f.job("d"), f.job("e")
		rd := f.run(d)
		re := f.run(e, func(r *model.Run) {
			r.DependsOn = []model.Dependency{{RunID: "missing", Condition: model.CondSucceeded}}
		})
		_, err = f.s.CreateGraph(f.ctx, &store.CreateGraphParams{Now: t0, Jobs: []store.NewJob{{Job: d, Run: rd}, {Job: e, Run: re}}})
		require.ErrorIs(t, err, model.ErrNotFound)
		require.Equal(t, before, f.countJobs())
		_, err = f.s.GetRun(f.ctx, &store.GetRunParams{ID: rd.ID})
		require.ErrorIs(t, err, model.ErrNotFound)
		// A name taken fails the whole as a conflict.
		dup, x := f.job("a"), f.job("x")
		_, err = f.s.CreateGraph(f.ctx, &store.CreateGraphParams{Now: t0, Jobs: []store.NewJob{{Job: x, Run: f.run(x)}, {Job: dup, Run: f.run(dup)}}})
		require.ErrorIs(t, err, model.ErrConflict)
		require.Equal(t, before, f.countJobs())
		// Runs of existing jobs, chained.
		r1 := f.run(a)
		r2 := f.run(b, func(r *model.Run) { r.DependsOn = []model.Dependency{dep(r1, model.CondSucceeded)} })
		g, err = f.s.CreateGraph(f.ctx, &store.CreateGraphParams{Now: t0, Runs: []*model.Run{r1, r2}})
		require.NoError(t, err)
		require.Equal(t, model.RunWaiting, g.Runs[1].Status)
	})

	t.Run("ReopenFromFailedStep", func(t *testing.T) {
		f := setup(t, open)
		_, a := f.submit("extract")
		b := after(f, "transform", dep(a, model.CondSucceeded))
		c := after(f, "load", dep(b, model.CondSucceeded))
		l := f.leaseOne("w", t0)
		f.complete(store.Completion{RunID: a.ID, Token: l.Token, Status: model.AttemptFailed, ExitCode: intp(1)}, at(time.Second), nil)
		require.Equal(t, model.RunSkipped, f.getRun(c.ID).Status)

		// A run that is not final refuses, and nothing changes.
		_, other := f.submit("other")
		_, err := f.s.ReopenRuns(f.ctx, &store.ReopenRunsParams{RunIDs: []string{a.ID, other.ID}, Now: at(2 * time.Second)})
		require.ErrorIs(t, err, model.ErrInvalidState)
		require.Equal(t, model.RunFailed, f.getRun(a.ID).Status)
		_, err = f.s.ReopenRuns(f.ctx, &store.ReopenRunsParams{RunIDs: []string{"nope"}, Now: at(2 * time.Second)})
		require.ErrorIs(t, err, model.ErrNotFound)
		_, err = f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{other.ID}, Now: at(2 * time.Second)})
		require.NoError(t, err)

		now := at(3 * time.Second)
		reopened, err := f.s.ReopenRuns(f.ctx, &store.ReopenRunsParams{RunIDs: []string{a.ID, b.ID, c.ID}, Now: now})
		require.NoError(t, err)
		require.Len(t, reopened, 3)
		gotA := f.getRun(a.ID)
		require.Equal(t, model.RunQueued, gotA.Status)
		require.Equal(t, 2, gotA.MaxAttempts, "a fresh budget after the attempt made")
		require.Nil(t, gotA.FinishedAt)
		require.Empty(t, gotA.Error)
		require.Len(t, gotA.Attempts, 1, "the failed attempt stays in the history")
		for _, r := range []*model.Run{b, c} {
			got := f.getRun(r.ID)
			require.Equal(t, model.RunWaiting, got.Status, r.JobName)
			require.Equal(t, model.PendingDependencies, got.PendingCode)
			require.Empty(t, got.Error)
		}
		// Run again, step after step.
		for i, r := range []*model.Run{a, b, c} {
			l := f.leaseOne("w", now.Add(time.Duration(i)*time.Second))
			require.Equal(t, r.ID, l.Run.ID)
			f.finish(l, model.AttemptSucceeded, intp(0), now.Add(time.Duration(i)*time.Second))
		}
		require.Equal(t, 2, f.getRun(a.ID).Attempt)
	})

	t.Run("ConcurrentEndsReleaseOnce", func(t *testing.T) {
		f := setup(t, open)
		const n = 8
		var deps []model.Dependency
		for i := range n {
			_, u := f.submit(fmt.Sprintf("part-%d", i))
			deps = append(deps, dep(u, model.CondSucceeded))
		}
		join := after(f, "join", deps...)
		ls := f.lease("w", n, t0)
		require.Len(t, ls, n)
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			released []string
		)
		for _, l := range ls {
			wg.Go(func() {
				res, err := f.s.CompleteAttempts(f.ctx, &store.CompleteAttemptsParams{Now: at(time.Second), Completions: []store.Completion{
					{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded, ExitCode: intp(0)},
				}})
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				for _, r := range res[0].Admitted {
					released = append(released, r.ID)
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		require.Equal(t, []string{join.ID}, released, "released by exactly one of the ends")
		require.Equal(t, model.RunQueued, f.getRun(join.ID).Status)
	})
}

// countJobs counts the stored jobs.
func (f *fx) countJobs() int {
	f.t.Helper()
	page, err := f.s.ListJobs(f.ctx, &store.ListJobsParams{Limit: 1000})
	require.NoError(f.t, err)
	return len(page.Jobs)
}
