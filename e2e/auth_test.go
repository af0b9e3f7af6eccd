package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// printedToken is the line on which a fresh server prints its first admin token.
var printedToken = regexp.MustCompile(`(?m)^\s+(stint_[a-z2-7]{52})\s*$`)

// runWorker runs `stint worker` against srv with token in STINT_TOKEN (never on its
// command line) and returns it running.
func runWorker(t *testing.T, srv *proc, token string, args ...string) *fleetWorker {
	t.Helper()
	cmd := exec.Command(stintBin, append([]string{"worker", "--server", srv.url(), "--log-level", "info"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = stintEnv("STINT_TOKEN=" + token)
	w := &fleetWorker{cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		w.kill()
		if t.Failed() {
			t.Logf("stint worker output:\n%s", w.out.String())
		}
	})
	return w
}

// TestServerAuth starts a real `stint server` on a fresh data directory with no token at all,
// as an operator would the first time, and goes through what issue 12 promises: the server
// prints a first admin token; a request without a token is 401; a viewer token reads but
// cannot submit; a worker token bound to w1 cannot register as w2 and runs jobs as w1.
func TestServerAuth(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	srv := startServerEnv(t, "server", "", nil, "--data", data)
	m := printedToken.FindStringSubmatch(srv.stderr.String())
	require.NotNil(t, m, "a fresh server prints its first admin token:\n%s", srv.stderr.String())
	srv.token = m[1]
	require.Contains(t, srv.stderr.String(), "shown only this once")
	admin := srv.client(t)
	ctx := context.Background()

	anon, err := client.New(srv.url())
	require.NoError(t, err)
	_, _, err = anon.CreateJob(ctx, &apitype.JobSpec{Shell: "echo hi"})
	require.Equal(t, http.StatusUnauthorized, client.StatusCode(err), "an unauthenticated submit: %v", err)
	require.NoError(t, anon.Health(ctx), "health stays open")

	// The admin makes a viewer token with the CLI; the secret is stdout's only line.
	out, errOut, code := cli(t, srv, "tokens", "create", "--role", "viewer", "--name", "ci")
	require.Zero(t, code, errOut)
	viewerToken := strings.TrimSpace(out)
	require.True(t, strings.HasPrefix(viewerToken, "stint_"), out)
	require.Contains(t, errOut, "shown only this once")
	viewer, err := client.New(srv.url(), client.WithToken(viewerToken))
	require.NoError(t, err)
	_, _, err = viewer.CreateJob(ctx, &apitype.JobSpec{Shell: "echo hi"})
	require.Equal(t, http.StatusForbidden, client.StatusCode(err), "a viewer cannot submit: %v", err)
	created, _, err := admin.CreateJob(ctx, &apitype.JobSpec{Name: "greet", Shell: "echo hello from w1"})
	require.NoError(t, err)
	run := created.Run
	got, err := viewer.GetJob(ctx, created.Job.ID)
	require.NoError(t, err, "a viewer reads")
	require.Equal(t, "greet", got.Name)

	// A worker token bound to w1: refused as w2, runs the job as w1.
	out, errOut, code = cli(t, srv, "tokens", "create", "--role", "worker", "--name", "w1", "--worker-id", "w1")
	require.Zero(t, code, errOut)
	w1Token := strings.TrimSpace(out)
	impostor := runWorker(t, srv, w1Token, "--id", "w2")
	select {
	case <-impostor.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("a worker token for w1 registering as w2 should be refused for good:\n%s", impostor.out.String())
	}
	require.Contains(t, impostor.out.String(), "may act only as worker")
	require.NotZero(t, impostor.cmd.ProcessState.ExitCode())
	_, err = admin.GetWorker(ctx, "w2")
	require.True(t, client.IsNotFound(err), "w2 never registered: %v", err)

	runWorker(t, srv, w1Token, "--id", "w1", "--slots", "1")
	done := waitRun(t, viewer, run.ID, 30*time.Second)
	require.Equal(t, "succeeded", done.Status, done.Error)
	require.Equal(t, "w1", done.Attempts[0].WorkerID)
	logs, errOut, code := cli(t, &proc{addr: srv.addr, token: viewerToken}, "logs", run.ID)
	require.Zero(t, code, errOut)
	require.Equal(t, "hello from w1\n", logs, "w1's chunks carried its lease token and were stored")

	// The token list shows three tokens and no secret.
	out, errOut, code = cli(t, srv, "tokens", "list")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "bootstrap")
	require.NotContains(t, out, srv.token)
	require.NotContains(t, out, viewerToken)

	// A restart on the same data directory prints no new token: the store has some.
	srv.kill()
	again := startServerEnv(t, "server", srv.token, nil, "--data", data)
	require.Nil(t, printedToken.FindStringSubmatch(again.stderr.String()), again.stderr.String())
	_, err = again.client(t).ListJobs(ctx, client.ListJobsOptions{})
	require.NoError(t, err, "the first token still works after a restart")
}

// stint dev with no token stays open on loopback, says so, and refuses any other address.
func TestDevAuthOff(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, stintBin, "dev", "--addr", "0.0.0.0:0", "--data", t.TempDir())
	cmd.Env = stintEnv()
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "stint dev without auth on 0.0.0.0 must refuse: %s", out)
	require.Contains(t, string(out), "authentication is off, so stint dev listens on a loopback address only")

	dev := startServer(t, "dev", "--data", t.TempDir())
	waitFor(t, 10*time.Second, "the dev banner", func() bool {
		return strings.Contains(dev.stderr.String(), "authentication is OFF")
	})
	_, _, err = dev.client(t).CreateJob(context.Background(), &apitype.JobSpec{Shell: "true"})
	require.NoError(t, err, "open on loopback: no token needed")
}
