package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// A `stint worker` stopped with SIGTERM drains, says it leaves, and is listed as drained at
// once: not active, so a queued run's pending reason does not call it busy (that it is not
// called lost after the lease TTL either is the engine's TestLeftWorkerIsNotBusy).
func TestWorkerLeavesDrained(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "server", "--data", t.TempDir())
	w := startFleetWorker(t, srv, "leaver", nil, apitype.Capacity{CPU: 1, MemoryMB: 512, Slots: 1})
	c := srv.client(t)
	ctx := context.Background()
	waitFor(t, 10*time.Second, "the worker to register", func() bool {
		wk, err := c.GetWorker(ctx, "leaver")
		return err == nil && wk.State == "active"
	})

	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not exit within 30s of SIGTERM")
	}
	wk, err := c.GetWorker(ctx, "leaver")
	require.NoError(t, err)
	require.Equal(t, "drained", wk.State, "as soon as it exited")

	out, errOut, code := cli(t, srv, "submit", "-q", "--shell", "true")
	require.Equal(t, 0, code, errOut)
	run, err := c.GetRun(ctx, out[:len(out)-1])
	require.NoError(t, err)
	require.Equal(t, "no worker is connected", run.PendingReason)

}
