//go:build unix

package worker

import (
	"bufio"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stretchr/testify/require"
)

// envOf parses the output of env(1).
func envOf(out string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(out) {
		if k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "="); ok {
			m[k] = v
		}
	}
	return m
}

// A command starts from a clean environment: PATH, HOME, TMPDIR, the variables PassEnv names,
// the job's env and stint's own; never the worker's STINT_ variables (its tokens), whatever
// PassEnv says. (Not parallel: it sets the worker's environment.)
func TestCommandCleanEnv(t *testing.T) {
	t.Setenv("STINT_TOKEN", "worker-token-secret")
	t.Setenv("STINT_API_TOKEN", "api-token-secret")
	t.Setenv("STINT_WORKER_TOKEN", "worker-protocol-secret")
	t.Setenv("WORKER_ONLY", "worker-value")
	t.Setenv("LC_STINT_TEST", "pass-me")
	t.Setenv("HOME", "/home/worker-home")
	for _, tc := range []struct {
		name    string
		passEnv []string
		want    map[string]string // variables the job must see with these values
		absent  []string
	}{
		{name: "nothing passed", want: map[string]string{"HOME": "/home/worker-home", "JOB_VAR": "job-value"},
			absent: []string{"WORKER_ONLY", "LC_STINT_TEST", "STINT_TOKEN", "STINT_API_TOKEN", "STINT_WORKER_TOKEN"}},
		{name: "a pattern", passEnv: []string{"LC_*"}, want: map[string]string{"LC_STINT_TEST": "pass-me"},
			absent: []string{"WORKER_ONLY", "STINT_TOKEN"}},
		{name: "everything but stint's", passEnv: []string{"*"}, want: map[string]string{"WORKER_ONLY": "worker-value", "LC_STINT_TEST": "pass-me"},
			absent: []string{"STINT_TOKEN", "STINT_API_TOKEN", "STINT_WORKER_TOKEN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFake()
			startAgent(t, s, func(c *Config) { c.PassEnv = tc.passEnv })
			l := shellLease("r", "env")
			l.Env = map[string]string{"JOB_VAR": "job-value"}
			s.add(l)
			require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
			env := envOf(s.log("r", "stdout"))
			require.Equal(t, os.Getenv("PATH"), env["PATH"])
			require.Equal(t, "r", env["STINT_RUN_ID"])
			require.NotEmpty(t, env["STINT_WORK_DIR"])
			require.Equal(t, env["STINT_WORK_DIR"], env["TMPDIR"])
			for k, v := range tc.want {
				require.Equal(t, v, env[k], k)
			}
			for _, k := range tc.absent {
				require.NotContains(t, env, k)
			}
			require.NotContains(t, s.log("r", ""), "secret", "no token value reaches the job")
		})
	}
}

func TestPassEnvRefusesStintVariables(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"STINT_TOKEN", "stint_api_token", "STINT_*", "["} {
		_, err := New(Config{Server: newFake(), Commands: true, PassEnv: []string{p}})
		require.Error(t, err, p)
		require.Contains(t, err.Error(), "PassEnv")
	}
}

// AllowCommands: a command whose executable is not listed fails at once, before anything
// runs; a listed one (by path, by pattern or by a bare name looked up in PATH) runs; a shell
// job is judged as /bin/sh.
func TestAllowCommands(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	sh, err = filepath.Abs(sh)
	require.NoError(t, err)
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		name  string
		allow []string
		lease apitype.Lease
		ok    bool
	}{
		{name: "bare name", allow: []string{"sh"}, lease: apitype.Lease{Command: []string{"sh", "-c", "touch " + marker}}, ok: true},
		{name: "pattern", allow: []string{filepath.Dir(sh) + "/*"}, lease: apitype.Lease{Command: []string{"sh", "-c", "touch " + marker}}, ok: true},
		{name: "shell job allowed by /bin/sh", allow: []string{"/bin/sh"}, lease: apitype.Lease{Shell: "touch " + marker}, ok: true},
		{name: "not listed", allow: []string{"/bin/sh"}, lease: apitype.Lease{Command: []string{"touch", marker}}},
		{name: "shell job needs /bin/sh", allow: []string{"/nonexistent/bin/*"}, lease: apitype.Lease{Shell: "touch " + marker}},
		{name: "a path outside the pattern", allow: []string{"/nonexistent/bin/*"}, lease: apitype.Lease{Command: []string{"/nonexistent/bin/sub/x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(marker)
			s := newFake()
			startAgent(t, s, func(c *Config) { c.AllowCommands = tc.allow })
			l := tc.lease
			l.RunID, l.Token, l.Attempt = "r", "tok", 1
			s.add(l)
			c := s.awaitCompletion(t, "r")
			_, statErr := os.Stat(marker)
			if tc.ok {
				require.Equal(t, statusSucceeded, c.Status, c.Error)
				require.NoError(t, statErr, "the command ran")
				return
			}
			require.Equal(t, statusFailed, c.Status)
			require.Nil(t, c.ExitCode, "nothing ran, so nothing exited")
			require.Contains(t, c.Error, "is not allowed on this worker")
			require.True(t, os.IsNotExist(statErr), "the command did not run")
		})
	}
}

func TestAllowCommandsConfig(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"bin/sh", "py*", "stint-no-such-command-anywhere", "", "/usr/bin/["} {
		_, err := New(Config{Server: newFake(), Commands: true, AllowCommands: []string{bad}})
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "AllowCommands")
	}
}

// Every command attempt runs in an empty directory of its own under WorkDir, also its TMPDIR,
// removed when it ends, however it ends, unless the attempt left it empty (then a later
// attempt gets it); a job that names a dir runs there but still gets one.
func TestWorkDirs(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	s := newFake()
	startAgent(t, s, func(c *Config) {
		c.WorkDir = base
		c.KillGrace = 100 * time.Millisecond
	})
	const script = `pwd -P; echo "$STINT_WORK_DIR"; echo data > "$TMPDIR/f"; mkdir -p sub/deeper && touch sub/deeper/g`
	s.add(shellLease("a", script), shellLease("b", script))
	killed := shellLease("c", `cd "$STINT_WORK_DIR"; touch f; echo "$STINT_WORK_DIR"; exec sleep 100`)
	killed.Timeout = timeout(300 * time.Millisecond)
	s.add(killed)

	dirs := map[string]bool{}
	for _, id := range []string{"a", "b"} {
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, id).Status)
		lines := strings.Fields(s.log(id, "stdout"))
		require.Len(t, lines, 2)
		require.Equal(t, lines[0], lines[1], "the job runs in its work dir")
		require.Equal(t, evalSymlinks(t, base), filepath.Dir(lines[0]))
		dirs[lines[0]] = true
		require.NoDirExists(t, lines[0], "removed when the attempt ended")
	}
	require.Len(t, dirs, 2, "each attempt has its own")

	require.Equal(t, statusTimedOut, s.awaitCompletion(t, "c").Status)
	killedDir := strings.TrimSpace(s.log("c", "stdout"))
	require.Equal(t, base, filepath.Dir(killedDir))
	require.NoDirExists(t, killedDir, "the killed attempt's dir is gone")

	// The others were removed: this one gets a new directory, and leaves it empty.
	other := t.TempDir()
	named := shellLease("d", `pwd -P; echo "$STINT_WORK_DIR"`)
	named.Dir = other
	s.add(named)

	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "d").Status)
	lines := strings.Fields(s.log("d", "stdout"))
	require.Equal(t, evalSymlinks(t, other), lines[0], "a job's own dir wins")
	require.Equal(t, base, filepath.Dir(lines[1]))
	require.Empty(t, entries(t, lines[1]), "left empty, kept for a later attempt")
}

// A later attempt gets an earlier one's empty directory; but the directory of an
// attempt that left a process behind holding its output is removed, so that the process's
// current directory is no later attempt's.
func TestWorkDirReusedUnlessLeftInUse(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	s := newFake()
	startAgent(t, s, func(c *Config) { c.WorkDir = t.TempDir() })
	inode := func(id string) string {
		t.Helper()
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, id).Status)
		return strings.Fields(s.log(id, "stdout"))[0]
	}
	s.add(shellLease("a", `stat -c %i .`))
	a := inode("a")
	s.add(shellLease("b", `stat -c %i .`))
	require.Equal(t, a, inode("b"), "b got a's directory")

	// Once it has left the group (its session is its own), so that the group's kill misses it.
	s.add(shellLease("c", "stat -c %i .; "+leaveGroup("sleep 100", "")))
	require.Equal(t, a, inode("c"))
	pid, err := strconv.Atoi(strings.Fields(s.log("c", "stdout"))[1])
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(cwd, " (deleted)"), "the left process's directory was removed: %s", cwd)
}

// leaveGroup is a shell script that starts command in a session of its own (setsid), out of
// the attempt's process group, waits until it is there (Linux: reads /proc), and prints its
// pid, with redirect ("" or ">&2").
func leaveGroup(command, redirect string) string {
	return "setsid " + command + ` & p=$!
while [ "$(cut -d' ' -f6 /proc/$p/stat)" != "$p" ]; do :; done; echo $p ` + redirect
}

// A command's stdin is /dev/null, shared by every attempt: reading it ends at once.
func TestCommandStdinIsDevNull(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	s := newFake()
	startAgent(t, s, nil)
	for _, id := range []string{"a", "b"} {
		s.add(shellLease(id, `readlink /proc/self/fd/0; cat; echo read-to-end`))
	}
	for _, id := range []string{"a", "b"} {
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, id).Status)
		require.Equal(t, "/dev/null\nread-to-end\n", s.log(id, "stdout"))
	}
}

func evalSymlinks(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	require.NoError(t, err)
	return r
}

// Without WorkDir the agent makes a temporary base and removes it when Run returns.
func TestTempWorkDirRemoved(t *testing.T) {
	t.Parallel()
	s := newFake()
	_, cancel, done := startAgent(t, s, nil)
	s.add(shellLease("r", `dirname "$STINT_WORK_DIR"`))
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
	base := strings.TrimSpace(s.log("r", "stdout"))
	require.DirExists(t, base)
	cancel()
	require.NoError(t, awaitDone(t, done))
	require.NoDirExists(t, base)
}

// RunAs runs commands as another user, with its groups and HOME, in a work dir it owns.
func TestRunAs(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		_, err := New(Config{Server: newFake(), Commands: true, RunAs: "nobody"})
		require.ErrorContains(t, err, "must run as root")
		t.Skip("RunAs needs root: only its refusal was tested")
	}
	_, err := New(Config{Server: newFake(), Commands: true, RunAs: "stint-no-such-user"})
	require.ErrorContains(t, err, "no such user")
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody on this host")
	}
	s := newFake()
	startAgent(t, s, func(c *Config) { c.RunAs = "nobody" })
	s.add(shellLease("r", `id -u; id -g; echo "$HOME"; touch "$STINT_WORK_DIR/f" && echo writable; touch /root/stint-runas-test 2>/dev/null || echo denied`))
	c := s.awaitCompletion(t, "r")
	require.Equal(t, statusSucceeded, c.Status, c.Error)
	require.Equal(t, strings.Join([]string{u.Uid, u.Gid, u.HomeDir, "writable", "denied"}, "\n")+"\n", s.log("r", "stdout"))

	// A directory left empty goes to the next attempt as the user's, private again, writable.
	dir := `stat -c '%i %u %g %a' "$STINT_WORK_DIR"`
	s.add(shellLease("empty", `chmod 755 "$STINT_WORK_DIR"; `+dir))
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "empty").Status)
	s.add(shellLease("next", dir+`; touch "$STINT_WORK_DIR/f" && echo writable`))
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "next").Status)
	first := strings.Fields(s.log("empty", "stdout"))
	require.Equal(t, []string{first[0], u.Uid, u.Gid, "755"}, first)
	require.Equal(t, []string{first[0], u.Uid, u.Gid, "700", "writable"}, strings.Fields(s.log("next", "stdout")), "the same directory, reset")
}

// The guard kills the process groups it tracks and removes the directories it tracks when its
// input ends, and forgets what it was told to.
func TestRunGuard(t *testing.T) {
	t.Parallel()
	tracked := exec.Command("sh", "-c", "sleep 100 & echo $!; wait")
	tracked.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	forgotten := exec.Command("sleep", "100")
	forgotten.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := tracked.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, tracked.Start())
	require.NoError(t, forgotten.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-forgotten.Process.Pid, syscall.SIGKILL)
		_ = forgotten.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	grandchild, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "work")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o700))

	var in strings.Builder
	in.WriteString("+pg " + strconv.Quote(strconv.Itoa(tracked.Process.Pid)) + "\n")
	in.WriteString("+pg " + strconv.Quote(strconv.Itoa(forgotten.Process.Pid)) + "\n")
	in.WriteString("-pg " + strconv.Quote(strconv.Itoa(forgotten.Process.Pid)) + "\n")
	in.WriteString("+dir " + strconv.Quote(dir) + "\n")
	in.WriteString("garbage\n")
	require.NoError(t, RunGuard(strings.NewReader(in.String())))

	_ = tracked.Wait()
	eventually(t, "the tracked group's grandchild gone", func() bool { return processGone(grandchild) })
	require.NoDirExists(t, dir)
	require.False(t, processGone(forgotten.Process.Pid), "an untracked group lives on")
}

// When the agent's process is SIGKILLed, what its attempt runs dies with it: the process it
// started (Pdeathsig), and with a guard the whole process group, grandchildren included, and
// the guard removes the attempt's directory and the idle one an earlier attempt left.
func TestAgentDeathKillsAttempts(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux only")
	}
	for _, tc := range []struct {
		name, script string
		guard        bool
	}{
		// The script replaces itself with sleep: the agent's own child.
		{name: "child, no guard", script: `echo $$; exec sleep 100`},
		{name: "grandchild, guard", script: `sleep 100 & echo $!; wait`, guard: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			args := []string{"agent-helper", tc.script, work}
			if tc.guard {
				args = append(args, "guard")
			}
			helper := exec.Command(os.Args[0], args...)
			helper.Stderr = os.Stderr
			out, err := helper.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, helper.Start())
			var once sync.Once
			kill := func() { once.Do(func() { _ = helper.Process.Kill(); _ = helper.Wait() }) }
			t.Cleanup(kill)
			line, err := bufio.NewReader(out).ReadString('\n')
			require.NoError(t, err, "the helper printed no pid")
			pid, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "pid "))
			require.NoError(t, err, line)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			require.False(t, processGone(pid))
			require.Len(t, entries(t, work), 2, "the attempt's directory and an idle one")
			kill() // SIGKILL
			eventually(t, "the attempt's process gone", func() bool { return processGone(pid) })
			if tc.guard {
				eventually(t, "the directories removed", func() bool { return len(entries(t, work)) == 0 })
			}
		})
	}
}

// Pdeathsig follows the thread that started the process: the agent holds that thread for the
// process's life, so threads of the Go runtime ending meanwhile do not kill it.
func TestCommandSurvivesThreadExits(t *testing.T) {
	t.Parallel()
	s := newFake()
	startAgent(t, s, func(c *Config) { c.Capacity.Slots = 8 })
	stop := make(chan struct{})
	churned := make(chan int)
	go func() {
		// A goroutine that ends while locked to its thread makes the runtime end the thread.
		n := 0
		for {
			select {
			case <-stop:
				churned <- n
				return
			default:
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				runtime.LockOSThread()
			}()
			<-done
			n++
		}
	}()
	ids := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"}
	for _, id := range ids {
		s.add(shellLease(id, "sleep 1; echo survived"))
	}
	for _, id := range ids {
		c := s.awaitCompletion(t, id)
		require.Equal(t, statusSucceeded, c.Status, "%s: %s", id, c.Error)
		require.Equal(t, "survived\n", s.log(id, "stdout"))
	}
	close(stop)
	require.Positive(t, <-churned)
}
