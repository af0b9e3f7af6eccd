package e2e

import (
	"bufio"
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

// cli runs the stint binary against srv and returns stdout, stderr and the exit code.
func cli(t *testing.T, srv *proc, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(stintBin, args...)
	cmd.Env = stintEnv("STINT_SERVER="+srv.url(), "STINT_TOKEN="+srv.token)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err, "run stint %v", args)
	}
	return stdout.String(), stderr.String(), code
}

// TestCLIUserJourney drives `stint dev` the way the README tells a newcomer to: submit,
// wait, read logs, list failures, retry, cancel, with real commands in real processes.
func TestCLIUserJourney(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "dev", "--data", t.TempDir())

	t.Run("submit shell and read its logs", func(t *testing.T) {
		out, errOut, code := cli(t, srv, "submit", "--wait", "--shell", "echo hi | tr a-z A-Z")
		require.Equal(t, 0, code, "stdout %s stderr %s", out, errOut)
		require.Equal(t, "HI\n", out, "--wait prints the run's output, as docker run does")
		id := runIDFrom(t, errOut)
		require.Contains(t, errOut, "run "+id+" succeeded (attempt 1/1)\n", "and how it ended, on stderr")
		logs, _, code := cli(t, srv, "logs", id)
		require.Equal(t, 0, code)
		require.Equal(t, "HI\n", logs)
	})

	t.Run("environment of a job", func(t *testing.T) {
		out, errOut, code := cli(t, srv, "submit", "--wait", "--name", "envcheck", "--arg", "k=v", "--",
			"sh", "-c", `echo "$STINT_RUN_ID $STINT_ATTEMPT $STINT_JOB $STINT_ARGS"`)
		require.Equal(t, 0, code, errOut)
		id := runIDFrom(t, errOut)
		require.Equal(t, id+" 1 envcheck {\"k\":\"v\"}\n", out)
		logs, _, _ := cli(t, srv, "logs", id)
		require.Equal(t, id+" 1 envcheck {\"k\":\"v\"}\n", logs)
	})

	t.Run("failure is retried then dead, and listed", func(t *testing.T) {
		out, errOut, code := cli(t, srv, "submit", "--wait", "--retries", "1", "--backoff", "50ms", "--shell", "echo oops >&2; exit 3")
		require.Equal(t, 1, code, "a failed run exits 1")
		require.Empty(t, out)
		require.Contains(t, errOut, "oops\n", "the last attempt's stderr, on stderr")
		id := runIDFrom(t, errOut)
		js, _, code := cli(t, srv, "runs", "list", "--status", "failed", "--json")
		require.Equal(t, 0, code)
		var list apitype.RunList
		require.NoError(t, json.Unmarshal([]byte(js), &list))
		require.Len(t, list.Items, 1)
		require.Equal(t, id, list.Items[0].ID)

		js, _, _ = cli(t, srv, "runs", "get", id, "--json")
		var run apitype.Run
		require.NoError(t, json.Unmarshal([]byte(js), &run))
		require.Len(t, run.Attempts, 2, "two attempts recorded")
		for _, a := range run.Attempts {
			require.Equal(t, "failed", a.Status)
			require.Equal(t, 3, *a.ExitCode)
		}
		logs, _, _ := cli(t, srv, "logs", id, "--attempt", "1")
		require.Equal(t, "oops\n", logs, "each attempt keeps its own log")

		_, _, code = cli(t, srv, "retry", id)
		require.Equal(t, 0, code)
		c := srv.client(t)
		run2 := waitRun(t, c, id, 30*time.Second)
		require.Equal(t, "failed", run2.Status)
		require.Len(t, run2.Attempts, 3, "the manual retry added an attempt")
	})

	t.Run("timeout kills the job", func(t *testing.T) {
		_, errOut, code := cli(t, srv, "submit", "--wait", "--timeout", "300ms", "--", "sleep", "30")
		require.Equal(t, 1, code)
		id := runIDFrom(t, errOut)
		run := waitRun(t, srv.client(t), id, 10*time.Second)
		require.Equal(t, "failed", run.Status)
		require.Equal(t, "timed_out", run.Attempts[0].Status)
	})

	t.Run("wait timeout leaves the run going", func(t *testing.T) {
		_, errOut, code := cli(t, srv, "submit", "--wait", "--wait-timeout", "500ms", "--", "sleep", "30")
		require.Equal(t, 7, code, errOut)
		require.Contains(t, errOut, "stopped waiting after 500ms (--wait-timeout)")
		id := runIDFrom(t, errOut)
		run, err := srv.client(t).GetRun(context.Background(), id)
		require.NoError(t, err)
		require.False(t, client.Finished(run), "the run goes on")
		_, _, code = cli(t, srv, "cancel", id)
		require.Equal(t, 0, code)
	})

	t.Run("cancel stops the whole process group", func(t *testing.T) {
		pids := filepath.Join(t.TempDir(), "pids")
		// a child and a grandchild; both must be gone after the cancel
		script := "sleep 300 & echo $! > " + pids + ".tmp; echo $$ >> " + pids + ".tmp; mv " + pids + ".tmp " + pids + "; wait"
		out, _, code := cli(t, srv, "submit", "-q", "--shell", script)
		require.Equal(t, 0, code)
		id := strings.TrimSpace(out)
		waitFor(t, 10*time.Second, "the job to write its pids", func() bool {
			_, err := os.Stat(pids)
			return err == nil
		})
		_, _, code = cli(t, srv, "cancel", id)
		require.Equal(t, 0, code)
		run := waitRun(t, srv.client(t), id, 15*time.Second)
		require.Equal(t, "cancelled", run.Status)
		b, err := os.ReadFile(pids)
		require.NoError(t, err)
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err)
			waitFor(t, 10*time.Second, "pid "+f+" to exit", func() bool {
				return syscall.Kill(pid, 0) == syscall.ESRCH
			})
		}
	})

	t.Run("logs follow streams until the attempt ends", func(t *testing.T) {
		out, _, code := cli(t, srv, "submit", "-q", "--shell", "for i in 1 2 3; do echo line$i; sleep 0.2; done")
		require.Equal(t, 0, code)
		logs, _, code := cli(t, srv, "logs", "-f", strings.TrimSpace(out))
		require.Equal(t, 0, code)
		require.Equal(t, "line1\nline2\nline3\n", logs)
	})

	t.Run("logs: the last lines then what comes, with times", func(t *testing.T) {
		gate := filepath.Join(t.TempDir(), "go-on")
		before := time.Now().Add(-time.Second) // the server's clock is this machine's
		out, _, code := cli(t, srv, "submit", "-q", "--shell",
			`printf 'a\nb\nc\n'; while [ ! -e "$GATE" ]; do sleep 0.05; done; echo d`, "--env", "GATE="+gate)
		require.Equal(t, 0, code)
		id := strings.TrimSpace(out)
		waitFor(t, 30*time.Second, "the first lines to be stored", func() bool {
			logs, _, _ := cli(t, srv, "logs", id)
			return logs == "a\nb\nc\n"
		})
		logs, _, code := cli(t, srv, "logs", id, "--tail", "2")
		require.Equal(t, 0, code)
		require.Equal(t, "b\nc\n", logs)

		// -f --tail 1 --timestamps: c, stamped, then d once the job writes it, then the end.
		cmd := exec.Command(stintBin, "logs", id, "-f", "--tail", "1", "--timestamps")
		cmd.Env = stintEnv("STINT_SERVER="+srv.url(), "STINT_TOKEN="+srv.token)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		rd := bufio.NewReader(stdout)
		stampOf := func(line, text string) time.Time {
			t.Helper()
			stamp, rest, ok := strings.Cut(line, " ")
			require.True(t, ok, "%q", line)
			require.Equal(t, text+"\n", rest)
			require.Len(t, stamp, len("2030-01-02T15:04:05.123456789Z"), "fixed width: %q", stamp)
			at, err := time.Parse(time.RFC3339Nano, stamp)
			require.NoError(t, err)
			require.Equal(t, time.UTC, at.Location())
			return at
		}
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		atC := stampOf(line, "c")
		require.NoError(t, os.WriteFile(gate, nil, 0o600))
		line, err = rd.ReadString('\n')
		require.NoError(t, err)
		atD := stampOf(line, "d")
		rest, err := io.ReadAll(rd)
		require.NoError(t, err)
		require.Empty(t, string(rest), "the stream ends with the attempt")
		require.NoError(t, cmd.Wait(), "exit 0")
		require.False(t, atC.Before(before), "c came after the submission: %s", atC)
		require.False(t, atD.Before(atC), "d came after c: %s, %s", atC, atD)
		require.False(t, atD.After(time.Now()), "d came before now: %s", atD)
	})

	t.Run("bad input names the field", func(t *testing.T) {
		_, errOut, code := cli(t, srv, "submit", "--priority", "5000", "--shell", "true")
		require.Equal(t, 2, code, "a refused field is bad input")
		require.Contains(t, errOut, "priority")
	})

	t.Run("exit codes say what happened", func(t *testing.T) {
		_, _, code := cli(t, srv, "runs", "get", "01jd3x5k8q9r2s4t6v8w0y2z4a")
		require.Equal(t, 3, code, "not found")
		out, _, code := cli(t, srv, "submit", "-q", "--wait", "--shell", "true")
		require.Equal(t, 0, code)
		_, errOut, code := cli(t, srv, "logs", strings.TrimSpace(out), "--attempt", "5")
		require.Equal(t, 3, code, "an attempt never made: %s", errOut)
	})

	t.Run("lists: last runs, namespaces", func(t *testing.T) {
		out, _, code := cli(t, srv, "submit", "-q", "--wait", "--name", "lastrun", "--shell", "true")
		require.Equal(t, 0, code)
		runID := strings.TrimSpace(out)
		js, _, code := cli(t, srv, "jobs", "list", "-o", "json")
		require.Equal(t, 0, code)
		var jobs apitype.JobList
		require.NoError(t, json.Unmarshal([]byte(js), &jobs))
		found := false
		for _, j := range jobs.Items {
			require.NotNil(t, j.LastRun, "job %s has a run: the list says so", j.Name)
			if j.Name == "lastrun" {
				found = true
				require.Equal(t, runID, j.LastRun.ID)
				require.Equal(t, "succeeded", j.LastRun.Status)
			}
		}
		require.True(t, found)
		table, _, _ := cli(t, srv, "jobs", "list")
		require.Regexp(t, `lastrun .* succeeded `, table)

		js, _, code = cli(t, srv, "runs", "list", "--namespace", "nonexistent", "-o", "json")
		require.Equal(t, 0, code)
		var runs apitype.RunList
		require.NoError(t, json.Unmarshal([]byte(js), &runs))
		require.Empty(t, runs.Items, "no run of another namespace is listed")
		js, _, _ = cli(t, srv, "runs", "list", "--namespace", "default", "-o", "json")
		require.NoError(t, json.Unmarshal([]byte(js), &runs))
		require.NotEmpty(t, runs.Items)
	})
}

// runIDFrom finds the run id in submit's human output ("run ID STATUS ...").
func runIDFrom(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "run" {
			return f[1]
		}
	}
	t.Fatalf("no run id in %q", out)
	return ""
}
