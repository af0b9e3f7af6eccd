package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// registerSized registers a worker with 8 cpus, 16 GiB, gpus GPUs and labels.
func registerSized(t *testing.T, e *Engine, workerID string, gpus int, labels map[string]string) {
	t.Helper()
	_, err := e.Register(context.Background(), &RegisterParams{
		ID: workerID, Labels: labels, Handlers: []string{"noop"}, Commands: true,
		Capacity: model.Capacity{CPU: 8, MemoryMB: 16384, GPU: gpus, Slots: 4},
	})
	require.NoError(t, err)
}

// registerGPUFleet registers gpu0, gpu1 and gpu2, with 0, 1 and 2 GPUs, in zone us.
func registerGPUFleet(t *testing.T, e *Engine) {
	t.Helper()
	for i, id := range []string{"gpu0", "gpu1", "gpu2"} {
		registerSized(t, e, id, i, map[string]string{"zone": "us"})
	}
}

// queuedRun is a due run of the default queue needing req, as ExplainPending gets it from a
// store that fills Run.Requirements.
func queuedRun(req model.Requirements) *model.Run {
	return &model.Run{ID: "r", Status: model.RunQueued, Queue: model.DefaultQueue, Requirements: req}
}

func TestPendingReasonsOfConstrainedRuns(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	submit(t, e, b, time.Time{}, model.RetryPolicy{}) // the default queue exists
	registerGPUFleet(t, e)

	explain := func(req model.Requirements) *model.Run {
		t.Helper()
		r := queuedRun(req)
		require.NoError(t, e.ExplainPending(ctx, []*model.Run{r}))
		return r
	}

	r := explain(model.Requirements{GPU: 4})
	require.Equal(t, model.PendingNoWorker, r.PendingCode)
	require.Equal(t, "no worker fits: 3 registered, 3 lack gpu >= 4", r.PendingReason)

	r = explain(model.Requirements{GPU: 2, Labels: map[string]string{"zone": "eu"}})
	require.Equal(t, model.PendingNoWorker, r.PendingCode)
	require.Equal(t, "no worker fits: 3 registered, 3 lack label zone=eu, 2 lack gpu >= 2", r.PendingReason)

	r = explain(model.Requirements{CPU: 16})
	require.Equal(t, "no worker fits: 3 registered, 3 lack cpu >= 16", r.PendingReason)

	// Workers fit: the run waits for one of them, best fit first, and no_worker_fits would
	// be wrong.
	r = explain(model.Requirements{GPU: 1})
	require.Equal(t, model.PendingNoWorker, r.PendingCode)
	require.Equal(t, "waiting for a free slot: 2 workers fit (gpu1, gpu2), all busy", r.PendingReason)
	r = explain(model.Requirements{GPU: 2})
	require.Equal(t, model.PendingNoWorker, r.PendingCode)
	require.Equal(t, "waiting for a free slot: 1 worker fits (gpu2), busy", r.PendingReason)

	// Unconstrained runs keep their words.
	r = explain(model.Requirements{})
	require.Equal(t, model.PendingNoWorker, r.PendingCode)
	require.Equal(t, "waiting for a free slot: 3 active workers are busy", r.PendingReason)

	// A draining worker takes no work: only active workers count.
	require.NoError(t, e.DrainWorker(ctx, "gpu2"))
	r = explain(model.Requirements{GPU: 2})
	require.Equal(t, model.PendingNoWorker, r.PendingCode)
	require.Equal(t, "no worker fits: 2 registered, 2 lack gpu >= 2", r.PendingReason)

	// The queue explains the wait first.
	paused := true
	_, err := e.UpdateQueue(ctx, &store.UpdateQueueParams{Name: model.DefaultQueue, Paused: &paused})
	require.NoError(t, err)
	r = explain(model.Requirements{GPU: 4})
	require.Equal(t, model.PendingQueuePaused, r.PendingCode)
}

func TestPendingReasonsReadWorkersOnce(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	submit(t, e, b, time.Time{}, model.RetryPolicy{})
	registerGPUFleet(t, e)
	runs := []*model.Run{queuedRun(model.Requirements{GPU: 4}), queuedRun(model.Requirements{GPU: 1}), queuedRun(model.Requirements{})}
	runs = append(runs, &model.Run{ID: "s", Status: model.RunScheduled, Queue: model.DefaultQueue,
		PendingCode: model.PendingNotDue, PendingReason: "not due until later", Requirements: model.Requirements{GPU: 4}})
	require.NoError(t, e.ExplainPending(context.Background(), runs))
	require.Equal(t, model.PendingNoWorker, runs[0].PendingCode)
	require.Contains(t, runs[1].PendingReason, "2 workers fit (gpu1, gpu2)")
	require.Contains(t, runs[2].PendingReason, "3 active workers are busy")
	require.Equal(t, "not due until later", runs[3].PendingReason, "a run the store explains keeps its reason")
}

// TestPendingReasonsFromTheStore reads the runs back from the store, which keeps their
// requirements, with capacity booked by a running run.
func TestPendingReasonsFromTheStore(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	registerGPUFleet(t, e)
	submitNeeding := func(req model.Requirements) *model.Run {
		t.Helper()
		now := b.clk.Now()
		jobID := id.New(now)
		job := &model.Job{ID: jobID, Namespace: model.DefaultNamespace, Name: jobID, Enabled: true,
			Spec: model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Requirements: req}, CreatedAt: now, UpdatedAt: now}
		res, err := e.SubmitJobs(ctx, []store.NewJob{{Job: job, Run: scheduler.NewRun(id.New(now), job, model.TriggerSubmit, nil, time.Time{}, now)}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		return res[0].Run
	}
	explain := func(run *model.Run) *model.Run {
		t.Helper()
		r := getRun(t, b, run.ID)
		require.NoError(t, e.ExplainPending(ctx, []*model.Run{r}))
		return r
	}

	first := submitNeeding(model.Requirements{GPU: 2})
	require.Len(t, lease(t, e, "gpu2", 1, 0).Leases, 1, "gpu2 takes the 2-GPU run")
	require.Equal(t, model.RunRunning, getRun(t, b, first.ID).Status)

	r := explain(submitNeeding(model.Requirements{GPU: 2}))
	require.Equal(t, model.PendingNoWorker, r.PendingCode)
	require.Equal(t, "no worker has room now: 3 registered, 1 would fit when their running work ends (1 busy, short of gpu >= 2), 2 lack gpu >= 2", r.PendingReason)

	r = explain(submitNeeding(model.Requirements{GPU: 1}))
	require.Equal(t, model.PendingNoWorker, r.PendingCode)
	require.Equal(t, "waiting for a free slot: 1 worker fits (gpu1), busy", r.PendingReason)

	r = explain(submitNeeding(model.Requirements{GPU: 8}))
	require.Equal(t, "no worker fits: 3 registered, 3 lack gpu >= 8", r.PendingReason)
}

// A worker that left is drained at once: no pending reason calls it busy while its last
// heartbeat is still within the lease TTL, and it is not called lost after the TTL.
func TestLeftWorkerIsNotBusy(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	submit(t, e, b, time.Time{}, model.RetryPolicy{})
	reg, err := e.Register(ctx, &RegisterParams{ID: "w", Capacity: model.Capacity{Slots: 1}, Handlers: []string{"noop"}})
	require.NoError(t, err)
	explain := func() string {
		t.Helper()
		r := queuedRun(model.Requirements{})
		require.NoError(t, e.ExplainPending(ctx, []*model.Run{r}))
		return r.PendingReason
	}
	require.Equal(t, "waiting for a free slot: the one active worker is busy", explain())

	require.ErrorIs(t, e.Leave(ctx, "w", "another session"), ErrUnknownWorker, "a later session does not leave")
	require.NoError(t, e.Leave(ctx, "w", reg.Session))
	require.Equal(t, "no worker is connected", explain(), "within the lease TTL of its last heartbeat")
	w, err := e.Worker(ctx, "w")
	require.NoError(t, err)
	require.Equal(t, model.WorkerDrained, w.State)
	_, err = e.Lease(ctx, "w", &LeaseParams{Max: 1})
	require.ErrorIs(t, err, ErrUnknownWorker, "its session is over")
	_, err = e.Lease(ctx, "w", &LeaseParams{Max: 1, Session: reg.Session})
	require.ErrorIs(t, err, ErrUnknownWorker, "on any server")

	b.clk.Set(b.clk.Now().Add(time.Hour))
	w, err = e.Worker(ctx, "w")
	require.NoError(t, err)
	require.Equal(t, model.WorkerDrained, w.State, "drained, not lost")
}
