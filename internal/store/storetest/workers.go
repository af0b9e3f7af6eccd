package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
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
		w, lost, err := f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{ID: "w", Session: "s2", Capacity: model.Capacity{Slots: 4}, Now: now, Rand: draws.fn})
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
		require.Equal(t, now, r.ScheduledFor)
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
}
