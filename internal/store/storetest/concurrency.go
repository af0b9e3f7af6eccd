package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// RunConcurrency runs the cases where several callers of one store race: what a store that
// serves many connections at once (PostgreSQL, several servers) must get right under
// contention. A store that serializes writers passes them trivially. Every subtest opens
// its own store with open and runs in parallel with the others.
func RunConcurrency(t *testing.T, open func(t testing.TB) store.Store) {
	t.Helper()
	cases := []struct {
		name string
		run  func(t *testing.T, open OpenFunc)
	}{
		{"LeaseMaxConcurrency", testRaceLeaseMaxConcurrency},
		{"CompleteVersusRescue", testRaceCompleteVersusRescue},
		{"CreateJobsSameName", testRaceCreateJobsSameName},
		{"CreateJobsSameKey", testRaceCreateJobsSameKey},
		{"CronSameInstant", testRaceCronSameInstant},
		{"AdmitSameKey", testRaceAdmitSameKey},
		{"FireSameJob", testRaceFireSameJob},
		{"HeartbeatVersusComplete", testRaceHeartbeatVersusComplete},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open) })
	}
}

// race runs f(i) for i in [0, n) at once and returns the first error.
func race(n int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make(chan error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := f(i); err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	return <-errs
}

// testRaceLeaseMaxConcurrency: leasers racing on a queue with a limit never exceed it.
func testRaceLeaseMaxConcurrency(t *testing.T, open OpenFunc) {
	f := setup(t, open)
	const limit, leasers = 3, 8
	_, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "lim", MaxConcurrency: intp(limit), Now: t0})
	require.NoError(t, err)
	j := f.job("a", func(j *model.Job) { j.Spec.Queue = "lim" })
	f.createJob(j, nil)
	var batch []*model.Run
	for range 30 {
		batch = append(batch, f.run(j))
	}
	f.createRuns(batch...)

	var (
		mu     sync.Mutex
		leased []*model.Lease
	)
	leaseAll := func() error {
		return race(leasers, func(i int) error {
			for {
				ls, err := Leases(f.s.LeaseRuns(f.ctx, &store.LeaseRunsParams{WorkerID: fmt.Sprintf("w%d", i), Max: 2, LeaseTTL: time.Minute, Now: t0}))
				if err != nil {
					return err
				}
				if len(ls) == 0 {
					return nil
				}
				mu.Lock()
				leased = append(leased, ls...)
				mu.Unlock()
			}
		})
	}
	require.NoError(t, leaseAll())
	require.Len(t, leased, limit, "the limit holds under concurrent leasing")

	// Two end; racing leasers take exactly two more.
	for _, l := range leased[:2] {
		f.finish(l, model.AttemptSucceeded, intp(0), at(time.Second))
	}
	leased = nil
	require.NoError(t, leaseAll())
	require.Len(t, leased, 2)
	page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{Status: model.RunRunning, Limit: 100})
	require.NoError(t, err)
	require.Len(t, page.Runs, limit)
}

// testRaceCompleteVersusRescue: a completion racing the rescue of its expired lease ends the
// attempt exactly once.
func testRaceCompleteVersusRescue(t *testing.T, open OpenFunc) {
	f := setup(t, open)
	const n = 40
	j := f.job("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 2 })
	f.createJob(j, nil)
	var batch []*model.Run
	for range n {
		batch = append(batch, f.run(j))
	}
	f.createRuns(batch...)
	ls, err := Leases(f.s.LeaseRuns(f.ctx, &store.LeaseRunsParams{WorkerID: "w", Max: n, LeaseTTL: time.Second, Now: t0}))
	require.NoError(t, err)
	require.Len(t, ls, n)

	now := at(2 * time.Second) // every lease has expired
	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		rescued  = map[string]bool{}
	)
	err = race(4, func(i int) error {
		if i%2 == 0 {
			// Complete in two batches, in an order unlike the rescuer's.
			half := ls[i/2*n/2 : (i/2+1)*n/2]
			var cs []store.Completion
			for k := len(half) - 1; k >= 0; k-- {
				cs = append(cs, store.Completion{RunID: half[k].Run.ID, Token: half[k].Token, Status: model.AttemptSucceeded, ExitCode: intp(0)})
			}
			res, err := f.s.CompleteAttempts(f.ctx, &store.CompleteAttemptsParams{Completions: cs, Now: now})
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for k, r := range res {
				if r.Err == nil {
					accepted[cs[k].RunID] = true
				}
			}
			return nil
		}
		for {
			runs, err := f.s.RescueExpired(f.ctx, &store.RescueExpiredParams{Now: now, Limit: 7, Rand: drawZero})
			if err != nil {
				return err
			}
			if len(runs) == 0 {
				return nil
			}
			mu.Lock()
			for _, r := range runs {
				if rescued[r.ID] {
					mu.Unlock()
					return fmt.Errorf("run %s rescued twice", r.ID)
				}
				rescued[r.ID] = true
			}
			mu.Unlock()
		}
	})
	require.NoError(t, err)
	for _, l := range ls {
		id := l.Run.ID
		require.NotEqual(t, accepted[id], rescued[id], "run %s: ended exactly once (accepted %v, rescued %v)", id, accepted[id], rescued[id])
		r := f.getRun(id)
		require.Len(t, r.Attempts, 1, "run %s: one attempt in the history", id)
		if accepted[id] {
			require.Equal(t, model.RunSucceeded, r.Status)
			require.Equal(t, model.AttemptSucceeded, r.Attempts[0].Status)
		} else {
			require.Equal(t, model.RunQueued, r.Status)
			require.Equal(t, model.AttemptLost, r.Attempts[0].Status)
		}
	}
}

// testRaceCreateJobsSameName: batches racing to create the same name: one wins, the others
// fail that entry alone.
func testRaceCreateJobsSameName(t *testing.T, open OpenFunc) {
	f := setup(t, open)
	const callers = 8
	batches := make([][]store.NewJob, callers)
	for i := range batches {
		same := f.job("same")
		own := f.job(fmt.Sprintf("own-%d", i))
		batches[i] = []store.NewJob{{Job: own, Run: f.run(own)}, {Job: same, Run: f.run(same)}}
	}
	results := make([][]store.CreateJobResult, callers)
	require.NoError(t, race(callers, func(i int) error {
		res, err := f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Jobs: batches[i], Now: t0})
		results[i] = res
		return err
	}))
	wins := 0
	for i, res := range results {
		require.Len(t, res, 2)
		require.NoError(t, res[0].Err, "caller %d: its own job is unaffected", i)
		f.getRun(batches[i][0].Run.ID)
		if res[1].Err == nil {
			wins++
			continue
		}
		require.ErrorIs(t, res[1].Err, model.ErrConflict)
		_, err := f.s.GetRun(f.ctx, &store.GetRunParams{ID: batches[i][1].Run.ID})
		require.ErrorIs(t, err, model.ErrNotFound, "a losing entry writes nothing")
	}
	require.Equal(t, 1, wins)
	page, err := f.s.ListJobs(f.ctx, &store.ListJobsParams{Namespace: model.DefaultNamespace, Limit: 100})
	require.NoError(t, err)
	require.Len(t, page.Jobs, callers+1)
}

// testRaceCreateJobsSameKey: submissions racing with one idempotency key create one job;
// every other answer is that job, Existing.
func testRaceCreateJobsSameKey(t *testing.T, open OpenFunc) {
	f := setup(t, open)
	const callers = 8
	batches := make([][]store.NewJob, callers)
	for i := range batches {
		j := f.job(fmt.Sprintf("k-%d", i), func(j *model.Job) { j.IdempotencyKey, j.RequestHash = "key", "h" })
		own := f.job(fmt.Sprintf("own-%d", i))
		batches[i] = []store.NewJob{{Job: j, Run: f.run(j)}, {Job: own, Run: f.run(own)}}
	}
	results := make([][]store.CreateJobResult, callers)
	require.NoError(t, race(callers, func(i int) error {
		res, err := f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Jobs: batches[i], Now: t0})
		results[i] = res
		return err
	}))
	var created []string
	ids := map[string]bool{}
	for i, res := range results {
		require.NoError(t, res[0].Err, "caller %d", i)
		require.NoError(t, res[1].Err, "caller %d", i)
		require.False(t, res[1].Existing)
		require.False(t, res[0].Conflict)
		ids[res[0].Job.ID] = true
		if !res[0].Existing {
			created = append(created, res[0].Job.ID)
		}
	}
	require.Len(t, created, 1)
	require.Len(t, ids, 1, "every answer names the one job")
}

// testRaceCronSameInstant: servers racing to fire one cron instant create one run.
func testRaceCronSameInstant(t *testing.T, open OpenFunc) {
	f := setup(t, open)
	const callers = 8
	j := f.job("tick", func(j *model.Job) { j.Spec.Schedule = &model.Schedule{Cron: "* * * * *"} })
	f.createJob(j, nil)
	results := make([]store.CreateRunResult, callers)
	runs := make([]*model.Run, callers)
	for i := range runs {
		runs[i] = f.run(j, cronAt(at(time.Minute)))
	}
	require.NoError(t, race(callers, func(i int) error {
		res, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{runs[i]}, Now: t0})
		if err == nil {
			results[i] = res[0]
		}
		return err
	}))
	fresh := 0
	ids := map[string]bool{}
	for _, r := range results {
		require.NoError(t, r.Err)
		ids[r.Run.ID] = true
		if !r.Existing {
			fresh++
		}
	}
	require.Equal(t, 1, fresh)
	require.Len(t, ids, 1)
}

// testRaceAdmitSameKey: runs created at once under one limit never get more slots than
// the limit, and freeing them at once admits each held run once.
func testRaceAdmitSameKey(t *testing.T, open OpenFunc) {
	f := setup(t, open)
	const callers = 8
	j := f.job("limited")
	f.createJob(j, nil)
	runs := make([]*model.Run, callers)
	for i := range runs {
		runs[i] = f.limited(j, "k", 2, model.ConcurrencyQueue)
	}
	created := make([]*model.Run, callers)
	require.NoError(t, race(callers, func(i int) error {
		res, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{runs[i]}, Now: t0})
		if err == nil {
			created[i] = res[0].Run
		}
		return err
	}))
	count := func() (queued, waiting int) {
		for _, r := range runs {
			switch f.getRun(r.ID).Status {
			case model.RunQueued:
				queued++
			case model.RunWaiting:
				waiting++
			}
		}
		return queued, waiting
	}
	queued, waiting := count()
	require.Equal(t, 2, queued)
	require.Equal(t, callers-2, waiting)

	// Cancel the holders and the held runs at once, from several callers.
	require.NoError(t, race(callers, func(i int) error {
		if i%2 == 0 {
			return nil
		}
		_, err := f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{created[i].ID}, Reason: "x", Now: at(time.Second)})
		return err
	}))
	queued, waiting = count()
	require.Equal(t, 2, queued, "every freed slot was taken by a held run, and no more")
	require.Equal(t, callers/2-2, waiting)
}

// testRaceFireSameJob: servers firing the same due job at once create its run once.
func testRaceFireSameJob(t *testing.T, open OpenFunc) {
	f := setup(t, open)
	const callers = 6
	next := at(0)
	j := f.job("tick", func(j *model.Job) { j.Spec.Schedule = &model.Schedule{Cron: "* * * * *"}; j.NextFireAt = &next })
	f.createJob(j, nil)
	stale := make([]bool, callers)
	runs := make([]*model.Run, callers) // built first: the fixture is not safe for concurrent use
	for i := range runs {
		runs[i] = f.run(j, cronAt(at(0)))
	}
	after := at(time.Minute)
	require.NoError(t, race(callers, func(i int) error {
		res, err := f.s.FireJobs(f.ctx, &store.FireJobsParams{Now: at(time.Second), Fires: []store.Fire{{
			JobID: j.ID, Expect: at(0), Next: &after, Runs: []*model.Run{runs[i]},
		}}})
		if err == nil {
			stale[i] = res[0].Stale
		}
		return err
	}))
	applied := 0
	for _, s := range stale {
		if !s {
			applied++
		}
	}
	require.Equal(t, 1, applied, "one fire applies; the others are stale")
	page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{JobID: j.ID})
	require.NoError(t, err)
	require.Len(t, page.Runs, 1)
}

// testRaceHeartbeatVersusComplete: heartbeats and completions over the same runs, given in
// opposite orders, never deadlock.
func testRaceHeartbeatVersusComplete(t *testing.T, open OpenFunc) {
	f := setup(t, open)
	const n = 30
	f.register("w", "s1", t0)
	j := f.job("a")
	f.createJob(j, nil)
	var batch []*model.Run
	for range n {
		batch = append(batch, f.run(j))
	}
	f.createRuns(batch...)
	ls, err := Leases(f.s.LeaseRuns(f.ctx, &store.LeaseRunsParams{WorkerID: "w", Max: n, LeaseTTL: time.Minute, Now: t0}))
	require.NoError(t, err)
	require.Len(t, ls, n)
	held := make([]store.LeaseRef, n)
	for i, l := range ls {
		held[i] = store.LeaseRef{RunID: l.Run.ID, Token: l.Token}
	}
	reversed := slices.Clone(ls)
	slices.Reverse(reversed)
	err = race(4, func(i int) error {
		if i%2 == 0 {
			for k := range 10 {
				if _, err := f.heartbeat(store.Beat{WorkerID: "w", Held: held}, time.Minute, at(time.Duration(k)*time.Second)); err != nil {
					return err
				}
			}
			return nil
		}
		// Each completer ends every other run of the reversed list.
		var cs []store.Completion
		for k := i / 2; k < n; k += 2 {
			cs = append(cs, store.Completion{RunID: reversed[k].Run.ID, Token: reversed[k].Token, Status: model.AttemptSucceeded, ExitCode: intp(0)})
		}
		_, err := f.s.CompleteAttempts(f.ctx, &store.CompleteAttemptsParams{Completions: cs, Now: at(time.Second)})
		return err
	})
	require.NoError(t, err)
	for _, l := range ls {
		require.Equal(t, model.RunSucceeded, f.getRun(l.Run.ID).Status)
	}
}

// LeaseUntilEmpty has workers goroutines lease up to max runs at a time, each from one of
// stores (several stores: several servers on one database), until none is left, and
// returns which worker leased each run. A run leased twice is an error.
func LeaseUntilEmpty(ctx context.Context, stores []store.Store, workers, max int, now time.Time) (map[string]string, error) {
	var (
		mu   sync.Mutex
		seen = map[string]string{}
	)
	err := race(workers, func(w int) error {
		s, worker := stores[w%len(stores)], fmt.Sprintf("w%d", w)
		for {
			ls, err := Leases(s.LeaseRuns(ctx, &store.LeaseRunsParams{WorkerID: worker, Max: max, LeaseTTL: time.Minute, Now: now}))
			if err != nil || len(ls) == 0 {
				return err
			}
			mu.Lock()
			for _, l := range ls {
				if prev, dup := seen[l.Run.ID]; dup {
					mu.Unlock()
					return fmt.Errorf("run %s leased by %s and %s", l.Run.ID, prev, worker)
				}
				seen[l.Run.ID] = worker
			}
			mu.Unlock()
		}
	})
	return seen, err
}
