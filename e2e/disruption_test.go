package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// TestRunSurvivesKillOfItsProcess is issue 11, item 5, end to end: a job with the default
// single attempt is running when `stint dev` (server and worker in one process) is killed
// with SIGKILL; after the restart on the same store the lost attempt is a disruption, not
// the job's failure, and attempt 2 succeeds. The lease TTL is the default (15 s): the
// attempt's lease must outlast the stalls of a loaded machine until the kill (an expiry
// before it would be a disruption of its own), and it bounds the wait for the rescue
// should the restarted worker not take over its old attempts at once.
func TestRunSurvivesKillOfItsProcess(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			args := sc.args(t)
			srv := startServer(t, "dev", args...)
			c := srv.client(t)

			resp, _, err := c.CreateJob(context.Background(), &apitype.JobSpec{Shell: "sleep 1"})
			require.NoError(t, err)
			id := resp.Run.ID
			waitFor(t, 30*time.Second, "run "+id+" running", func() bool {
				r, err := c.GetRun(context.Background(), id)
				return err == nil && r.Status == "running"
			})
			srv.kill() // SIGKILL while the attempt runs

			srv2 := startServer(t, "dev", args...)
			run := waitRun(t, srv2.client(t), id, 60*time.Second)
			require.Equal(t, "succeeded", run.Status, "%+v", run)
			require.Equal(t, 2, run.Attempt)
			require.Equal(t, 1, run.MaxAttempts, "the job's own budget is untouched")
			require.Equal(t, 1, run.Disruptions)
			require.Len(t, run.Attempts, 2)
			require.Equal(t, "lost", run.Attempts[0].Status)
			require.Equal(t, "succeeded", run.Attempts[1].Status)
		})
	}
}

// TestSecondProcessOnOneDataDirIsRefused is issue 11, item 8: a second `stint dev` on the
// data directory of a running one exits non-zero, naming the directory and the holder's
// pid, and the first one goes on serving.
func TestSecondProcessOnOneDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	first := startServer(t, "dev", "--data", dir)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, stintBin, "dev", "--addr", "127.0.0.1:0", "--data", dir).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the second stint dev must fail: %s", out)
	require.NotZero(t, exit.ExitCode())
	require.Contains(t, string(out), fmt.Sprintf("data directory %s is in use by process %d", dir, first.cmd.Process.Pid))

	resp, _, err := first.client(t).CreateJob(context.Background(), &apitype.JobSpec{Shell: "true"})
	require.NoError(t, err)
	require.Equal(t, "succeeded", waitRun(t, first.client(t), resp.Run.ID, 30*time.Second).Status)
}
