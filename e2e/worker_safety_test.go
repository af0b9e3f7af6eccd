package e2e

import (
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

// The tokens of the safety tests: a job must never see them.
const (
	safetyAPIToken    = "e2e-api-token-must-stay-secret"
	safetyWorkerToken = "e2e-worker-token-must-stay-secret"
)

// safetyWorker is a `stint worker` process of the safety tests.
type safetyWorker struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

// startSafetyWorker runs `stint worker --server srv args...` with the worker token in its
// environment (STINT_TOKEN), and kills it at cleanup.
func startSafetyWorker(t *testing.T, srv *proc, args ...string) *safetyWorker {
	t.Helper()
	cmd := exec.Command(stintBin, append([]string{"worker", "--server", srv.url(), "--slots", "2", "--gpus", "0"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "STINT_TOKEN="+safetyWorkerToken)
	w := &safetyWorker{cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-w.done
		if t.Failed() {
			t.Logf("stint worker output:\n%s", w.out.String())
		}
	})
	return w
}

// startSafetyServer starts `stint mode` with the static tokens of these tests in its
// environment (STINT_API_TOKEN, STINT_WORKER_TOKEN), which its jobs must never see.
func startSafetyServer(t *testing.T, mode string, args ...string) *proc {
	t.Helper()
	return startServerEnv(t, mode, safetyAPIToken,
		[]string{"STINT_API_TOKEN=" + safetyAPIToken, "STINT_WORKER_TOKEN=" + safetyWorkerToken}, args...)
}

// safetyClient is a client of srv holding the API token.
func safetyClient(t *testing.T, srv *proc) *client.Client {
	t.Helper()
	c, err := client.New(srv.url(), client.WithToken(safetyAPIToken))
	require.NoError(t, err)
	return c
}

// TestJobsCannotSeeTokens: a job run by `stint dev`'s local worker, or by a `stint worker`,
// starts from a clean environment. It sees PATH, HOME, what --pass-env names and its own env,
// never the server's STINT_API_TOKEN or STINT_WORKER_TOKEN nor the worker's STINT_TOKEN.
// (Not parallel: it sets E2E_* variables in the test's environment.)
func TestJobsCannotSeeTokens(t *testing.T) {
	t.Setenv("STINT_E2E_PRIVATE", "kept-private")
	const script = `env; echo "job=$JOB_VAR passed=$E2E_PASSED private=${E2E_PRIVATE:-unset}"`
	t.Setenv("E2E_PASSED", "passed-through")
	t.Setenv("E2E_PRIVATE", "kept-private")
	check := func(t *testing.T, c *client.Client) {
		t.Helper()
		id := submitSpec(t, c, &apitype.JobSpec{Shell: script, Env: map[string]string{"JOB_VAR": "own"}})
		run := waitRun(t, c, id, time.Minute)
		require.Equal(t, "succeeded", run.Status, run.Error)
		logs := runLogs(t, c, id, "")
		require.Contains(t, logs, "job=own passed=passed-through private=unset\n")
		require.Contains(t, logs, "PATH=")
		require.NotContains(t, logs, "must-stay-secret", "a token reached the job:\n%s", logs)
		require.NotContains(t, logs, "STINT_E2E_")
	}
	t.Run("stint dev", func(t *testing.T) {
		srv := startSafetyServer(t, "dev", "--data", t.TempDir(), "--pass-env", "E2E_PASSED")
		check(t, safetyClient(t, srv))
	})
	t.Run("stint worker", func(t *testing.T) {
		srv := startSafetyServer(t, "server", "--data", t.TempDir())
		startSafetyWorker(t, srv, "--pass-env", "E2E_PASSED")
		check(t, safetyClient(t, srv))
	})
}

// TestWorkerSafety runs the worker's safety features as users meet them, against `stint
// server` and one `stint worker`.
func TestWorkerSafety(t *testing.T) {
	t.Parallel()
	// The default lease TTL: no lease is meant to expire here, and one that did on a stalled
	// machine would add an attempt the subtests count.
	srv := startSafetyServer(t, "server", "--data", t.TempDir())
	c := srv.client(t)

	t.Run("each attempt gets a fresh work dir, removed afterwards", func(t *testing.T) {
		work := t.TempDir()
		startSafetyWorker(t, srv, "--work-dir", work, "--labels", "pool=work")
		script := `pwd -P; echo data > "$TMPDIR/file"; mkdir -p a/b && touch a/b/c`
		ids := []string{
			submitSpec(t, c, &apitype.JobSpec{Shell: script, Requirements: &apitype.Requirements{Labels: map[string]string{"pool": "work"}}}),
			submitSpec(t, c, &apitype.JobSpec{Shell: script, Requirements: &apitype.Requirements{Labels: map[string]string{"pool": "work"}}}),
		}
		resolved, err := filepath.EvalSymlinks(work)
		require.NoError(t, err)
		dirs := map[string]bool{}
		for _, id := range ids {
			run := waitRun(t, c, id, time.Minute)
			require.Equal(t, "succeeded", run.Status, run.Error)
			dir := strings.TrimSpace(runLogs(t, c, id, ""))
			require.Equal(t, resolved, filepath.Dir(dir))
			require.NoDirExists(t, dir, "removed when the attempt ended")
			dirs[dir] = true
		}
		require.Len(t, dirs, 2, "each attempt had its own")
		entries, err := os.ReadDir(work)
		require.NoError(t, err)
		require.Empty(t, entries)
	})

	t.Run("--allow-commands refuses other executables", func(t *testing.T) {
		startSafetyWorker(t, srv, "--allow-commands", "/bin/sh", "--labels", "pool=allow")
		on := &apitype.Requirements{Labels: map[string]string{"pool": "allow"}}
		marker := filepath.Join(t.TempDir(), "ran")
		refused := submitSpec(t, c, &apitype.JobSpec{Command: []string{"touch", marker}, Requirements: on,
			Retry: &apitype.RetryPolicy{MaxAttempts: 2}})
		allowed := submitSpec(t, c, &apitype.JobSpec{Shell: "echo allowed", Requirements: on})
		run := waitRun(t, c, refused, time.Minute)
		require.Equal(t, "failed", run.Status)
		require.Contains(t, run.Error, "is not allowed on this worker (allowed: /bin/sh)")
		require.Equal(t, 2, run.Attempt, "a failure like any other: retried while attempts remain, then failed")
		require.NoFileExists(t, marker)
		run = waitRun(t, c, allowed, time.Minute)
		require.Equal(t, "succeeded", run.Status, run.Error)
	})

	t.Run("a SIGKILLed worker leaves no process behind", func(t *testing.T) {
		w := startSafetyWorker(t, srv, "--labels", "pool=kill")
		// The shell and its child sleep, in the attempt's process group.
		id := submitSpec(t, c, &apitype.JobSpec{Shell: `sleep 300 & echo $!; echo $$; wait`,
			Requirements: &apitype.Requirements{Labels: map[string]string{"pool": "kill"}}})
		var pids []int
		waitFor(t, time.Minute, "the job's pids in its log", func() bool {
			pids = pids[:0]
			for f := range strings.FieldsSeq(runLogs(t, c, id, "")) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return len(pids) == 2
		})
		for _, pid := range pids {
			require.False(t, gone(pid), "pid %d runs", pid)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		}
		require.NoError(t, syscall.Kill(w.cmd.Process.Pid, syscall.SIGKILL), "kill the worker alone")
		<-w.done
		for _, pid := range pids {
			waitFor(t, 30*time.Second, "pid "+strconv.Itoa(pid)+" gone", func() bool { return gone(pid) })
		}
	})
}

// gone reports whether pid no longer runs: no such process, or a zombie.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}
