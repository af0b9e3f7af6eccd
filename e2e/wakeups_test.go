package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/worker"
)

// TestWakeAcrossServers runs two servers on one PostgreSQL and a worker polling server B
// alone: jobs submitted to server A start on it at once, because A's NOTIFY wakes the long
// poll parked on B (without it the poll would wait out its 30 s). The
// submit-to-start latency (the run's created_at on A to its started_at on B) is reported.
func TestWakeAcrossServers(t *testing.T) {
	db := freshPostgres(t)
	a := startServer(t, "server", "--store", db, "--data", t.TempDir())
	b := startServer(t, "server", "--store", db, "--data", t.TempDir())
	startFleetWorker(t, b, "on-b", nil, apitype.Capacity{CPU: 1, MemoryMB: 512, Slots: 1})
	ca := a.client(t)
	ctx := context.Background()
	waitFor(t, 30*time.Second, "the worker to register with server B", func() bool {
		list, err := ca.ListWorkers(ctx)
		if err != nil {
			return false
		}
		for _, w := range list.Items {
			if w.ID == "on-b" && w.State == "active" {
				return true
			}
		}
		return false
	})

	var worst time.Duration
	for i := range 5 {
		resp, _, err := ca.CreateJob(ctx, &apitype.JobSpec{Shell: "true"})
		require.NoError(t, err)
		run := waitRun(t, ca, resp.Run.ID, 30*time.Second)
		require.Equal(t, "succeeded", run.Status, "run %d: %+v", i, run)
		require.Len(t, run.Attempts, 1)
		require.Equal(t, "on-b", run.Attempts[0].WorkerID)
		latency := run.Attempts[0].StartedAt.Sub(run.CreatedAt)
		t.Logf("run %d: submitted to A, started by the worker polling B after %s", i, latency)
		worst = max(worst, latency)
	}
	t.Logf("submit-to-start across servers: worst of 5 %s", worst)
	// Unwoken, each run would wait for the poll parked just after the previous run to end
	// (30 s). A third of that tells a wake-up apart on a loaded machine too.
	require.Less(t, worst, worker.DefaultPollWait/3, "a NOTIFY woke the poll on B")
}
