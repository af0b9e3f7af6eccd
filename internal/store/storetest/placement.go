package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// testPlacement checks that runs are leased only to workers they fit (labels, and capacity
// left after the worker's running runs), best fit first, and that what does not fit is
// skipped rather than blocking what follows (invariant 5).
func testPlacement(t *testing.T, open OpenFunc) {
	t.Run("FitsLabelsAndFreeCapacity", func(t *testing.T) {
		f := setup(t, open)
		f.registerWith("w", map[string]string{"zone": "eu", "disk": "ssd"}, model.Capacity{CPU: 4, MemoryMB: 4096, GPU: 2, Slots: 16}, t0)
		need := func(name string, prio int, req model.Requirements) *model.Run {
			_, r := f.submit(name, func(j *model.Job) { j.Spec.Requirements = req; j.Spec.Priority = prio })
			return r
		}
		// The first three can never fit w (or not now) and come first in lease order: they
		// must not hold back the rest.
		other := need("other-zone", 9, model.Requirements{Labels: map[string]string{"zone": "us"}})
		big := need("too-many-gpus", 9, model.Requirements{GPU: 4})
		huge := need("too-much-memory", 9, model.Requirements{MemoryMB: 8192})
		g1 := need("gpu-a", 5, model.Requirements{GPU: 1, Labels: map[string]string{"zone": "eu"}})
		g2 := need("gpu-b", 4, model.Requirements{GPU: 1, CPU: 1})
		g3 := need("gpu-c", 3, model.Requirements{GPU: 1}) // no GPU left after g1 and g2
		cpu := need("cpu", 2, model.Requirements{CPU: 3})  // 3 of the 3 cpus left
		plain := need("plain", 1, model.Requirements{})
		labels := need("ssd", 0, model.Requirements{Labels: map[string]string{"disk": "ssd", "zone": "eu"}})

		got := f.lease("w", 16, t0)
		require.Equal(t, []string{g1.ID, g2.ID, cpu.ID, plain.ID, labels.ID}, leaseIDs(got))
		require.Equal(t, model.Requirements{GPU: 1, Labels: map[string]string{"zone": "eu"}}, got[0].Run.Requirements)
		w, err := f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "w"})
		require.NoError(t, err)
		require.Equal(t, model.Capacity{CPU: 4, MemoryMB: 0, GPU: 2, Slots: 5}, w.Used)

		// Full: another call takes nothing; g3 waits for a GPU, the others for good.
		require.Empty(t, f.lease("w", 16, at(time.Second)))
		for _, r := range []*model.Run{other, big, huge, g3} {
			require.Equal(t, model.RunQueued, f.getRun(r.ID).Status, r.JobName)
		}
		// A GPU freed is a GPU to lease.
		f.finish(got[0], model.AttemptSucceeded, intp(0), at(2*time.Second))
		require.Equal(t, []string{g3.ID}, leaseIDs(f.lease("w", 16, at(3*time.Second))))
	})

	t.Run("UnregisteredWorkerTakesOnlyUnconstrained", func(t *testing.T) {
		f := setup(t, open)
		f.submit("cpu", func(j *model.Job) { j.Spec.Requirements = model.Requirements{CPU: 0.1} })
		_, plain := f.submit("plain")
		require.Equal(t, []string{plain.ID}, leaseIDs(f.lease("ghost", 10, t0)))
	})

	t.Run("RunsKeepTheirRequirements", func(t *testing.T) {
		f := setup(t, open)
		f.registerWith("w", nil, model.Capacity{CPU: 1, Slots: 4}, t0)
		j, r := f.submit("job", func(j *model.Job) { j.Spec.Requirements = model.Requirements{CPU: 4} })
		// The job now asks less; its queued run still asks what it asked when created.
		j.Spec.Requirements = model.Requirements{CPU: 1}
		_, err := f.s.UpdateJob(f.ctx, &store.UpdateJobParams{ID: j.ID, Spec: j.Spec, Enabled: true, Now: at(time.Second)})
		require.NoError(t, err)
		require.Empty(t, f.lease("w", 4, at(time.Second)))
		require.Equal(t, model.Requirements{CPU: 4}, f.getRun(r.ID).Requirements)
		next := f.createRuns(f.run(j))[0]
		require.Equal(t, model.Requirements{CPU: 1}, next.Requirements)
		require.Equal(t, []string{next.ID}, leaseIDs(f.lease("w", 4, at(2*time.Second))))
	})

	t.Run("BestFitHold", func(t *testing.T) {
		f := setup(t, open)
		f.registerWith("gpu-box", nil, model.Capacity{CPU: 8, MemoryMB: 8192, GPU: 4, Slots: 8}, t0)
		f.registerWith("cpu-box", nil, model.Capacity{CPU: 8, MemoryMB: 8192, Slots: 8}, t0)
		f.registerWith("dead-box", nil, model.Capacity{CPU: 1, MemoryMB: 1024, Slots: 8}, t0.Add(-time.Hour))
		_, cpuJob := f.submit("cpu", func(j *model.Job) { j.Spec.Requirements = model.Requirements{CPU: 1} })
		_, plain := f.submit("plain")
		hold := 2 * time.Second
		lease := func(worker string, now time.Time) *store.Leased {
			l, err := f.s.LeaseRuns(f.ctx, &store.LeaseRunsParams{WorkerID: worker, Max: 8, LeaseTTL: time.Minute, Now: now,
				BestFitHold: hold, LiveSince: now.Add(-time.Minute)})
			require.NoError(t, err)
			return l
		}
		// The GPU box asks first: the cpu job fits cpu-box better (dead-box, tighter still,
		// is not live) and waits for it; unconstrained work goes to whoever asks.
		got := lease("gpu-box", at(time.Second))
		require.Equal(t, []string{plain.ID}, leaseIDs(got.Leases))
		require.Equal(t, t0.Add(hold), got.HeldUntil)
		got = lease("cpu-box", at(1500*time.Millisecond))
		require.Equal(t, []string{cpuJob.ID}, leaseIDs(got.Leases))
		require.True(t, got.HeldUntil.IsZero())

		// Once the hold is over, the first worker that fits takes it.
		_, late := f.submit("late", func(j *model.Job) { j.Spec.Requirements = model.Requirements{CPU: 1} })
		require.Empty(t, lease("gpu-box", at(time.Second)).Leases)
		require.Equal(t, []string{late.ID}, leaseIDs(lease("gpu-box", at(3*time.Second)).Leases))
	})

	t.Run("SameWorkerConcurrentlyNeverOverbooks", func(t *testing.T) {
		f := setup(t, open)
		f.registerWith("w", nil, model.Capacity{CPU: 2, GPU: 3, Slots: 64}, t0)
		for i := range 12 {
			f.submit(fmt.Sprintf("g%d", i), func(j *model.Job) { j.Spec.Requirements = model.Requirements{GPU: 1, CPU: 0.5} })
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int
		)
		for range 6 {
			wg.Go(func() {
				l, err := f.s.LeaseRuns(f.ctx, &store.LeaseRunsParams{WorkerID: "w", Max: 4, LeaseTTL: time.Minute, Now: t0})
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				total += len(l.Leases)
				mu.Unlock()
			})
		}
		wg.Wait()
		require.Equal(t, 3, total, "three GPUs, three runs")
		w, err := f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "w"})
		require.NoError(t, err)
		require.Equal(t, 3, w.Used.GPU)
		require.InDelta(t, 1.5, w.Used.CPU, 1e-9)
	})
}

// registerWith registers worker w with labels and capacity at now.
func (f *fx) registerWith(w string, labels map[string]string, c model.Capacity, now time.Time) {
	f.t.Helper()
	_, _, err := f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{ID: w, Session: "s", Labels: labels, Capacity: c, Now: now})
	require.NoError(f.t, err)
}

// assertNoError reports err from a goroutine other than the test's.
func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}
