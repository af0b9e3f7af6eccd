package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

func testWorkers(t *testing.T, open OpenFunc) {
	t.Run("RegisterAndGet", func(t *testing.T) {
		f := setup(t, open)
		_, err := f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "w"})
		require.ErrorIs(t, err, model.ErrNotFound)

		w, lost := f.register("w", "s1", t0)
		require.Empty(t, lost)
		want := &model.Worker{
			ID: "w", Labels: map[string]string{"zone": "a"},
			Capacity: model.Capacity{CPU: 8, MemoryMB: 16384, GPU: 2, Slots: 16},
			Session:  "s1", State: model.WorkerActive, RegisteredAt: t0, LastHeartbeat: t0,
		}
		require.Equal(t, want, w)
		got, err := f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "w"})
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, time.UTC, got.RegisteredAt.Location())

		// Re-registering changes labels and capacity.
		w, _, err = f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{ID: "w", Session: "s1", Labels: map[string]string{"zone": "b"}, Capacity: model.Capacity{Slots: 2}, Now: at(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"zone": "b"}, w.Labels)
		require.Equal(t, model.Capacity{Slots: 2}, w.Capacity)
		require.Equal(t, at(time.Minute), w.LastHeartbeat)

		require.NoError(t, f.s.SetWorkerState(f.ctx, &store.SetWorkerStateParams{ID: "w", State: model.WorkerDraining}))
		got, err = f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "w"})
		require.NoError(t, err)
		require.Equal(t, model.WorkerDraining, got.State)
		require.ErrorIs(t, f.s.SetWorkerState(f.ctx, &store.SetWorkerStateParams{ID: "nobody", State: model.WorkerLost}), model.ErrNotFound)
		require.ErrorIs(t, f.s.SetWorkerState(f.ctx, &store.SetWorkerStateParams{ID: "w", State: model.WorkerDrained, Session: "old"}),
			model.ErrNotFound, "another session: a worker that registered again does not leave")
		require.NoError(t, f.s.SetWorkerState(f.ctx, &store.SetWorkerStateParams{ID: "w", State: model.WorkerDrained, Session: got.Session}))
		got, err = f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "w"})
		require.NoError(t, err)
		require.Equal(t, model.WorkerDrained, got.State)

		// Registering again makes it active.
		w, _ = f.register("w", "s1", at(2*time.Minute))
		require.Equal(t, model.WorkerActive, w.State)
	})

	t.Run("Ping", func(t *testing.T) {
		f := setup(t, open)
		require.NoError(t, f.s.Ping(f.ctx))
	})

	t.Run("RunningAndUsed", func(t *testing.T) {
		f := setup(t, open)
		f.register("w", "s1", t0)
		f.register("v", "s1", t0)
		req := model.Requirements{CPU: 0.5, MemoryMB: 100, GPU: 1}
		j, _ := f.submit("a", func(j *model.Job) { j.Spec.Requirements = req })
		f.createRuns(f.run(j), f.run(j))
		ls := f.lease("w", 2, t0)
		require.Len(t, ls, 2)
		f.leaseOne("v", t0)

		w, err := f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "w"})
		require.NoError(t, err)
		require.Equal(t, 2, w.Running)
		require.Equal(t, model.Capacity{CPU: 1, MemoryMB: 200, GPU: 2, Slots: 2}, w.Used)

		f.finish(ls[0], model.AttemptSucceeded, intp(0), at(time.Second))
		w, err = f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "w"})
		require.NoError(t, err)
		require.Equal(t, 1, w.Running)
		require.Equal(t, model.Capacity{CPU: 0.5, MemoryMB: 100, GPU: 1, Slots: 1}, w.Used)

		ws, err := f.s.ListWorkers(f.ctx)
		require.NoError(t, err)
		require.Len(t, ws, 2)
		require.Equal(t, "v", ws[0].ID)
		require.Equal(t, "w", ws[1].ID)
		require.Equal(t, 1, ws[0].Running)
		require.Equal(t, w, ws[1])
	})

	t.Run("NewSessionLosesAttempts", func(t *testing.T) {
		f := setup(t, open)
		f.register("w", "s1", t0)
		f.register("other", "s1", t0)
		f.submit("disrupted") // the default disruption limit
		f.submit("once", func(j *model.Job) { j.Spec.Retry.MaxDisruptions = intp(0) })
		_, keep := f.submit("keep")
		ls := f.lease("w", 2, t0)
		require.Len(t, ls, 2)
		lo := f.leaseOne("other", t0)
		require.Equal(t, keep.ID, lo.Run.ID)

		// The same session again: nothing is lost.
		_, lost := f.register("w", "s1", at(time.Second))
		require.Empty(t, lost)
		require.Equal(t, model.RunRunning, f.getRun(ls[0].Run.ID).Status)

		// A new session: the old process is gone with its attempts.
		now := at(time.Minute)
		draws := &randRecorder{u: 0}
		w, lost, err := f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{ID: "w", Session: "s2", Capacity: model.Capacity{Slots: 4}, Now: now, Rand: draws.fn, Takeover: true})
		require.NoError(t, err)
		require.Equal(t, "s2", w.Session)
		require.Equal(t, now, w.RegisteredAt)
		require.Zero(t, w.Running)
		byID := map[string]*model.Run{}
		for _, r := range lost {
			byID[r.ID] = r
		}
		require.Len(t, byID, 2)
		r := byID[ls[0].Run.ID]
		require.Equal(t, model.RunQueued, r.Status)
		require.Equal(t, ls[0].Run.ScheduledFor, r.ScheduledFor, "queued again at once: the due time is kept")
		require.Equal(t, 1, r.Disruptions)
		require.Equal(t, 2, draws.draws, "one draw per lost attempt")
		r = byID[ls[1].Run.ID]
		require.Equal(t, model.RunFailed, r.Status)
		require.Equal(t, timep(now), r.FinishedAt)
		for _, l := range ls {
			hist := f.getRun(l.Run.ID).Attempts
			require.Len(t, hist, 1)
			require.Equal(t, model.AttemptLost, hist[0].Status)
			require.Equal(t, "w", hist[0].WorkerID)
			res := f.complete(store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded}, now, nil)
			require.ErrorIs(t, res.Err, model.ErrLeaseLost)
		}
		require.Equal(t, model.RunRunning, f.getRun(keep.ID).Status, "other workers' runs are untouched")
	})
	t.Run("SessionKeepsHandlers", func(t *testing.T) {
		f := setup(t, open)
		_, _, err := f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{ID: "w", Session: "s1",
			Capacity: model.Capacity{Slots: 1}, Handlers: []string{"a", "b"}, Commands: true, Now: t0})
		require.NoError(t, err)
		got, err := f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "w"})
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b"}, got.Handlers, "another server serves the session from these")
		require.True(t, got.Commands)
	})

	t.Run("ResumeKeepsTheSessionAndEndsNothing", func(t *testing.T) {
		f := setup(t, open)
		f.register("w", "s1", t0)
		for _, n := range []string{"a", "b", "c"} {
			f.submit(n)
		}
		ls := f.lease("w", 3, t0)
		require.Len(t, ls, 3)
		require.NoError(t, f.s.SetWorkerState(f.ctx, &store.SetWorkerStateParams{ID: "w", State: model.WorkerDraining}))

		// The worker re-attaches with s1. Whatever leases it lists (the engine renews them),
		// none of its attempts ends: one it does not list may be on its way to it in a lease
		// answer, and is left to expire as a heartbeat leaves it.
		now := at(time.Second)
		w, lost, err := f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{ID: "w", Session: "s2", Resume: "s1",
			Capacity: model.Capacity{Slots: 4}, Now: now})
		require.NoError(t, err)
		require.Equal(t, "s1", w.Session, "the session is kept")
		require.Equal(t, t0, w.RegisteredAt)
		require.Equal(t, model.WorkerDraining, w.State, "a drain request survives the re-attach")
		require.Empty(t, lost)
		for _, l := range ls {
			r := f.getRun(l.Run.ID)
			require.Equal(t, model.RunRunning, r.Status)
			require.Equal(t, l.Token, r.LeaseToken, "same attempt, same fencing token")
			require.Equal(t, l.ExpiresAt, *r.LeaseExpiresAt, "not renewed either")
		}

		// A wrong session starts a new one: the old session's attempts end lost.
		w, lost, err = f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{ID: "w", Session: "s3", Resume: "stale",
			Capacity: model.Capacity{Slots: 4}, Now: now, Takeover: true})
		require.NoError(t, err)
		require.Equal(t, "s3", w.Session)
		require.Equal(t, model.WorkerActive, w.State)
		ids := []string{}
		for _, r := range lost {
			ids = append(ids, r.ID)
			require.Equal(t, scheduler.WorkerRestarted, r.Error)
		}
		require.ElementsMatch(t, []string{ls[0].Run.ID, ls[1].Run.ID, ls[2].Run.ID}, ids)
	})

	t.Run("LiveSessionHeld", func(t *testing.T) {
		f := setup(t, open)
		f.register("w", "s1", t0)
		f.submit("a")
		ls := f.lease("w", 1, t0)
		require.Len(t, ls, 1)
		first := ls[0].Run.ID
		ttl := 15 * time.Second
		register := func(session, resume string, now time.Time, takeover bool) (*model.Worker, []*model.Run, error) {
			return f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{ID: "w", Session: session, Resume: resume,
				Capacity: model.Capacity{Slots: 1}, Now: now, LiveSince: now.Add(-ttl), Takeover: takeover})
		}

		// Another process claims the id while s1 heartbeats: refused, nothing changes.
		now := at(ttl)
		_, _, err := register("intruder", "", now, false)
		require.ErrorIs(t, err, model.ErrConflict)
		require.Contains(t, err.Error(), `worker id "w" is in use by a live session`)
		got, err := f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "w"})
		require.NoError(t, err)
		require.Equal(t, "s1", got.Session)
		require.Equal(t, t0, got.LastHeartbeat, "a refusal is not a heartbeat")
		r := f.getRun(ls[0].Run.ID)
		require.Equal(t, model.RunRunning, r.Status, "the live session keeps its attempt")
		require.Equal(t, ls[0].Token, r.LeaseToken)

		// The session itself re-attaches at any time.
		w, lost, err := register("s9", "s1", now, false)
		require.NoError(t, err)
		require.Equal(t, "s1", w.Session)
		require.Empty(t, lost, "a re-attach ends nothing: the lease it did not list expires")

		// Once the session is silent for longer than the TTL, the id is free.
		f.submit("b")
		ls = f.lease("w", 1, now)
		require.Len(t, ls, 1)
		later := now.Add(ttl + time.Millisecond)
		w, lost, err = register("s2", "", later, false)
		require.NoError(t, err)
		require.Equal(t, "s2", w.Session)
		require.Len(t, lost, 2, "the silent session's attempts are lost: a, which the re-attach left running, and b")
		require.ElementsMatch(t, []string{first, ls[0].Run.ID}, []string{lost[0].ID, lost[1].ID})

		// A proven caller takes a live session over.
		w, _, err = register("s3", "", later, true)
		require.NoError(t, err)
		require.Equal(t, "s3", w.Session)

		// A new worker id is never held.
		_, _, err = f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{ID: "fresh", Session: "x",
			Capacity: model.Capacity{Slots: 1}, Now: later, LiveSince: later.Add(-ttl)})
		require.NoError(t, err)
	})

	t.Run("HeartbeatSessionEndedAndDraining", func(t *testing.T) {
		f := setup(t, open)
		f.register("w", "s1", t0)
		f.submit("a")
		f.submit("b")
		ls := f.lease("w", 2, t0)
		require.Len(t, ls, 2)
		held := []store.LeaseRef{{RunID: ls[0].Run.ID, Token: ls[0].Token}, {RunID: ls[1].Run.ID, Token: ls[1].Token}}
		hb := func(session string) (*store.HeartbeatResult, error) {
			return f.heartbeat(store.Beat{WorkerID: "w", Session: session, Held: held}, time.Minute, at(time.Second))
		}
		_, err := hb("s0")
		require.ErrorIs(t, err, model.ErrNotFound, "another session's heartbeat")
		require.Equal(t, ls[0].ExpiresAt, *f.getRun(ls[0].Run.ID).LeaseExpiresAt, "and it extends nothing")

		// The first completion is recorded before the heartbeat arrives: that lease ended,
		// it was not lost. The second expires and is rescued: lost.
		f.finish(ls[0], model.AttemptSucceeded, intp(0), at(time.Second))
		_, err = f.s.RescueExpired(f.ctx, &store.RescueExpiredParams{Now: at(time.Hour)})
		require.NoError(t, err)
		require.NoError(t, f.s.SetWorkerState(f.ctx, &store.SetWorkerStateParams{ID: "w", State: model.WorkerDraining}))
		res, err := hb("s1")
		require.NoError(t, err)
		require.Equal(t, []string{ls[0].Run.ID}, res.Ended)
		require.Equal(t, []string{ls[1].Run.ID}, res.Lost)
		require.True(t, res.Draining)
		_, err = hb("")
		require.NoError(t, err, "no session: any")
	})
}
