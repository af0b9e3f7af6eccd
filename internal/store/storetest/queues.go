package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func testQueues(t *testing.T, open OpenFunc) {
	t.Run("Upsert", func(t *testing.T) {
		f := setup(t, open)
		_, err := f.s.GetQueue(f.ctx, &store.GetQueueParams{Name: "q"})
		require.ErrorIs(t, err, model.ErrNotFound)

		q, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "q", MaxConcurrency: intp(3), Now: t0})
		require.NoError(t, err)
		want := &model.Queue{
			Name: "q", Priority: 0, MaxConcurrency: 3, Paused: false,
			Depth:     map[model.RunStatus]int{model.RunWaiting: 0, model.RunScheduled: 0, model.RunQueued: 0, model.RunRunning: 0},
			CreatedAt: t0, UpdatedAt: t0,
		}
		require.Equal(t, want, q)

		q, err = f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "q", Priority: intp(-2), Paused: boolp(true), Now: at(time.Hour)})
		require.NoError(t, err)
		want.Priority, want.Paused, want.UpdatedAt = -2, true, at(time.Hour)
		require.Equal(t, want, q, "unset fields stay")

		got, err := f.s.GetQueue(f.ctx, &store.GetQueueParams{Name: "q"})
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, time.UTC, got.UpdatedAt.Location())

		q, err = f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "q", Now: at(2 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, -2, q.Priority)
		require.Equal(t, 3, q.MaxConcurrency)
		require.True(t, q.Paused)
	})

	t.Run("ListAndDepth", func(t *testing.T) {
		f := setup(t, open)
		_, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "zz", Now: t0})
		require.NoError(t, err)
		j, _ := f.submit("a", func(j *model.Job) { j.Spec.Queue = "b" })
		f.createRuns(
			f.run(j),
			f.run(j),
			f.run(j, func(r *model.Run) {
				r.Status, r.ScheduledFor, r.PendingCode = model.RunScheduled, at(time.Hour), model.PendingNotDue
			}),
			f.run(j, func(r *model.Run) { r.Status, r.PendingCode = model.RunWaiting, model.PendingDependencies }),
			f.run(j, func(r *model.Run) { r.Queue = model.DefaultQueue }),
		)
		ls := f.lease("w", 2, t0) // both of b: queues of equal priority go by name
		require.Len(t, ls, 2)
		f.finish(ls[0], model.AttemptSucceeded, intp(0), at(time.Second))

		qs, err := f.s.ListQueues(f.ctx)
		require.NoError(t, err)
		names := make([]string, len(qs))
		for i, q := range qs {
			names[i] = q.Name
		}
		require.Equal(t, []string{"b", model.DefaultQueue, "zz"}, names)
		require.Equal(t, map[model.RunStatus]int{model.RunWaiting: 1, model.RunScheduled: 1, model.RunQueued: 1, model.RunRunning: 1}, qs[0].Depth)
		require.Equal(t, map[model.RunStatus]int{model.RunWaiting: 0, model.RunScheduled: 0, model.RunQueued: 1, model.RunRunning: 0}, qs[1].Depth)
		require.Equal(t, map[model.RunStatus]int{model.RunWaiting: 0, model.RunScheduled: 0, model.RunQueued: 0, model.RunRunning: 0}, qs[2].Depth)

		q, err := f.s.GetQueue(f.ctx, &store.GetQueueParams{Name: "b"})
		require.NoError(t, err)
		require.Equal(t, qs[0], q)
	})

	t.Run("OldestQueued", func(t *testing.T) {
		f := setup(t, open)
		_, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "empty", Now: t0})
		require.NoError(t, err)
		got, err := f.s.OldestQueued(f.ctx)
		require.NoError(t, err)
		require.Empty(t, got, "no queued run, no queue")

		j, _ := f.submit("a", func(j *model.Job) { j.Spec.Queue = "b" })
		f.createRuns(
			// The earliest of b is leased first (higher priority) and then no longer queued.
			f.run(j, func(r *model.Run) { r.ScheduledFor, r.Priority = at(-time.Hour), 5 }),
			// A lower priority does not hide the oldest queued run.
			f.run(j, func(r *model.Run) { r.ScheduledFor, r.Priority = at(-time.Minute), -5 }),
			f.run(j, func(r *model.Run) { r.ScheduledFor = at(-time.Second) }),
			// Not queued: not due yet, or waiting on a dependency.
			f.run(j, func(r *model.Run) {
				r.Status, r.ScheduledFor, r.PendingCode = model.RunScheduled, at(2*time.Hour), model.PendingNotDue
			}),
			f.run(j, func(r *model.Run) {
				r.Status, r.ScheduledFor, r.PendingCode = model.RunWaiting, at(-3*time.Hour), model.PendingDependencies
			}),
			f.run(j, func(r *model.Run) { r.Queue, r.ScheduledFor = model.DefaultQueue, at(-10*time.Second) }),
		)
		got, err = f.s.OldestQueued(f.ctx)
		require.NoError(t, err)
		require.Equal(t, map[string]time.Time{"b": at(-time.Hour), model.DefaultQueue: at(-10 * time.Second)}, got)

		ls := f.lease("w", 1, t0)
		require.Len(t, ls, 1)
		require.Equal(t, "b", ls[0].Run.Queue)
		got, err = f.s.OldestQueued(f.ctx)
		require.NoError(t, err)
		require.Equal(t, at(-time.Minute), got["b"], "a leased run is no longer queued")
		require.Equal(t, time.UTC, got["b"].Location())
	})

	t.Run("RateLimit", func(t *testing.T) {
		f := setup(t, open)
		q, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "mail",
			RateLimit: &model.RateLimit{Rate: 2, Per: time.Minute}, Now: t0})
		require.NoError(t, err)
		require.Equal(t, &model.RateLimit{Rate: 2, Per: time.Minute}, q.RateLimit)
		j := f.job("mail", func(j *model.Job) { j.Spec.Queue = "mail" })
		f.createJob(j, nil)
		for range 5 {
			f.createRuns(f.run(j))
		}
		_, ok, err := f.s.NextQueueTurn(f.ctx, &store.NextQueueTurnParams{Now: t0})
		require.NoError(t, err)
		require.False(t, ok, "turns are free now: nothing to wait for")

		require.Len(t, f.lease("w", 10, t0), 2, "a burst of Rate")
		require.Empty(t, f.lease("w", 10, at(10*time.Second)), "then no turn until Per/Rate later")
		next, ok, err := f.s.NextQueueTurn(f.ctx, &store.NextQueueTurnParams{Now: at(10 * time.Second)})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, at(30*time.Second), next)
		next, ok, err = f.s.NextQueueTurn(f.ctx, &store.NextQueueTurnParams{Now: at(40 * time.Second), After: at(10 * time.Second)})
		require.NoError(t, err)
		require.True(t, ok, "a turn that came since After and is untaken")
		require.Equal(t, at(30*time.Second), next)
		_, ok, err = f.s.NextQueueTurn(f.ctx, &store.NextQueueTurnParams{Now: at(40 * time.Second), After: at(30 * time.Second)})
		require.NoError(t, err)
		require.False(t, ok, "the turn at After is known")
		require.Len(t, f.lease("w", 10, at(30*time.Second)), 1)
		require.Len(t, f.lease("w", 10, at(time.Minute)), 1)

		// Removing the limit frees the rest.
		q, err = f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "mail", RateLimit: &model.RateLimit{}, Now: at(time.Minute)})
		require.NoError(t, err)
		require.Nil(t, q.RateLimit)
		require.Len(t, f.lease("w", 10, at(time.Minute)), 1)
		_, ok, err = f.s.NextQueueTurn(f.ctx, &store.NextQueueTurnParams{Now: at(time.Minute)})
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("RateLimitDueRun", func(t *testing.T) {
		// A due scheduled run waits for its queue's turn as a queued one does: the next
		// turn is reported for it (a lease takes it straight from scheduled).
		f := setup(t, open)
		_, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "mail",
			RateLimit: &model.RateLimit{Rate: 1, Per: time.Minute}, Now: t0})
		require.NoError(t, err)
		j := f.job("mail", func(j *model.Job) { j.Spec.Queue = "mail" })
		f.createJob(j, f.run(j))
		require.Len(t, f.lease("w", 10, t0), 1)
		due := f.createRuns(f.run(j, func(r *model.Run) {
			r.Status, r.ScheduledFor, r.PendingCode = model.RunScheduled, at(10*time.Second), model.PendingNotDue
		}))[0]
		_, ok, err := f.s.NextQueueTurn(f.ctx, &store.NextQueueTurnParams{Now: at(5 * time.Second)})
		require.NoError(t, err)
		require.False(t, ok, "not due yet: no turn to wait for")
		require.Empty(t, f.lease("w", 10, at(20*time.Second)), "due, but the queue's turn is a minute after the last")
		next, ok, err := f.s.NextQueueTurn(f.ctx, &store.NextQueueTurnParams{Now: at(20 * time.Second)})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, at(time.Minute), next)
		require.Equal(t, []string{due.ID}, leaseIDs(f.lease("w", 10, at(time.Minute))))
	})

	t.Run("CommittedBeforeDepth", func(t *testing.T) {
		f := setup(t, open)
		q, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "q", Paused: boolp(true), Now: t0})
		require.NoError(t, err)
		require.True(t, q.Paused)
		j := f.job("a", func(j *model.Job) { j.Spec.Queue = "q" })
		f.createJob(j, f.run(j))
		var visible bool
		q, err = f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "q", Paused: boolp(false), Now: t0, Committed: func() {
			got, err := f.s.GetQueue(f.ctx, &store.GetQueueParams{Name: "q"})
			visible = err == nil && !got.Paused
		}})
		require.NoError(t, err)
		require.True(t, visible, "Committed is called once the change is visible to other readers")
		require.False(t, q.Paused)
		require.Equal(t, 1, q.Depth[model.RunQueued], "the answer still counts the depth")
	})
}
