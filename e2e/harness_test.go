package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// stintBin is the binary built by TestMain, shared by every test (read-only after TestMain).
var stintBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stint-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stintBin = filepath.Join(dir, "stint")
	build := exec.Command("go", "build", "-o", stintBin, "../cmd/stint")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build stint:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running stint process.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	token  string // the admin token its clients send ("" for an open stint dev)
	https  bool   // it serves HTTPS (--tls-cert)
	stderr *lockedBuffer
	done   chan struct{}
}

// adminToken is the admin token every `stint server` of the tests starts with
// (STINT_BOOTSTRAP_TOKEN): authentication is always on outside stint dev.
const adminToken = "e2e-admin-0123456789abcdef0123456789"

// stintEnv is the tests' environment without STINT_* variables, plus extra: what a stint
// process of a test sees.
func stintEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "STINT_") {
			env = append(env, e)
		}
	}
	return append(env, extra...)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listenRe = regexp.MustCompile(`stint server listening.*addr=(\S+)`)

// startServer runs `stint <mode> --addr 127.0.0.1:0 args...` and waits until it listens. A
// `stint server` gets adminToken as its bootstrap token, and its clients send it; `stint
// dev` stays open.
func startServer(t testing.TB, mode string, args ...string) *proc {
	t.Helper()
	if mode == "server" {
		return startServerEnv(t, mode, adminToken, []string{"STINT_BOOTSTRAP_TOKEN=" + adminToken}, args...)
	}
	return startServerEnv(t, mode, "", nil, args...)
}

// startServerEnv is startServer with the environment's STINT_* variables replaced by env,
// and token the one its clients send.
func startServerEnv(t testing.TB, mode, token string, env []string, args ...string) *proc {
	t.Helper()
	full := append([]string{mode, "--addr", "127.0.0.1:0", "--log-level", "info"}, args...)
	cmd := exec.Command(stintBin, full...)
	cmd.Env = stintEnv(env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	cmd.Stdout = io.Discard
	require.NoError(t, cmd.Start(), "start stint %s", mode)
	p := &proc{cmd: cmd, token: token, https: slices.Contains(args, "--tls-cert"), stderr: &lockedBuffer{}, done: make(chan struct{})}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			p.stderr.Write([]byte(line + "\n"))
			if m := listenRe.FindStringSubmatch(line); m != nil {
				select {
				case addrCh <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("stint %s stderr:\n%s", mode, p.stderr.String())
		}
	})
	select {
	case p.addr = <-addrCh:
	case <-p.done:
		t.Fatalf("stint %s exited before listening:\n%s", mode, p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("stint %s did not listen within 30s:\n%s", mode, p.stderr.String())
	}
	return p
}

// kill sends SIGKILL to the process group and waits for the process to end.
func (p *proc) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.done
}

func (p *proc) url() string {
	if p.https {
		return "https://" + p.addr
	}
	return "http://" + p.addr
}

func (p *proc) client(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.New(p.url(), client.WithToken(p.token))
	require.NoError(t, err)
	return c
}

// workerToken creates, through the servers (a comma-separated list) with adminToken, a
// worker token bound to worker id and returns its secret: what a worker of the tests runs
// with (in STINT_TOKEN, never on its command line).
func workerToken(t testing.TB, servers, id string) string {
	t.Helper()
	c, err := client.New(servers, client.WithToken(adminToken))
	require.NoError(t, err)
	ct, err := c.CreateToken(context.Background(), &apitype.CreateTokenRequest{Name: id, Role: "worker", WorkerID: id})
	require.NoError(t, err, "create a worker token for %s", id)
	return ct.Secret
}

// storeCase is one store engine the e2e tests run on.
type storeCase struct {
	name string
	// args returns the server flags selecting a fresh store for one test.
	args func(t testing.TB) []string
}

func storeCases() []storeCase {
	return []storeCase{
		{name: "sqlite", args: func(t testing.TB) []string {
			return []string{"--data", t.TempDir()}
		}},
		{name: "postgres", args: func(t testing.TB) []string {
			return []string{"--store", freshPostgres(t), "--data", t.TempDir()}
		}},
	}
}

// freshPostgres creates an empty database for one test and drops it afterwards. It skips the
// test, visibly, when STINT_TEST_DATABASE_URL is not set.
func freshPostgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv("STINT_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("STINT_TEST_DATABASE_URL not set: skipping PostgreSQL end-to-end test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err, "connect to STINT_TEST_DATABASE_URL")
	defer conn.Close(ctx)
	name := fmt.Sprintf("stint_e2e_%d", time.Now().UnixNano())
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond) // polling a real process: there is no signal to wait on
	}
}

// waitRun waits until the run reaches a final state and returns it.
func waitRun(t testing.TB, c *client.Client, id string, timeout time.Duration) *apitype.Run {
	t.Helper()
	var run *apitype.Run
	waitFor(t, timeout, "run "+id+" to finish", func() bool {
		r, err := c.GetRun(context.Background(), id)
		if err != nil {
			return false
		}
		run = r
		switch r.Status {
		case "succeeded", "failed", "cancelled", "skipped":
			return true
		}
		return false
	})
	return run
}
