//go:build linux

package worker

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A process a starter started with Pdeathsig lives while threads of the Go runtime end around
// it, because the starter's thread lives until close; close ends that thread, and the kernel
// then kills the process, as it would if the agent died.
func TestStartersHoldTheirThreads(t *testing.T) {
	t.Parallel()
	s := newStarters(2)
	closed := false
	defer func() {
		if !closed {
			s.close()
		}
	}()
	cmd := exec.Command("sleep", "100")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, s.start(cmd))
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	// A goroutine that returns while locked to its thread makes the runtime end the thread.
	for range 200 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
		}()
		<-done
	}
	require.False(t, processGone(pid), "the process died while its starter ran")

	s.close()
	closed = true
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled(), "%v", err)
	require.Equal(t, syscall.SIGKILL, ws.Signal(), "the death signal of the starter's thread")
}

// The runtime never ends the main thread: a starter that finds itself on it hands its place
// to another goroutine, or a process it started would outlive close.
func TestStarterOffTheMainThread(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "starter-on-main")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var pid int
	_, err = fmt.Fscanf(out, "closed %d\n", &pid)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	require.Eventually(t, func() bool { return processGone(pid) }, waitFor, 5*time.Millisecond,
		"the sleep a starter started outlived close")
}
