//go:build unix

package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stretchr/testify/require"
)

func TestCommandOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		lease    apitype.Lease
		status   string
		exitCode *int
		err      string // prefix of the completion's error
	}{
		{name: "exit 0", lease: shellLease("r", "exit 0"), status: statusSucceeded, exitCode: ptr(0)},
		{name: "exit 3", lease: shellLease("r", "exit 3"), status: statusFailed, exitCode: ptr(3), err: "exit status 3"},
		{name: "argv", lease: apitype.Lease{RunID: "r", Token: "t", Command: []string{"sh", "-c", "exit 0"}}, status: statusSucceeded, exitCode: ptr(0)},
		{name: "argv exit 7", lease: apitype.Lease{RunID: "r", Token: "t", Command: []string{"sh", "-c", "exit 7"}}, status: statusFailed, exitCode: ptr(7), err: "exit status 7"},
		{name: "killed by a signal", lease: shellLease("r", "kill -KILL $$"), status: statusFailed, err: "signal: killed"},
		{name: "not found", lease: apitype.Lease{RunID: "r", Token: "t", Command: []string{"/nonexistent/stint-test"}}, status: statusFailed, err: "start: "},
		{name: "bad dir", lease: apitype.Lease{RunID: "r", Token: "t", Shell: "true", Dir: "/nonexistent/stint-test"}, status: statusFailed, err: "start: "},
		{name: "nothing to run", lease: apitype.Lease{RunID: "r", Token: "t"}, status: statusFailed, err: "lease has nothing to run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			startAgent(t, s, nil)
			s.add(tt.lease)
			c := s.awaitCompletion(t, "r")
			require.Equal(t, tt.status, c.Status, c.Error)
			require.Equal(t, tt.lease.Token, c.Token)
			require.Equal(t, tt.exitCode, c.ExitCode)
			require.True(t, strings.HasPrefix(c.Error, tt.err), "error %q, want prefix %q", c.Error, tt.err)
			if tt.err == "" {
				require.Empty(t, c.Error)
			}
		})
	}
}

func TestCommandsDisabled(t *testing.T) {
	t.Parallel()
	s := newFake()
	startAgent(t, s, func(c *Config) { c.Commands = false })
	s.add(shellLease("r", "true"))
	c := s.awaitCompletion(t, "r")
	require.Equal(t, statusFailed, c.Status)
	require.Equal(t, "this worker does not run commands", c.Error)
}

func TestCommandEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args json.RawMessage
		want string
	}{
		{name: "no args", want: "r1|2|job-r1|{}|bar|ok"},
		{name: "args", args: json.RawMessage(`{"n":1}`), want: `r1|2|job-r1|{"n":1}|bar|ok`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			startAgent(t, s, nil)
			l := shellLease("r1", `echo "$STINT_RUN_ID|$STINT_ATTEMPT|$STINT_JOB|$STINT_ARGS|$FOO|${PATH:+ok}"`)
			l.Attempt = 2
			l.Args = tt.args
			l.Env = map[string]string{"FOO": "bar"}
			s.add(l)
			require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r1").Status)
			require.Equal(t, tt.want+"\n", s.log("r1", "stdout"))
		})
	}
}

// A job's secret env reaches its process like env: here the process writes it to a file,
// not to its log.
func TestCommandSecretEnv(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	s := newFake()
	startAgent(t, s, nil)
	l := shellLease("r", `printf %s "$DB_PASSWORD|$PLAIN" > "$OUT"`)
	l.Env = map[string]string{"PLAIN": "p", "OUT": out}
	l.SecretEnv = map[string]string{"DB_PASSWORD": "s3cret"}
	s.add(l)
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "s3cret|p", string(b))
	require.Empty(t, s.log("r", "stdout"))
}

func TestCommandDir(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	s := newFake()
	startAgent(t, s, nil)
	l := shellLease("r", "pwd -P")
	l.Dir = dir
	s.add(l)
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
	require.Equal(t, dir+"\n", s.log("r", "stdout"))
}

func TestCommandStreams(t *testing.T) {
	t.Parallel()
	s := newFake()
	startAgent(t, s, nil)
	s.add(shellLease("r", "echo out1; echo err1 >&2; echo out2; echo err2 >&2"))
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
	require.Equal(t, "out1\nout2\n", s.log("r", "stdout"))
	require.Equal(t, "err1\nerr2\n", s.log("r", "stderr"))
}

func TestCommandLogChunksAndCap(t *testing.T) {
	t.Parallel()
	s := newFake()
	startAgent(t, s, func(c *Config) {
		c.LogCap = 1000
		c.LogChunkBytes = 300
	})
	s.add(shellLease("r", `head -c 5000 /dev/zero | tr '\0' a`))
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
	require.Equal(t, strings.Repeat("a", 1000)+"\n[stint: output truncated after 1000 bytes; 4000 more bytes dropped]\n",
		s.log("r", "stdout"))

	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.chunks {
		require.Equal(t, int64(i+1), c.Seq, "chunks are shipped in Seq order from 1")
		require.LessOrEqual(t, len(c.Data), 300)
		require.Equal(t, 1, c.Attempt)
		require.Equal(t, "tok-r", c.Token, "each chunk carries its attempt's lease token")
	}
}

// A command that writes more than its pipe holds before the agent reads the pipes as they
// fill (readersAfter) waits for them, and loses nothing; one that ends first is read once
// it exited.
func TestCommandOutputBeyondAPipe(t *testing.T) {
	t.Parallel()
	s := newFake()
	startAgent(t, s, func(c *Config) { c.LogCap = 4 << 20 })
	const big, small = 3 << 20, 100 << 10 // stdout beyond any pipe; stderr beyond 64 KiB
	s.add(shellLease("r", fmt.Sprintf(`head -c %d /dev/zero | tr '\0' a; head -c %d /dev/zero | tr '\0' b >&2`, big, small)))
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
	require.Equal(t, strings.Repeat("a", big), s.log("r", "stdout"))
	require.Equal(t, strings.Repeat("b", small), s.log("r", "stderr"))
	s.add(shellLease("q", `echo quick; echo also >&2`))
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "q").Status)
	require.Equal(t, "quick\n", s.log("q", "stdout"))
	require.Equal(t, "also\n", s.log("q", "stderr"))
}

// A process that left the group and keeps writing to the output after the command exited
// does not hold the attempt past the grace: its end is reported, with what was read.
func TestCommandOutputWriterLeftBehind(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	s := newFake()
	startAgent(t, s, nil)
	s.add(shellLease("r", leaveGroup("yes x", ">&2")))
	c := s.awaitCompletion(t, "r")
	pid, err := strconv.Atoi(strings.TrimSpace(s.log("r", "stderr")))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Equal(t, statusSucceeded, c.Status)
	require.True(t, strings.HasPrefix(s.log("r", "stdout"), "x\nx\n"), "what it wrote before the grace ended is kept")
}

// Output shows while the process still runs: written at once, or after the worker's
// first looks at the pipes found them empty (it looks again until they hold some).
func TestCommandOutputStreamsWhileRunning(t *testing.T) {
	t.Parallel()
	for name, script := range map[string]string{
		"at once": "echo first; exec sleep 100",
		"later":   "sleep 0.2; echo first; exec sleep 100",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			startAgent(t, s, func(c *Config) { c.LogFlushInterval = 20 * time.Millisecond })
			s.add(shellLease("r", script))
			// A partial chunk goes out on the flush timer while the process still runs.
			s.awaitLog(t, "r", "first\n")
			_, done := s.completion("r")
			require.False(t, done)
			s.push(func(s *fakeServer) { s.cancel = append(s.cancel, "r") })
			require.Equal(t, statusCancelled, s.awaitCompletion(t, "r").Status)
		})
	}
}

// A timeout stops the whole process group, grandchildren included, with SIGTERM and then
// SIGKILL for those that ignore it.
func TestCommandTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
	}{
		{name: "SIGTERM", script: "sleep 100 & echo $!; wait"},
		{name: "SIGKILL after grace", script: `trap "" TERM; sleep 100 & echo $!; wait; echo survived`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			startAgent(t, s, func(c *Config) { c.KillGrace = 200 * time.Millisecond })
			l := shellLease("r", tt.script)
			l.Timeout = timeout(300 * time.Millisecond)
			s.add(l)
			c := s.awaitCompletion(t, "r")
			require.Equal(t, statusTimedOut, c.Status)
			require.Equal(t, "timed out after 300ms", c.Error)
			pid := pidIn(t, s.log("r", "stdout"))
			eventually(t, "grandchild gone", func() bool { return processGone(pid) })
			require.NotContains(t, s.log("r", "stdout"), "survived")
		})
	}
}

// A cancel, pushed on the lease poll or on a heartbeat answer, stops the process group and
// completes the attempt as cancelled.
func TestCommandCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		push func(s *fakeServer)
	}{
		{name: "lease push", push: func(s *fakeServer) { s.cancel = append(s.cancel, "r") }},
		{name: "heartbeat", push: func(s *fakeServer) { s.hbCancel = append(s.hbCancel, "r") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			startAgent(t, s, nil)
			s.add(shellLease("r", "sleep 100 & echo $!; echo started; wait"))
			s.awaitLog(t, "r", "started\n")
			s.push(tt.push)
			c := s.awaitCompletion(t, "r")
			require.Equal(t, statusCancelled, c.Status)
			require.Equal(t, "cancelled", c.Error)
			pid := pidIn(t, s.log("r", "stdout"))
			eventually(t, "grandchild gone", func() bool { return processGone(pid) })
		})
	}
}

// A lost lease kills the process group at once and reports nothing.
func TestCommandLostLease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		push func(s *fakeServer)
	}{
		{name: "lease push", push: func(s *fakeServer) { s.lost = append(s.lost, "r") }},
		{name: "heartbeat", push: func(s *fakeServer) { s.hbLost = append(s.hbLost, "r") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			// A long grace: the kill must not wait for it.
			a, _, _ := startAgent(t, s, func(c *Config) { c.KillGrace = time.Minute })
			s.add(shellLease("r", `trap "" TERM; sleep 100 & echo $!; echo started; wait`))
			s.awaitLog(t, "r", "started\n")
			pid := pidIn(t, s.log("r", "stdout"))
			s.push(tt.push)
			eventually(t, "grandchild gone", func() bool { return processGone(pid) })
			eventually(t, "attempt released", func() bool { l, u := a.holding(); return l == 0 && u == 0 })
			// Anything the agent sent for r would have arrived before a later run's completion.
			s.add(handlerLease("after", "noop"))
			s.awaitCompletion(t, "after")
			_, reported := s.completion("r")
			require.False(t, reported, "a lost attempt must not be completed")
		})
	}
}

// When heartbeats fail for longer than the lease TTL, the agent kills its attempts itself.
func TestHeartbeatFailureKillsAttempts(t *testing.T) {
	t.Parallel()
	s := newFake()
	s.hbInterval = 20 * time.Millisecond
	s.ttl = 300 * time.Millisecond
	failing := false
	s.onHeartbeat = func() error {
		if failing {
			return errors.New("connection refused")
		}
		return nil
	}
	a, _, _ := startAgent(t, s, nil)
	s.add(shellLease("r", "sleep 100 & echo $!; echo started; wait"))
	s.awaitLog(t, "r", "started\n")
	pid := pidIn(t, s.log("r", "stdout"))
	// Heartbeats renew the lease well past its TTL while they succeed.
	s.await(t, "heartbeats for a TTL", func() bool { return len(s.heartbeats) >= 20 })
	require.False(t, processGone(pid))
	s.push(func(*fakeServer) { failing = true })
	eventually(t, "grandchild gone", func() bool { return processGone(pid) })
	eventually(t, "attempt released", func() bool { l, u := a.holding(); return l == 0 && u == 0 })
	_, reported := s.completion("r")
	require.False(t, reported)
}

// A drain that outlasts DrainTimeout stops the processes and reports them as lost.
func TestDrainTimeoutStopsCommands(t *testing.T) {
	t.Parallel()
	s := newFake()
	_, cancel, done := startAgent(t, s, func(c *Config) {
		c.DrainTimeout = 100 * time.Millisecond
		c.KillGrace = 100 * time.Millisecond
	})
	s.add(shellLease("r", "sleep 100 & echo $!; echo started; wait"))
	s.awaitLog(t, "r", "started\n")
	cancel()
	require.NoError(t, awaitDone(t, done))
	c, ok := s.completion("r")
	require.True(t, ok, "completion delivered before Run returned")
	require.Equal(t, statusLost, c.Status)
	require.Equal(t, "worker shutting down: attempt stopped", c.Error)
	pid := pidIn(t, s.log("r", "stdout"))
	eventually(t, "grandchild gone", func() bool { return processGone(pid) })
}

// A job that exits while its background child still holds stdout does not hang the agent:
// the group is killed when the leader exits.
func TestCommandLeftoverChildrenDoNotHang(t *testing.T) {
	t.Parallel()
	s := newFake()
	startAgent(t, s, nil)
	s.add(shellLease("r", "sleep 100 & echo $!"))
	c := s.awaitCompletion(t, "r")
	require.Equal(t, statusSucceeded, c.Status)
	pid := pidIn(t, s.log("r", "stdout"))
	eventually(t, "background child gone", func() bool { return processGone(pid) })
}

func TestCommandLogsBeforeCompletion(t *testing.T) {
	t.Parallel()
	s := newFake()
	startAgent(t, s, func(c *Config) {
		c.Capacity.Slots = 8
		c.LogChunkBytes = 100
	})
	var ids []string
	for i := range 16 {
		id := "r" + strconv.Itoa(i)
		ids = append(ids, id)
		s.add(shellLease(id, `i=0; while [ $i -lt 50 ]; do echo "line $i of $STINT_RUN_ID"; i=$((i+1)); done`))
	}
	for _, id := range ids {
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, id).Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	completed := map[string]bool{}
	for _, e := range s.events {
		kind, id, _ := strings.Cut(e, " ")
		if kind == "complete" {
			completed[id] = true
			continue
		}
		require.False(t, completed[id], "log chunk of %s after its completion", id)
	}
	for _, id := range ids {
		var want bytes.Buffer
		for i := range 50 {
			fmt.Fprintf(&want, "line %d of %s\n", i, id)
		}
		require.Equal(t, want.String(), s.logLocked(id, "stdout"))
	}
}

func TestCutPoint(t *testing.T) {
	t.Parallel()
	euro := "€" // 3 bytes
	tests := []struct {
		name string
		b    string
		n    int
		want int
	}{
		{name: "ascii", b: "abcdef", n: 4, want: 4},
		{name: "whole rune at the end", b: "ab" + euro, n: 5, want: 5},
		{name: "splits a rune", b: "ab" + euro, n: 3, want: 2},
		{name: "splits a rune late", b: "ab" + euro, n: 4, want: 2},
		{name: "partial rune alone, more to come", b: euro, n: 2, want: 2},
		{name: "partial rune alone at the end", b: euro[:2], n: 2, want: 0},
		{name: "invalid bytes", b: "\xff\xfe\xfd", n: 2, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, cutPoint([]byte(tt.b), tt.n))
		})
	}
}

// processGone reports whether pid no longer runs (gone, or a zombie waiting to be reaped).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return false // no procfs to tell a zombie from a live process
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// pidIn returns the first line of s that is a number.
func pidIn(t testing.TB, s string) int {
	t.Helper()
	for line := range strings.Lines(s) {
		if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
			return pid
		}
	}
	t.Fatalf("no pid in %q", s)
	return 0
}

func ptr[T any](v T) *T { return &v }
