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

// registerWith registers a noop worker with capacity and labels.
func registerWith(t *testing.T, e *Engine, workerID string, c model.Capacity, labels map[string]string) {
	t.Helper()
	_, err := e.Register(context.Background(), &RegisterParams{ID: workerID, Capacity: c, Labels: labels, Handlers: []string{"noop"}})
	require.NoError(t, err)
}

// submitNeeding creates a noop job needing req with one run due now.
func submitNeeding(t *testing.T, e *Engine, b *testBundle, req model.Requirements) *model.Run {
	t.Helper()
	now := b.clk.Now()
	jobID := id.New(now)
	job := &model.Job{
		ID: jobID, Namespace: model.DefaultNamespace, Name: jobID, Enabled: true,
		Spec:      model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Requirements: req, Retry: model.RetryPolicy{MaxAttempts: 1}},
		CreatedAt: now, UpdatedAt: now,
	}
	res, err := e.SubmitJobs(context.Background(), []store.NewJob{{Job: job, Run: scheduler.NewRun(id.New(now), job, model.TriggerSubmit, nil, time.Time{}, now)}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	return res[0].Run
}

func TestLeaseCarriesRequirements(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	registerWith(t, e, "w", model.Capacity{CPU: 4, MemoryMB: 1024, GPU: 2, Slots: 4}, map[string]string{"zone": "eu"})
	req := model.Requirements{CPU: 1, GPU: 2, Labels: map[string]string{"zone": "eu"}}
	r := submitNeeding(t, e, b, req)
	resp := lease(t, e, "w", 4, 0)
	require.Len(t, resp.Leases, 1)
	require.Equal(t, r.ID, resp.Leases[0].Run.ID)
	require.Equal(t, model.Requirements{CPU: 1, GPU: 2, Labels: map[string]string{"zone": "eu"}}, resp.Leases[0].Run.Requirements)
}

// A young run that another live worker fits better is not handed to the worker that asks
// first; its long poll is woken when the hold ends, and takes it then.
func TestLeaseHeldForBestFitWakesWhenHoldEnds(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	registerWith(t, e, "gpu-box", model.Capacity{CPU: 8, MemoryMB: 8192, GPU: 4, Slots: 4}, nil)
	registerWith(t, e, "cpu-box", model.Capacity{CPU: 8, MemoryMB: 8192, Slots: 4}, nil)
	r := submitNeeding(t, e, b, model.Requirements{CPU: 1})

	got := make(chan *LeaseResult, 1)
	go func() { got <- lease(t, e, "gpu-box", 4, time.Hour) }()
	holdEnds := t0.Add(DefaultBestFitHold)
	waitTimer(t, b, holdEnds)
	select {
	case resp := <-got:
		t.Fatalf("gpu-box got %d leases before the hold ended", len(resp.Leases))
	default:
	}
	b.clk.Set(holdEnds)
	resp := pollAnswer(t, got, "the poll was not woken when the hold ended")
	require.Len(t, resp.Leases, 1)
	require.Equal(t, r.ID, resp.Leases[0].Run.ID)
}

func TestLeaseBestFitGoesToTheTighterWorker(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	registerWith(t, e, "gpu-box", model.Capacity{CPU: 8, MemoryMB: 8192, GPU: 4, Slots: 4}, nil)
	registerWith(t, e, "cpu-box", model.Capacity{CPU: 8, MemoryMB: 8192, Slots: 4}, nil)
	cpuRun := submitNeeding(t, e, b, model.Requirements{CPU: 1})
	gpuRun := submitNeeding(t, e, b, model.Requirements{GPU: 1})
	resp := lease(t, e, "gpu-box", 4, 0)
	require.Len(t, resp.Leases, 1)
	require.Equal(t, gpuRun.ID, resp.Leases[0].Run.ID)
	resp = lease(t, e, "cpu-box", 4, 0)
	require.Len(t, resp.Leases, 1)
	require.Equal(t, cpuRun.ID, resp.Leases[0].Run.ID)
}

// An attempt that ends frees the capacity it booked: a poll parked because the next run
// did not fit is woken, though no run became queued.
func TestLeaseWokenWhenCapacityFrees(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	registerWith(t, e, "w", model.Capacity{CPU: 2, Slots: 4}, nil)
	one := submitNeeding(t, e, b, model.Requirements{CPU: 2})
	other := submitNeeding(t, e, b, model.Requirements{CPU: 2})
	resp := lease(t, e, "w", 4, 0)
	require.Len(t, resp.Leases, 1)
	second := other
	if resp.Leases[0].Run.ID != one.ID {
		second = one
	}

	got := make(chan *LeaseResult, 1)
	go func() { got <- lease(t, e, "w", 3, time.Hour) }()
	waitTimer(t, b, t0.Add(e.cfg.MaxLeaseWait)) // parked: second does not fit
	complete(t, e, resp.Leases[0], model.AttemptSucceeded)
	resp = pollAnswer(t, got, "the parked poll was not woken when capacity freed")
	require.Len(t, resp.Leases, 1)
	require.Equal(t, second.ID, resp.Leases[0].Run.ID)
}
