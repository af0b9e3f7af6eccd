//go:build linux

package worker

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stint-dev/stint/apitype"
	"github.com/stretchr/testify/require"
)

// dataLimit reads the soft RLIMIT_DATA of process pid from /proc ("unlimited" or bytes).
func dataLimit(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Max data size"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}

// With Limits and no cgroup, a job's memory requirement becomes its processes' RLIMIT_DATA,
// and its cpu requirement is not applied, which its log says. Without Limits, neither.
func TestLimitsWithoutCgroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		limits bool
		want   string
	}{
		{name: "limits", limits: true, want: strconv.Itoa(96 << 20)},
		{name: "no limits", want: "unlimited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			startAgent(t, s, func(c *Config) { c.Limits = tc.limits })
			l := shellLease("r", `echo $$; exec sleep 100`)
			l.Requirements = &apitype.Requirements{CPU: 1.5, MemoryMB: 96}
			s.add(l)
			// The pid's line on stdout (stderr may have the note below first).
			s.await(t, "the pid on stdout", func() bool { return strings.Contains(s.logLocked("r", "stdout"), "\n") })
			pid := pidIn(t, s.log("r", "stdout"))
			// The limit is set just after the process started: wait for it.
			eventually(t, "RLIMIT_DATA "+tc.want, func() bool { return dataLimit(pid) == tc.want })
			s.push(func(s *fakeServer) { s.cancel = append(s.cancel, "r") })
			require.Equal(t, statusCancelled, s.awaitCompletion(t, "r").Status)
			note := "stint: cpu limit of 1.5 CPUs not applied: the worker has no cgroup to run attempts in\n"
			if tc.limits {
				require.Equal(t, note, s.log("r", "stderr"))
			} else {
				require.Empty(t, s.log("r", "stderr"))
			}
		})
	}
}

// testCgroup makes a cgroup v2 directory for one test under the test process's own cgroup,
// or skips the test when the host has none it may write.
func testCgroup(t *testing.T) (dir, mount string) {
	t.Helper()
	own := ""
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for line := range strings.Lines(string(b)) {
			if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
				own = p
			}
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil || own == "" {
		t.Skip("no cgroup v2 on this host")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if i := slices.Index(fields, "-"); i > 0 && i+1 < len(fields) && fields[i+1] == "cgroup2" {
			mount = fields[4]
		}
	}
	if mount == "" {
		t.Skip("no cgroup v2 mounted")
	}
	dir, err = os.MkdirTemp(filepath.Join(mount, own), "stint-test-")
	if err != nil {
		t.Skipf("cannot create a cgroup v2 for the test: %v", err)
	}
	t.Cleanup(func() { removeCgroup(dir, cgroupDrain) })
	return dir, mount
}

// With a cgroup, each attempt runs in a cgroup of its own, whose processes all die when the
// attempt ends, those that left its process group included, and which is then removed. Limits
// go to memory.max and cpu.max where the cgroup has those controllers; otherwise the log says
// what was not applied.
func TestCgroupPerAttempt(t *testing.T) {
	t.Parallel()
	top, mount := testCgroup(t)
	parent := filepath.Join(top, "jobs") // made by the agent
	t.Cleanup(func() { removeCgroup(parent, cgroupDrain) })
	s := newFake()
	startAgent(t, s, func(c *Config) {
		c.Cgroup = parent
		c.Limits = true
	})
	enabled := strings.Fields(readFile(filepath.Join(parent, "cgroup.subtree_control")))
	l := shellLease("r", `setsid sleep 100 & echo $!
cg=$(sed -n 's/^0:://p' /proc/self/cgroup); echo "$cg"
cat "$MNT$cg/memory.max" 2>/dev/null || echo no-memory.max
cat "$MNT$cg/cpu.max" 2>/dev/null || echo no-cpu.max`)
	l.Env = map[string]string{"MNT": mount}
	l.Requirements = &apitype.Requirements{CPU: 0.5, MemoryMB: 64}
	s.add(l)
	c := s.awaitCompletion(t, "r")
	require.Equal(t, statusSucceeded, c.Status, c.Error)
	lines := strings.Split(strings.TrimSpace(s.log("r", "stdout")), "\n")
	require.Len(t, lines, 4, s.log("r", ""))
	escaped, err := strconv.Atoi(lines[0])
	require.NoError(t, err)
	eventually(t, "the process that left the group gone", func() bool { return processGone(escaped) })
	cg := filepath.Join(mount, lines[1])
	require.Equal(t, parent, filepath.Dir(cg), "the attempt had a cgroup of its own")
	require.NoDirExists(t, cg, "removed when the attempt ended")
	stderr := s.log("r", "stderr")
	if slices.Contains(enabled, "memory") {
		require.Equal(t, strconv.Itoa(64<<20), lines[2])
	} else {
		require.Equal(t, "no-memory.max", lines[2])
	}
	if slices.Contains(enabled, "cpu") {
		require.Equal(t, "50000 100000", lines[3])
		require.NotContains(t, stderr, "cpu limit")
	} else {
		require.Contains(t, stderr, "stint: cpu limit of 0.5 CPUs not applied: the cpu controller is not enabled in cgroup "+parent)
	}
}

// The guard kills what is in the cgroups it tracks and removes them.
func TestRunGuardCgroup(t *testing.T) {
	t.Parallel()
	parent, _ := testCgroup(t)
	cg := filepath.Join(parent, "attempt")
	require.NoError(t, os.Mkdir(cg, 0o755))
	fd, err := syscall.Open(cg, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	require.NoError(t, err)
	// It leaves its process group: only the cgroup finds it.
	cmd := exec.Command("sleep", "100")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: fd}
	require.NoError(t, cmd.Start())
	_ = syscall.Close(fd)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	in := "+cg " + strconv.Quote(cg) + "\n"
	done := make(chan error, 1)
	go func() { done <- RunGuard(strings.NewReader(in)) }()
	_ = cmd.Wait() // reaped here, so that the cgroup can empty
	require.NoError(t, recv(t, done))
	require.NoDirExists(t, cg)
}
