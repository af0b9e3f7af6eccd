package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func testRuns(t *testing.T, open OpenFunc) {
	t.Run("CreateRuns", func(t *testing.T) {
		f := setup(t, open)
		j, _ := f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 2 })
		r := f.run(j, func(r *model.Run) {
			r.Trigger = model.TriggerManual
			r.Args = rawJSON(`{"n":1}`)
			r.Queue = "manual-q"
			r.Priority = -3
			r.IdempotencyKey = "rk"
		})
		got := f.createRuns(r)
		require.Equal(t, r, got[0])
		read := f.getRun(r.ID)
		read.Attempts = nil
		require.Equal(t, r, read)

		q, err := f.s.GetQueue(f.ctx, &store.GetQueueParams{Name: "manual-q"})
		require.NoError(t, err, "a run's queue is created when missing")
		require.Equal(t, 1, q.Depth[model.RunQueued])

		// The same idempotency key: the existing run, nothing new.
		dup := f.run(j, func(r *model.Run) { r.IdempotencyKey = "rk" })
		unknown := f.run(f.job("ghost"))
		fresh := f.run(j)
		res, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{dup, unknown, fresh}, Now: t0})
		require.NoError(t, err)
		require.Len(t, res, 3)
		require.NoError(t, res[0].Err)
		require.True(t, res[0].Existing)
		require.Equal(t, r, res[0].Run)
		require.ErrorIs(t, res[1].Err, model.ErrNotFound, "a run of a job that does not exist")
		require.NoError(t, res[2].Err)
		require.False(t, res[2].Existing)
		require.Equal(t, fresh.ID, res[2].Run.ID)

		_, err = f.s.GetRun(f.ctx, &store.GetRunParams{ID: dup.ID})
		require.ErrorIs(t, err, model.ErrNotFound)
		_, err = f.s.GetRun(f.ctx, &store.GetRunParams{ID: unknown.ID})
		require.ErrorIs(t, err, model.ErrNotFound)
		f.getRun(fresh.ID)
	})

	t.Run("CreateRunsBigBatch", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("a")
		f.createJob(j, nil)
		var runs []*model.Run
		for i := range 700 {
			runs = append(runs, f.run(j, cronAt(at(time.Duration(i)*time.Minute))))
		}
		got := f.createRuns(runs...)
		require.Len(t, got, 700)
		require.Equal(t, runs[699].ID, got[699].ID)

		// The same instants again plus new ones: the repeats answer Existing, the rest go in.
		var again []*model.Run
		for i := 600; i < 800; i++ {
			again = append(again, f.run(j, cronAt(at(time.Duration(i)*time.Minute))))
		}
		res, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: again, Now: t0})
		require.NoError(t, err)
		for i, r := range res {
			require.NoError(t, r.Err)
			require.Equal(t, i < 100, r.Existing, "run %d", i)
			if i < 100 {
				require.Equal(t, runs[600+i].ID, r.Run.ID)
			} else {
				require.Equal(t, again[i].ID, r.Run.ID)
			}
		}
		q, err := f.s.GetQueue(f.ctx, &store.GetQueueParams{Name: model.DefaultQueue})
		require.NoError(t, err)
		require.Equal(t, 800, q.Depth[model.RunQueued])
	})

	t.Run("CronOncePerInstant", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("tick", func(j *model.Job) { j.Spec.Schedule = &model.Schedule{Cron: "* * * * *"} })
		f.createJob(j, nil)
		instant := at(time.Minute)
		cron := func() *model.Run {
			return f.run(j, cronAt(instant))
		}
		first := f.createRuns(cron())[0]

		// A second server firing the same instant gets the first run back.
		res, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: []*model.Run{cron(), cron()}, Now: t0})
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err)
			require.True(t, r.Existing)
			require.Equal(t, first, r.Run)
		}
		// Other triggers at the same instant, and the next instant, are separate runs.
		manual := f.run(j, func(r *model.Run) { r.Trigger, r.ScheduledFor = model.TriggerManual, instant })
		next := f.run(j, cronAt(instant.Add(time.Minute)))
		f.createRuns(manual, next)

		page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{JobID: j.ID})
		require.NoError(t, err)
		require.Len(t, page.Runs, 3)
	})

	t.Run("GetRunNotFound", func(t *testing.T) {
		f := setup(t, open)
		_, err := f.s.GetRun(f.ctx, &store.GetRunParams{ID: "missing"})
		require.ErrorIs(t, err, model.ErrNotFound)
		_, err = f.s.GetRun(f.ctx, &store.GetRunParams{ID: f.id()})
		require.ErrorIs(t, err, model.ErrNotFound)
	})

	t.Run("LastRuns", func(t *testing.T) {
		f := setup(t, open)
		ja, _ := f.submit("a")
		jb, rb := f.submit("b")
		jc := f.job("c")
		f.createJob(jc, nil) // no run
		ra2 := f.createRuns(f.run(ja))[0]
		f.leaseOne("w1", t0) // a's first run starts: the newest run is still ra2
		got, err := f.s.LastRuns(f.ctx, &store.LastRunsParams{JobIDs: []string{ja.ID, jb.ID, jc.ID, "ghost"}})
		require.NoError(t, err)
		require.Len(t, got, 2, "no entry for a job without runs, nor for an unknown id")
		require.Equal(t, f.getRun(ra2.ID).ID, got[ja.ID].ID)
		require.Equal(t, model.RunQueued, got[ja.ID].Status)
		require.Equal(t, rb.ID, got[jb.ID].ID)
		require.Equal(t, jb.Name, got[jb.ID].JobName)

		none, err := f.s.LastRuns(f.ctx, &store.LastRunsParams{})
		require.NoError(t, err)
		require.Empty(t, none)
	})

	t.Run("ListRuns", func(t *testing.T) {
		f := setup(t, open)
		ja, ra := f.submit("a")
		jb, rb := f.submit("b", func(j *model.Job) { j.Spec.Queue = "q2" })
		ra2 := f.createRuns(f.run(ja))[0]
		rb2 := f.createRuns(f.run(jb))[0]
		rs := f.createRuns(f.run(ja, func(r *model.Run) { r.Status, r.ScheduledFor = model.RunScheduled, at(time.Hour) }))[0]
		// Lease one run of a for worker w1 (the oldest queued in queue default).
		l := f.leaseOne("w1", t0)
		require.Equal(t, ra.ID, l.Run.ID)

		list := func(p store.ListRunsParams) []string {
			t.Helper()
			var out []string
			for pages := 0; ; pages++ {
				require.Less(t, pages, 20)
				page, err := f.s.ListRuns(f.ctx, &p)
				require.NoError(t, err)
				if p.Limit > 0 {
					require.LessOrEqual(t, len(page.Runs), p.Limit)
				}
				out = append(out, runIDs(page.Runs)...)
				if page.NextCursor == "" {
					return out
				}
				p.Cursor = page.NextCursor
			}
		}
		all := []string{rs.ID, rb2.ID, ra2.ID, rb.ID, ra.ID} // newest first
		for limit := 0; limit <= 6; limit++ {
			require.Equal(t, all, list(store.ListRunsParams{Limit: limit}), "limit %d", limit)
		}
		require.Equal(t, []string{rs.ID, ra2.ID, ra.ID}, list(store.ListRunsParams{JobID: ja.ID, Limit: 2}))
		require.Equal(t, []string{rb2.ID, rb.ID}, list(store.ListRunsParams{Queue: "q2", Limit: 1}))
		require.Equal(t, []string{rb2.ID, ra2.ID, rb.ID}, list(store.ListRunsParams{Status: model.RunQueued, Limit: 2}))
		require.Equal(t, []string{rs.ID}, list(store.ListRunsParams{Status: model.RunScheduled}))
		require.Equal(t, []string{ra.ID}, list(store.ListRunsParams{WorkerID: "w1"}))
		require.Empty(t, list(store.ListRunsParams{WorkerID: "w2"}))
		require.Equal(t, []string{ra2.ID}, list(store.ListRunsParams{JobID: ja.ID, Status: model.RunQueued, Queue: model.DefaultQueue}))
		require.Empty(t, list(store.ListRunsParams{JobID: "missing"}))
		rn := f.createJob(f.job("a", func(j *model.Job) { j.Namespace = "ns2" }), nil)
		rns := f.createRuns(f.run(rn.Job))[0]
		require.Equal(t, []string{rns.ID}, list(store.ListRunsParams{Namespaces: []string{"ns2"}, Limit: 1}), "a token's scope")
		require.Equal(t, []string{rns.ID, rs.ID, rb2.ID, ra2.ID, rb.ID, ra.ID},
			list(store.ListRunsParams{Namespaces: []string{"ns2", model.DefaultNamespace}, Limit: 4}))
		require.Equal(t, []string{rb2.ID, ra2.ID, rb.ID}, list(store.ListRunsParams{Namespaces: []string{model.DefaultNamespace}, Status: model.RunQueued}))
		require.Empty(t, list(store.ListRunsParams{Namespaces: []string{"none"}, Status: model.RunRunning}))

		page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{Limit: 6})
		require.NoError(t, err)
		require.Len(t, page.Runs, 6)
		require.Empty(t, page.NextCursor, "NextCursor is empty exactly when nothing follows")
	})

	t.Run("CancelRuns", func(t *testing.T) {
		f := setup(t, open)
		j, running := f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 3 })
		done := f.createRuns(f.run(j))[0]
		l := f.lease("w", 2, t0)
		require.Equal(t, []string{running.ID, done.ID}, leaseIDs(l))
		f.finish(l[1], model.AttemptSucceeded, intp(0), at(time.Second))
		other := f.createRuns(
			f.run(j),
			f.run(j, func(r *model.Run) {
				r.Status, r.ScheduledFor, r.PendingCode = model.RunScheduled, at(time.Hour), model.PendingNotDue
			}),
			f.run(j, func(r *model.Run) {
				r.Status, r.PendingCode, r.PendingReason = model.RunWaiting, model.PendingDependencies, "waiting on x"
			}),
		)
		queued, scheduled, waiting := other[0], other[1], other[2]

		now := at(time.Minute)
		changed, err := f.s.CancelRuns(f.ctx, &store.CancelRunsParams{
			RunIDs: []string{queued.ID, running.ID, scheduled.ID, waiting.ID, done.ID},
			Reason: "stop it", Now: now,
		})
		require.NoError(t, err)
		byID := map[string]*model.Run{}
		for _, r := range changed {
			byID[r.ID] = r
		}
		require.Len(t, byID, 4, "the final run is left alone")
		for _, id := range []string{queued.ID, scheduled.ID, waiting.ID} {
			r := byID[id]
			require.Equal(t, model.RunCancelled, r.Status)
			require.Equal(t, timep(now), r.FinishedAt)
			require.Equal(t, "stop it", r.Error)
			require.Equal(t, model.PendingNone, r.PendingCode)
			require.Empty(t, r.PendingReason)
			require.Equal(t, r, withoutAttempts(f.getRun(id)))
		}
		require.Equal(t, model.RunSucceeded, f.getRun(done.ID).Status)
		require.Equal(t, 1, f.getRun(done.ID).Attempt)
		rr := byID[running.ID]
		require.Equal(t, model.RunRunning, rr.Status)
		require.True(t, rr.CancelRequested)
		require.Nil(t, rr.FinishedAt)
		require.Equal(t, l[0].Token, rr.LeaseToken, "the lease stays until the worker stops")

		// Cancelling again changes nothing.
		changed, err = f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{running.ID, scheduled.ID}, Now: now})
		require.NoError(t, err)
		require.Empty(t, changed)

		// The worker hears of it on its heartbeat, stops, and the run ends cancelled.
		f.register("w", "s1", now)
		hb, err := f.heartbeat(store.Beat{WorkerID: "w", Held: []store.LeaseRef{{RunID: running.ID, Token: l[0].Token}}}, time.Minute, now)
		require.NoError(t, err)
		require.Equal(t, []string{running.ID}, hb.Cancel)
		require.Empty(t, hb.Lost)
		end := f.finish(l[0], model.AttemptCancelled, nil, at(2*time.Minute))
		require.Equal(t, model.RunCancelled, end.Status)
		require.Equal(t, timep(at(2*time.Minute)), end.FinishedAt)
		require.Empty(t, end.LeaseToken)
		require.Equal(t, model.AttemptCancelled, f.getRun(running.ID).Attempts[0].Status)

		// An unknown id fails the call and changes nothing.
		still := f.createRuns(f.run(j))[0]
		_, err = f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{still.ID, "missing"}, Now: now})
		require.ErrorIs(t, err, model.ErrNotFound)
		require.Equal(t, model.RunQueued, f.getRun(still.ID).Status)
	})

	t.Run("CancelRunsByJob", func(t *testing.T) {
		f := setup(t, open)
		j, r1 := f.submit("a")
		other, o1 := f.submit("b")
		r2 := f.createRuns(f.run(j))[0]
		l := f.leaseOne("w", t0)
		require.Equal(t, r1.ID, l.Run.ID)

		changed, err := f.s.CancelRuns(f.ctx, &store.CancelRunsParams{JobID: j.ID, Reason: "bye", Now: at(time.Second)})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{r1.ID, r2.ID}, runIDs(changed))
		require.Equal(t, model.RunCancelled, f.getRun(r2.ID).Status)
		require.True(t, f.getRun(r1.ID).CancelRequested)
		require.Equal(t, model.RunQueued, f.getRun(o1.ID).Status, "other jobs' runs are untouched")
		_ = other

		changed, err = f.s.CancelRuns(f.ctx, &store.CancelRunsParams{JobID: "no-such-job", Now: at(time.Second)})
		require.NoError(t, err)
		require.Empty(t, changed)
	})

	t.Run("RetryRun", func(t *testing.T) {
		f := setup(t, open)
		j, r := f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 1 })
		l := f.leaseOne("w", at(time.Second))
		failed := f.finish(l, model.AttemptFailed, intp(3), at(2*time.Second))
		require.Equal(t, model.RunFailed, failed.Status)
		require.Equal(t, "attempt failed", failed.Error)

		now := at(time.Minute)
		got, err := f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: r.ID, Now: now})
		require.NoError(t, err)
		require.Equal(t, model.RunQueued, got.Status)
		require.Equal(t, now, got.ScheduledFor)
		require.Equal(t, 1, got.Attempt)
		require.Equal(t, 2, got.MaxAttempts)
		require.Nil(t, got.FinishedAt)
		require.Empty(t, got.Error)
		require.Equal(t, timep(at(time.Second)), got.StartedAt, "StartedAt is the first attempt's start")
		require.Equal(t, got, withoutAttempts(f.getRun(r.ID)))

		l2 := f.leaseOne("w2", at(2*time.Minute))
		require.Equal(t, r.ID, l2.Run.ID)
		require.Equal(t, 2, l2.Run.Attempt)
		hist := f.getRun(r.ID).Attempts
		require.Len(t, hist, 2)
		require.Equal(t, model.Attempt{RunID: r.ID, N: 1, WorkerID: "w", Status: model.AttemptFailed, ExitCode: intp(3), Error: "attempt failed",
			StartedAt: at(time.Second), FinishedAt: timep(at(2 * time.Second))}, hist[0])
		require.Equal(t, model.Attempt{RunID: r.ID, N: 2, WorkerID: "w2", Status: model.AttemptRunning, StartedAt: at(2 * time.Minute)}, hist[1])

		done := f.finish(l2, model.AttemptSucceeded, intp(0), at(3*time.Minute))
		require.Equal(t, model.RunSucceeded, done.Status)
		_, err = f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: r.ID, Now: now})
		require.ErrorIs(t, err, model.ErrInvalidState, "a succeeded run")

		// A cancelled run can be retried too; queued and running ones cannot.
		queued := f.createRuns(f.run(j))[0]
		_, err = f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: queued.ID, Now: now})
		require.ErrorIs(t, err, model.ErrInvalidState)
		_, err = f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{queued.ID}, Now: now})
		require.NoError(t, err)
		got, err = f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: queued.ID, Now: now})
		require.NoError(t, err)
		require.Equal(t, model.RunQueued, got.Status)
		require.Equal(t, 2, got.MaxAttempts)
		require.False(t, got.CancelRequested)
		l3 := f.leaseOne("w", now)
		_, err = f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: l3.Run.ID, Now: now})
		require.ErrorIs(t, err, model.ErrInvalidState, "a running run")

		_, err = f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: "missing", Now: now})
		require.ErrorIs(t, err, model.ErrNotFound)
	})

	t.Run("TimesRoundTrip", func(t *testing.T) {
		f := setup(t, open)
		loc := time.FixedZone("Y", -7*3600)
		ts := time.Date(2030, 12, 31, 16, 59, 59, 999999999, loc)
		j := f.job("t")
		r := f.run(j, func(r *model.Run) { r.ScheduledFor, r.CreatedAt = ts, ts.Add(-time.Microsecond) })
		f.createJob(j, r)
		got := f.getRun(r.ID)
		require.Equal(t, time.Date(2030, 12, 31, 23, 59, 59, 999999000, time.UTC), got.ScheduledFor)
		require.Equal(t, time.Date(2030, 12, 31, 23, 59, 59, 999998000, time.UTC), got.CreatedAt)
		require.Equal(t, time.UTC, got.ScheduledFor.Location())

		// A lease at a sub-microsecond instant: every stored time comes back at µs, UTC.
		now := time.Date(2031, 1, 1, 0, 0, 0, 1500, loc)
		l := f.leaseOne("w", now)
		require.Equal(t, micro(now.Add(30*time.Second)), l.ExpiresAt)
		require.Equal(t, timep(micro(now.Add(30*time.Second))), l.Run.LeaseExpiresAt)
		require.Equal(t, timep(micro(now)), l.Run.StartedAt)
		got = f.getRun(r.ID)
		require.Equal(t, timep(micro(now)), got.StartedAt)
		require.Equal(t, time.UTC, got.StartedAt.Location())
		require.Equal(t, time.UTC, got.LeaseExpiresAt.Location())
		require.Equal(t, micro(now), got.Attempts[0].StartedAt)
	})
}

func withoutAttempts(r *model.Run) *model.Run {
	c := *r
	c.Attempts = nil
	return &c
}
