//go:build linux

package worker

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"

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
