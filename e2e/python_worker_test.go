package e2e

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// pyWorker is the example Python worker running as a real process.
type pyWorker struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
	err    error // how the process ended; read after done is closed
}

// python3OrSkip returns the path of python3, or skips the test when it is not installed.
func python3OrSkip(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH: skipping the Python worker end-to-end test")
	}
	return py
}

// startPythonWorker runs examples/python-worker/worker.py with the interpreter py against
// srv, and stops it (SIGTERM, then SIGKILL) at cleanup.
func startPythonWorker(t *testing.T, py string, srv *proc, args ...string) *pyWorker {
	t.Helper()
	script, err := filepath.Abs("../examples/python-worker/worker.py")
	require.NoError(t, err)
	cmd := exec.Command(py, append([]string{script, "--server", srv.url()}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w := &pyWorker{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.stderr, w.stderr
	require.NoError(t, cmd.Start(), "start the Python worker")
	go func() {
		w.err = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-w.done
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything it left behind
		if t.Failed() {
			t.Logf("python worker output:\n%s", w.stderr.String())
		}
	})
	return w
}

// submitSpec creates a one-off job and returns its run id.
func submitSpec(t *testing.T, c *client.Client, spec *apitype.JobSpec) string {
	t.Helper()
	resp, _, err := c.CreateJob(context.Background(), spec)
	require.NoError(t, err)
	require.NotNil(t, resp.Run)
	return resp.Run.ID
}

// runLogs returns one stream ("" for both) of the latest attempt's log.
func runLogs(t *testing.T, c *client.Client, id, stream string) string {
	t.Helper()
	rc, err := c.Logs(context.Background(), id, client.LogsOptions{Stream: stream})
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b)
}

func durOf(d time.Duration) *apitype.Duration { v := apitype.Duration(d); return &v }

// TestPythonWorker runs jobs on the example Python worker against a real `stint server` with
// no local worker, through a worker token: what succeeds here went through the documented
// protocol (docs/worker-protocol.md) from a process that is not Go.
func TestPythonWorker(t *testing.T) {
	t.Parallel()
	py := python3OrSkip(t)
	const workerID = "py-e2e"
	srv := startServer(t, "server", "--data", t.TempDir(), "--worker-token", "e2e-worker-secret")
	w := startPythonWorker(t, py, srv, "--token", "e2e-worker-secret", "--id", workerID, "--slots", "4")
	c := srv.client(t)
	ctx := context.Background()

	waitFor(t, 30*time.Second, "the Python worker to register", func() bool {
		wk, err := c.GetWorker(ctx, workerID)
		return err == nil && wk.State == "active"
	})
	// ranHere checks that the Python worker, and not some other, ran every attempt.
	ranHere := func(t *testing.T, run *apitype.Run) {
		t.Helper()
		require.NotEmpty(t, run.Attempts)
		for _, a := range run.Attempts {
			require.Equal(t, workerID, a.WorkerID)
		}
	}

	t.Run("handler py.echo succeeds and logs its args", func(t *testing.T) {
		id := submitSpec(t, c, &apitype.JobSpec{Handler: "py.echo", Args: json.RawMessage(`{"greeting":"hello","n":3}`)})
		run := waitRun(t, c, id, 30*time.Second)
		require.Equal(t, "succeeded", run.Status, run.Error)
		ranHere(t, run)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(runLogs(t, c, id, "stdout")), &got))
		require.Equal(t, map[string]any{"greeting": "hello", "n": float64(3)}, got)
	})

	t.Run("command gets the job env and stint variables", func(t *testing.T) {
		id := submitSpec(t, c, &apitype.JobSpec{
			Name:    "py-envcheck",
			Command: []string{"sh", "-c", `echo "$STINT_RUN_ID $STINT_ATTEMPT $STINT_JOB $STINT_ARGS $GREETING"; echo to-stderr >&2`},
			Env:     map[string]string{"GREETING": "hi"},
			Args:    json.RawMessage(`{"k":"v"}`),
		})
		run := waitRun(t, c, id, 30*time.Second)
		require.Equal(t, "succeeded", run.Status, run.Error)
		ranHere(t, run)
		require.Equal(t, 0, *run.Attempts[0].ExitCode)
		require.Equal(t, id+` 1 py-envcheck {"k":"v"} hi`+"\n", runLogs(t, c, id, "stdout"))
		require.Equal(t, "to-stderr\n", runLogs(t, c, id, "stderr"))
	})

	t.Run("failing handler is retried then fails", func(t *testing.T) {
		id := submitSpec(t, c, &apitype.JobSpec{Handler: "py.fail",
			Retry: &apitype.RetryPolicy{MaxAttempts: 3, InitialDelay: durOf(10 * time.Millisecond)}})
		run := waitRun(t, c, id, 30*time.Second)
		require.Equal(t, "failed", run.Status)
		require.Contains(t, run.Error, "py.fail always fails")
		require.Len(t, run.Attempts, 3)
		ranHere(t, run)
		for _, a := range run.Attempts {
			require.Equal(t, "failed", a.Status)
			require.Nil(t, a.ExitCode, "a handler has no exit code")
		}
	})

	t.Run("failing command reports its exit code on every attempt", func(t *testing.T) {
		id := submitSpec(t, c, &apitype.JobSpec{Shell: "echo oops >&2; exit 3",
			Retry: &apitype.RetryPolicy{MaxAttempts: 2, InitialDelay: durOf(10 * time.Millisecond)}})
		run := waitRun(t, c, id, 30*time.Second)
		require.Equal(t, "failed", run.Status)
		require.Len(t, run.Attempts, 2)
		ranHere(t, run)
		for _, a := range run.Attempts {
			require.Equal(t, "failed", a.Status)
			require.NotNil(t, a.ExitCode)
			require.Equal(t, 3, *a.ExitCode)
		}
		require.Equal(t, "oops\n", runLogs(t, c, id, ""))
	})

	t.Run("cancel stops the whole process group", func(t *testing.T) {
		pids := filepath.Join(t.TempDir(), "pids")
		// a child and the shell itself; both must be gone after the cancel
		script := "sleep 300 & echo $! > " + pids + ".tmp; echo $$ >> " + pids + ".tmp; mv " + pids + ".tmp " + pids + "; wait"
		id := submitSpec(t, c, &apitype.JobSpec{Shell: script})
		waitFor(t, 30*time.Second, "the job to write its pids", func() bool {
			_, err := os.Stat(pids)
			return err == nil
		})
		_, err := c.CancelRun(ctx, id)
		require.NoError(t, err)
		run := waitRun(t, c, id, 30*time.Second)
		require.Equal(t, "cancelled", run.Status)
		ranHere(t, run)
		require.Equal(t, "cancelled", run.Attempts[0].Status)
		b, err := os.ReadFile(pids)
		require.NoError(t, err)
		fields := strings.Fields(string(b))
		require.Len(t, fields, 2)
		for _, f := range fields {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err)
			waitFor(t, 10*time.Second, "pid "+f+" to exit", func() bool {
				return syscall.Kill(pid, 0) == syscall.ESRCH
			})
		}
	})

	t.Run("timeout ends the attempt as timed_out", func(t *testing.T) {
		id := submitSpec(t, c, &apitype.JobSpec{Command: []string{"sleep", "30"}, Timeout: durOf(300 * time.Millisecond)})
		run := waitRun(t, c, id, 30*time.Second)
		require.Equal(t, "failed", run.Status)
		ranHere(t, run)
		require.Len(t, run.Attempts, 1)
		require.Equal(t, "timed_out", run.Attempts[0].Status)
	})

	t.Run("SIGTERM drains: the running job finishes, then the worker exits", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "started")
		id := submitSpec(t, c, &apitype.JobSpec{Shell: "touch " + marker + "; sleep 1; echo finished"})
		waitFor(t, 30*time.Second, "the job to start", func() bool {
			_, err := os.Stat(marker)
			return err == nil
		})
		require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			t.Fatal("the Python worker did not exit within 30s of SIGTERM")
		}
		require.NoError(t, w.err, "the Python worker exits 0 after a drain")
		run, err := c.GetRun(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "succeeded", run.Status, "the drain let the job finish")
		require.Equal(t, "finished\n", runLogs(t, c, id, ""))
	})
}
