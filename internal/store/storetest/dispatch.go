package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func testDispatch(t *testing.T, open OpenFunc) {
	t.Run("PromoteDueAndNextDue", func(t *testing.T) {
		f := setup(t, open)
		_, ok, err := f.s.NextDue(f.ctx, time.Time{})
		require.NoError(t, err)
		require.False(t, ok)

		j, _ := f.submit("a")
		sched := func(d time.Duration) *model.Run {
			return f.run(j, func(r *model.Run) {
				r.Status, r.ScheduledFor, r.PendingCode, r.PendingReason = model.RunScheduled, at(d), model.PendingNotDue, "not due"
			})
		}
		runs := f.createRuns(sched(3*time.Minute), sched(time.Minute), sched(2*time.Minute), sched(4*time.Minute))
		r3, r1, r2, r4 := runs[0], runs[1], runs[2], runs[3]

		next, ok, err := f.s.NextDue(f.ctx, time.Time{})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, at(time.Minute), next)
		require.Equal(t, time.UTC, next.Location())

		n, err := f.s.PromoteDue(f.ctx, &store.PromoteDueParams{Now: at(time.Minute - time.Microsecond), Limit: 10})
		require.NoError(t, err)
		require.Zero(t, n)

		// Due at or before Now, earliest first, at most Limit.
		n, err = f.s.PromoteDue(f.ctx, &store.PromoteDueParams{Now: at(3 * time.Minute), Limit: 2})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		for _, r := range []*model.Run{r1, r2} {
			got := f.getRun(r.ID)
			require.Equal(t, model.RunQueued, got.Status)
			require.Equal(t, model.PendingNone, got.PendingCode)
			require.Empty(t, got.PendingReason)
			require.Equal(t, r.ScheduledFor, got.ScheduledFor)
		}
		require.Equal(t, model.RunScheduled, f.getRun(r3.ID).Status)

		next, ok, err = f.s.NextDue(f.ctx, time.Time{})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, at(3*time.Minute), next)

		n, err = f.s.PromoteDue(f.ctx, &store.PromoteDueParams{Now: at(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, 2, n, "Limit 0: no limit")
		require.Equal(t, model.RunQueued, f.getRun(r4.ID).Status)
		_, ok, err = f.s.NextDue(f.ctx, time.Time{})
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("LeaseFields", func(t *testing.T) {
		f := setup(t, open)
		j, r := f.submit("a", func(j *model.Job) {
			j.Spec.Args = rawJSON(`{"k":"v"}`)
			j.Spec.Retry.MaxAttempts = 2
		})
		now := at(time.Minute)
		ls, err := Leases(f.s.LeaseRuns(f.ctx, &store.LeaseRunsParams{WorkerID: "w1", Max: 5, LeaseTTL: 45 * time.Second, Now: now}))
		require.NoError(t, err)
		require.Len(t, ls, 1)
		l := ls[0]
		spec := j.Spec
		spec.Args = nil // a lease's args are its run's
		require.Equal(t, spec, l.Spec)
		require.NotEmpty(t, l.Token)
		require.Equal(t, now.Add(45*time.Second), l.ExpiresAt)

		want := *r
		want.Status = model.RunRunning
		want.Attempt = 1
		want.WorkerID = "w1"
		want.LeaseToken = l.Token
		want.LeaseExpiresAt = timep(now.Add(45 * time.Second))
		want.StartedAt = timep(now)
		require.Equal(t, &want, l.Run)

		got := f.getRun(r.ID)
		require.Equal(t, []model.Attempt{{RunID: r.ID, N: 1, WorkerID: "w1", Status: model.AttemptRunning, StartedAt: now}}, got.Attempts)
		require.Equal(t, &want, withoutAttempts(got))

		// A second attempt gets a new token; StartedAt stays the first attempt's start.
		f.finish(l, model.AttemptFailed, intp(1), at(2*time.Minute))
		l2 := f.leaseOne("w2", at(3*time.Minute))
		require.Equal(t, 2, l2.Run.Attempt)
		require.NotEqual(t, l.Token, l2.Token)
		require.Equal(t, timep(now), l2.Run.StartedAt)
		require.Equal(t, "w2", l2.Run.WorkerID)
	})

	t.Run("LeaseSharedSpecs", func(t *testing.T) {
		// Jobs alike but for their args, and runs of one job, share a spec: each lease still
		// has its own run's args, and the same spec.
		f := setup(t, open)
		args := map[string]string{}
		for i := range 3 {
			j, r := f.anonymous(func(j *model.Job) {
				j.Spec.Handler = "h"
				j.Spec.Env = map[string]string{"K": "V"}
				j.Spec.Args = rawJSON(fmt.Sprintf(`{"n":%d}`, i))
			})
			f.createJob(j, r)
			args[r.ID] = string(j.Spec.Args)
		}
		named, _ := f.submit("named")
		for _, n := range []string{"first", "second"} {
			r := f.createRuns(f.run(named, func(r *model.Run) { r.Args = rawJSON(`{"n":"` + n + `"}`) }))[0]
			args[r.ID] = string(r.Args)
		}
		ls := f.lease("w1", 10, at(time.Minute))
		require.Len(t, ls, 6)
		for _, l := range ls {
			require.Nil(t, l.Spec.Args, "run %s", l.Run.ID)
			if want, ok := args[l.Run.ID]; ok {
				require.JSONEq(t, want, string(l.Run.Args), "run %s", l.Run.ID)
			}
			if l.Run.JobID != named.ID {
				require.Equal(t, map[string]string{"K": "V"}, l.Spec.Env, "run %s", l.Run.ID)
				require.Equal(t, "h", l.Spec.Handler)
			}
		}
	})

	t.Run("LeaseOrder", func(t *testing.T) {
		f := setup(t, open)
		for _, q := range []struct {
			name string
			prio int
		}{{"hi", 10}, {"lo", -1}, {"mid", 0}, {"amid", 0}} {
			_, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: q.name, Priority: intp(q.prio), Now: t0})
			require.NoError(t, err)
		}
		jobs := map[string]*model.Job{}
		for _, q := range []string{"hi", "lo", "mid", "amid"} {
			jobs[q] = f.job("job-"+q, func(j *model.Job) { j.Spec.Queue = q })
			f.createJob(jobs[q], nil)
		}
		mk := func(q string, prio int, due time.Duration) *model.Run {
			return f.run(jobs[q], func(r *model.Run) { r.Priority, r.ScheduledFor = prio, at(due) })
		}
		// Created in an order that differs from the lease order.
		runs := f.createRuns(
			mk("lo", 100, 0),                  // 0
			mk("mid", 0, 2*time.Second),       // 1
			mk("hi", 0, time.Second),          // 2
			mk("mid", 5, 3*time.Second),       // 3
			mk("hi", 0, time.Second),          // 4 (ties with 2 on priority and time: id order)
			mk("hi", 1, 5*time.Second),        // 5
			mk("amid", 0, 9*time.Second),      // 6
			mk("mid", 0, time.Second),         // 7
			mk("hi", 0, 500*time.Millisecond), // 8
		)
		want := []int{5, 8, 2, 4, 6, 3, 7, 1, 0} // hi; then amid, mid (same priority: by name); then lo
		var got []string
		for range runs {
			got = append(got, f.leaseOne("w", at(time.Minute)).Run.ID)
		}
		wantIDs := make([]string, len(want))
		for i, k := range want {
			wantIDs[i] = runs[k].ID
		}
		require.Equal(t, wantIDs, got)
		require.Empty(t, f.lease("w", 10, at(time.Minute)))
	})

	t.Run("LeaseBatchOrder", func(t *testing.T) {
		f := setup(t, open)
		_, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "hi", Priority: intp(1), Now: t0})
		require.NoError(t, err)
		jd := f.job("d")
		jh := f.job("h", func(j *model.Job) { j.Spec.Queue = "hi" })
		f.createJob(jd, nil)
		f.createJob(jh, nil)
		runs := f.createRuns(
			f.run(jd, func(r *model.Run) { r.Priority = 3 }),
			f.run(jh, func(r *model.Run) { r.ScheduledFor = at(time.Second) }),
			f.run(jd, func(r *model.Run) { r.Priority = 4 }),
			f.run(jh),
			f.run(jd, func(r *model.Run) { r.Priority = 3 }),
		)
		ls := f.lease("w", 4, at(time.Minute))
		require.Equal(t, []string{runs[3].ID, runs[1].ID, runs[2].ID, runs[0].ID}, leaseIDs(ls))
		tokens := map[string]bool{}
		for _, l := range ls {
			require.Equal(t, model.RunRunning, l.Run.Status)
			require.Equal(t, l.Token, l.Run.LeaseToken)
			tokens[l.Token] = true
		}
		require.Len(t, tokens, 4, "every lease has its own token")
	})

	t.Run("LeaseQueuedAndDue", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("a")
		f.createJob(j, nil)
		sched := func(d time.Duration, prio int) *model.Run {
			return f.run(j, func(r *model.Run) {
				r.Status, r.ScheduledFor, r.PendingCode, r.Priority = model.RunScheduled, at(d), model.PendingNotDue, prio
			})
		}
		runs := f.createRuns(
			sched(2*time.Minute, 0), // due third
			f.run(j, func(r *model.Run) { r.Status, r.PendingCode = model.RunWaiting, model.PendingDependencies }),
			sched(time.Hour, 9), // not due
			f.run(j, func(r *model.Run) { r.ScheduledFor = at(90 * time.Second) }), // queued, second
			sched(time.Minute, 0), // due first
		)
		dueThird, notDue, queued, dueFirst := runs[0], runs[2], runs[3], runs[4]

		// A due scheduled run is leased as a queued one, in lease order: priority, then
		// scheduled time. Runs not due, and waiting ones, are not.
		ls := f.lease("w", 10, at(10*time.Minute))
		require.Equal(t, []string{dueFirst.ID, queued.ID, dueThird.ID}, leaseIDs(ls))
		for _, l := range ls {
			got := f.getRun(l.Run.ID)
			require.Equal(t, model.RunRunning, got.Status)
			require.Equal(t, model.PendingNone, got.PendingCode)
			require.Equal(t, 1, got.Attempt)
		}
		require.Empty(t, f.lease("w", 10, at(59*time.Minute)))
		require.Equal(t, []string{notDue.ID}, leaseIDs(f.lease("w", 10, at(time.Hour))), "due at its time, whatever its priority")
	})

	t.Run("LeaseDueWhenPlacing", func(t *testing.T) {
		// Runs with requirements, and queues with a limit, take the placing path.
		f := setup(t, open)
		f.registerWith("w", nil, model.Capacity{CPU: 2, Slots: 8}, t0)
		_, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "lim", MaxConcurrency: intp(2), Now: t0})
		require.NoError(t, err)
		big := f.job("big", func(j *model.Job) { j.Spec.Requirements = model.Requirements{CPU: 2} })
		f.createJob(big, nil)
		lim := f.job("lim", func(j *model.Job) { j.Spec.Queue = "lim" })
		f.createJob(lim, nil)
		sched := func(j *model.Job, d time.Duration) *model.Run {
			return f.run(j, func(r *model.Run) {
				r.Status, r.ScheduledFor, r.PendingCode = model.RunScheduled, at(d), model.PendingNotDue
			})
		}
		runs := f.createRuns(sched(big, time.Minute), sched(big, 2*time.Minute), sched(lim, time.Minute), sched(lim, time.Minute), sched(lim, time.Minute))
		require.Empty(t, f.lease("w", 8, at(30*time.Second)))
		ls := f.lease("w", 8, at(time.Minute))
		ids := leaseIDs(ls)
		require.Len(t, ids, 3, "one big run fits the worker, two runs fit lim's limit")
		require.Contains(t, ids, runs[0].ID)
		require.Equal(t, model.RunScheduled, f.getRun(runs[1].ID).Status, "not due")
	})

	t.Run("LeaseMax", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("a")
		f.createJob(j, nil)
		for range 5 {
			f.createRuns(f.run(j))
		}
		require.Empty(t, f.lease("w", 0, t0))
		require.Len(t, f.lease("w", 3, t0), 3)
		require.Len(t, f.lease("w", 3, t0), 2)
		require.Empty(t, f.lease("w", 3, t0))
	})

	t.Run("PausedQueue", func(t *testing.T) {
		f := setup(t, open)
		_, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "p", Paused: boolp(true), Priority: intp(5), Now: t0})
		require.NoError(t, err)
		_, rp := f.submit("a", func(j *model.Job) { j.Spec.Queue = "p" })
		_, rd := f.submit("b")
		ls := f.lease("w", 10, t0)
		require.Equal(t, []string{rd.ID}, leaseIDs(ls))
		require.Empty(t, f.lease("w", 10, t0))

		_, err = f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "p", Paused: boolp(false), Now: t0})
		require.NoError(t, err)
		require.Equal(t, []string{rp.ID}, leaseIDs(f.lease("w", 10, t0)))
	})

	t.Run("QueueMaxConcurrency", func(t *testing.T) {
		f := setup(t, open)
		_, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "lim", MaxConcurrency: intp(2), Priority: intp(1), Now: t0})
		require.NoError(t, err)
		j := f.job("a", func(j *model.Job) { j.Spec.Queue = "lim" })
		f.createJob(j, nil)
		for range 5 {
			f.createRuns(f.run(j))
		}
		_, other := f.submit("b")
		ls := f.lease("w", 10, t0)
		require.Len(t, ls, 3, "two of lim, then the default queue")
		require.Equal(t, other.ID, ls[2].Run.ID)
		require.Empty(t, f.lease("w", 10, t0), "lim is at its limit")

		f.finish(ls[0], model.AttemptSucceeded, intp(0), at(time.Second))
		require.Len(t, f.lease("w", 10, at(time.Second)), 1)
		require.Empty(t, f.lease("w", 10, at(time.Second)))

		// Raising the limit lets more through.
		_, err = f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "lim", MaxConcurrency: intp(0), Now: t0})
		require.NoError(t, err)
		require.Len(t, f.lease("w", 10, at(time.Second)), 2)
	})

	t.Run("LeaseHandlers", func(t *testing.T) {
		f := setup(t, open)
		_, cmd := f.submit("cmd")
		_, sh := f.submit("sh", func(j *model.Job) { j.Spec.Command, j.Spec.Shell = nil, "echo" })
		_, email := f.submit("email", func(j *model.Job) { j.Spec.Command, j.Spec.Handler = nil, "email" })
		_, sms := f.submit("sms", func(j *model.Job) { j.Spec.Command, j.Spec.Handler = nil, "sms" })

		cases := []struct {
			name     string
			handlers []string
			commands bool
			want     []string
		}{
			{"handlers only", []string{"email", "push"}, false, []string{email.ID}},
			{"handlers and commands", []string{"sms"}, true, []string{cmd.ID, sh.ID, sms.ID}},
			{"commands only", nil, true, []string{cmd.ID, sh.ID}},
			{"no filter", nil, false, []string{cmd.ID, sh.ID, email.ID, sms.ID}},
		}
		for i, c := range cases {
			ls, err := Leases(f.s.LeaseRuns(f.ctx, &store.LeaseRunsParams{WorkerID: "w", Max: 10, LeaseTTL: time.Minute, Handlers: c.handlers, Commands: c.commands, Now: at(time.Duration(i) * time.Second)}))
			require.NoError(t, err)
			require.Equal(t, c.want, leaseIDs(ls), c.name)
			// Put them back for the next case.
			var cs []store.Completion
			for _, l := range ls {
				cs = append(cs, store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptFailed})
			}
			res, err := f.s.CompleteAttempts(f.ctx, &store.CompleteAttemptsParams{Completions: cs, Now: at(time.Duration(i) * time.Second)})
			require.NoError(t, err)
			for _, r := range res {
				require.NoError(t, r.Err)
				require.Equal(t, model.RunFailed, r.Run.Status)
				_, err := f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: r.Run.ID, Now: t0})
				require.NoError(t, err)
			}
		}
	})

	t.Run("ConcurrentLease", func(t *testing.T) {
		f := setup(t, open)
		const runs, workers = 120, 6
		for q := range 3 {
			j := f.job(fmt.Sprintf("j%d", q), func(j *model.Job) { j.Spec.Queue = fmt.Sprintf("q%d", q) })
			f.createJob(j, nil)
			var batch []*model.Run
			for range runs / 3 {
				batch = append(batch, f.run(j))
			}
			f.createRuns(batch...)
		}
		seen, err := LeaseUntilEmpty(f.ctx, []store.Store{f.s}, workers, 7, t0)
		require.NoError(t, err)
		require.Len(t, seen, runs)
	})

	t.Run("Heartbeat", func(t *testing.T) {
		f := setup(t, open)
		j, _ := f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 2 })
		f.createRuns(f.run(j), f.run(j))
		f.register("w", "s1", t0)
		ls := f.lease("w", 3, t0)
		require.Len(t, ls, 3)
		a, b, c := ls[0], ls[1], ls[2]
		_, err := f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{b.Run.ID}, Now: t0})
		require.NoError(t, err)

		now := at(20 * time.Second)
		hb, err := f.heartbeat(store.Beat{
			WorkerID: "w",
			Held: []store.LeaseRef{
				{RunID: a.Run.ID, Token: a.Token},
				{RunID: b.Run.ID, Token: b.Token},
				{RunID: c.Run.ID, Token: "stale"},
				{RunID: "unknown", Token: "x"},
			},
		}, time.Minute, now)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{c.Run.ID, "unknown"}, hb.Lost)
		require.Equal(t, []string{b.Run.ID}, hb.Cancel)

		require.Equal(t, timep(now.Add(time.Minute)), f.getRun(a.Run.ID).LeaseExpiresAt)
		require.Equal(t, timep(now.Add(time.Minute)), f.getRun(b.Run.ID).LeaseExpiresAt)
		require.Equal(t, timep(at(30*time.Second)), f.getRun(c.Run.ID).LeaseExpiresAt, "a stale token extends nothing")
		w, err := f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "w"})
		require.NoError(t, err)
		require.Equal(t, now, w.LastHeartbeat)

		next, ok, err := f.s.NextLeaseExpiry(f.ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, at(30*time.Second), next)

		// Another worker cannot heartbeat a lease that is not its own.
		f.register("w2", "s1", now)
		hb, err = f.heartbeat(store.Beat{WorkerID: "w2", Held: []store.LeaseRef{{RunID: a.Run.ID, Token: a.Token}}}, time.Hour, now)
		require.NoError(t, err)
		require.Equal(t, []string{a.Run.ID}, hb.Lost)
		require.Equal(t, timep(now.Add(time.Minute)), f.getRun(a.Run.ID).LeaseExpiresAt)

		_, err = f.heartbeat(store.Beat{WorkerID: "nobody"}, time.Minute, now)
		require.ErrorIs(t, err, model.ErrNotFound)
	})

	// One call records the heartbeats of many workers: each beat is answered as it would be
	// alone, a beat of an unknown worker or another session fails alone and changes nothing,
	// and beats of one worker may repeat (a retry that crossed the first).
	t.Run("HeartbeatBatch", func(t *testing.T) {
		f := setup(t, open)
		j, _ := f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 2 })
		f.createRuns(f.run(j), f.run(j), f.run(j))
		f.register("w1", "s1", t0)
		f.register("w2", "s2", t0)
		f.register("w3", "s3", t0)
		require.NoError(t, f.s.SetWorkerState(f.ctx, &store.SetWorkerStateParams{ID: "w3", State: model.WorkerDraining}))
		l1 := f.lease("w1", 2, t0)
		require.Len(t, l1, 2)
		l2 := f.leaseOne("w2", t0)
		l3 := f.leaseOne("w3", t0)
		_, err := f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{l1[1].Run.ID}, Now: t0})
		require.NoError(t, err)
		ref := func(l *model.Lease) store.LeaseRef { return store.LeaseRef{RunID: l.Run.ID, Token: l.Token} }

		now := at(20 * time.Second)
		res, err := f.s.Heartbeat(f.ctx, &store.HeartbeatParams{LeaseTTL: time.Minute, Now: now, Beats: []store.Beat{
			{WorkerID: "w2", Session: "s-old", Held: []store.LeaseRef{ref(l2)}},
			{WorkerID: "w1", Session: "s1", Held: []store.LeaseRef{ref(l1[0]), ref(l1[1]), ref(l2)}},
			{WorkerID: "nobody", Held: []store.LeaseRef{ref(l3)}},
			{WorkerID: "w3", Held: []store.LeaseRef{ref(l3)}},
			{WorkerID: "w1", Held: []store.LeaseRef{ref(l1[0])}},
		}})
		require.NoError(t, err)
		require.Len(t, res, 5)
		require.ErrorIs(t, res[0].Err, model.ErrNotFound, "another session of w2")
		require.NoError(t, res[1].Err)
		require.Equal(t, []string{l2.Run.ID}, res[1].Lost, "w2's lease is not w1's")
		require.Equal(t, []string{l1[1].Run.ID}, res[1].Cancel)
		require.False(t, res[1].Draining)
		require.ErrorIs(t, res[2].Err, model.ErrNotFound, "an unknown worker")
		require.NoError(t, res[3].Err)
		require.Empty(t, res[3].Lost)
		require.True(t, res[3].Draining)
		require.NoError(t, res[4].Err)
		require.Empty(t, res[4].Lost, "w1 again: its lease is valid")
		require.Empty(t, res[4].Cancel)

		renewed := timep(now.Add(time.Minute))
		require.Equal(t, renewed, f.getRun(l1[0].Run.ID).LeaseExpiresAt)
		require.Equal(t, renewed, f.getRun(l1[1].Run.ID).LeaseExpiresAt)
		require.Equal(t, renewed, f.getRun(l3.Run.ID).LeaseExpiresAt)
		require.Equal(t, timep(at(30*time.Second)), f.getRun(l2.Run.ID).LeaseExpiresAt, "w2's beat of another session extends nothing")
		for w, want := range map[string]time.Time{"w1": now, "w2": t0, "w3": now} {
			got, err := f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: w})
			require.NoError(t, err)
			require.Equal(t, want, got.LastHeartbeat, "last heartbeat of %s", w)
		}

		// A batch of nothing changes nothing.
		res, err = f.s.Heartbeat(f.ctx, &store.HeartbeatParams{LeaseTTL: time.Minute, Now: now})
		require.NoError(t, err)
		require.Empty(t, res)
	})

	t.Run("RescueExpired", func(t *testing.T) {
		f := setup(t, open)
		_, ok, err := f.s.NextLeaseExpiry(f.ctx)
		require.NoError(t, err)
		require.False(t, ok)

		// No disruptions: these lost attempts count against the attempts (the disruptions
		// are in the Completion and Wording tests).
		f.submit("retry", func(j *model.Job) {
			j.Spec.Retry = model.RetryPolicy{MaxAttempts: 2, InitialDelay: 10 * time.Second, MaxDisruptions: intp(0)}
		})
		f.submit("once", func(j *model.Job) { j.Spec.Retry.MaxDisruptions = intp(0) })
		f.submit("cancelled", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 5 })
		ls := f.lease("w", 3, t0) // leases expire at t0+30s
		require.Len(t, ls, 3)
		rRetry, rOnce, rCancel := ls[0], ls[1], ls[2]
		_, err = f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{rCancel.Run.ID}, Now: t0})
		require.NoError(t, err)
		// A later lease that has not expired.
		_, fresh := f.submit("fresh")
		lf := f.leaseOne("w", at(time.Minute))
		require.Equal(t, fresh.ID, lf.Run.ID)

		next, ok, err := f.s.NextLeaseExpiry(f.ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, at(30*time.Second), next)

		draws := &randRecorder{u: 0.5}
		rescued, err := f.s.RescueExpired(f.ctx, &store.RescueExpiredParams{Now: at(30 * time.Second), Limit: 10, Rand: draws.fn})
		require.NoError(t, err)
		require.Empty(t, rescued, "a lease expiring at Now is still valid")

		now := at(31 * time.Second)
		rescued, err = f.s.RescueExpired(f.ctx, &store.RescueExpiredParams{Now: now, Limit: 2, Rand: draws.fn})
		require.NoError(t, err)
		require.Len(t, rescued, 2, "at most Limit")
		more, err := f.s.RescueExpired(f.ctx, &store.RescueExpiredParams{Now: now, Limit: 2, Rand: draws.fn})
		require.NoError(t, err)
		require.Len(t, more, 1)
		byID := map[string]*model.Run{}
		for _, r := range append(rescued, more...) {
			byID[r.ID] = r
		}
		require.Len(t, byID, 3)

		// Attempts left: retried after the backoff; the lost attempt counts.
		r := byID[rRetry.Run.ID]
		require.Equal(t, model.RunScheduled, r.Status)
		require.Equal(t, model.PendingRetryBackoff, r.PendingCode)
		require.NotEmpty(t, r.PendingReason)
		require.Equal(t, now.Add(10*time.Second), r.ScheduledFor)
		require.Equal(t, 1, r.Attempt)
		require.Empty(t, r.WorkerID)
		require.Empty(t, r.LeaseToken)
		require.Nil(t, r.LeaseExpiresAt)
		// The run comes with the attempt that ended, as the history has it.
		require.Equal(t, store.Ended(f.getRun(r.ID)), r)
		hist := f.getRun(r.ID).Attempts
		require.Len(t, hist, 1)
		require.Equal(t, model.AttemptLost, hist[0].Status)
		require.Equal(t, "w", hist[0].WorkerID)
		require.Equal(t, timep(now), hist[0].FinishedAt)
		require.Nil(t, hist[0].ExitCode)
		require.Equal(t, 3, draws.draws, "one draw per lost attempt")

		// No attempt left: failed.
		r = byID[rOnce.Run.ID]
		require.Equal(t, model.RunFailed, r.Status)
		require.Equal(t, timep(now), r.FinishedAt)
		require.NotEmpty(t, r.Error)
		// Cancel requested: cancelled.
		r = byID[rCancel.Run.ID]
		require.Equal(t, model.RunCancelled, r.Status)
		require.Equal(t, timep(now), r.FinishedAt)

		// The rescued lease is fenced off.
		res := f.complete(store.Completion{RunID: rRetry.Run.ID, Token: rRetry.Token, Status: model.AttemptSucceeded, ExitCode: intp(0)}, now, nil)
		require.ErrorIs(t, res.Err, model.ErrLeaseLost)
		require.Equal(t, model.RunScheduled, f.getRun(rRetry.Run.ID).Status)

		next, ok, err = f.s.NextLeaseExpiry(f.ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, at(90*time.Second), next)

		// Retried: leased again as attempt 2 once due.
		n, err := f.s.PromoteDue(f.ctx, &store.PromoteDueParams{Now: now.Add(10 * time.Second), Limit: 10})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		l := f.leaseOne("w", now.Add(10*time.Second))
		require.Equal(t, rRetry.Run.ID, l.Run.ID)
		require.Equal(t, 2, l.Run.Attempt)
	})
}
