//go:build unix

package worker

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pipeGrace is how long Wait waits for the output pipes to close after the process exited:
// a process that left the group (setsid) may still hold them.
const pipeGrace = 2 * time.Second

// runCommand runs the attempt's command or shell in its own process group and maps how it
// ended to an outcome.
func (at *attempt) runCommand() outcome {
	l := at.lease
	var cmd *exec.Cmd
	if len(l.Command) > 0 {
		cmd = exec.Command(l.Command[0], l.Command[1:]...)
	} else {
		cmd = exec.Command("/bin/sh", "-c", l.Shell)
	}
	cmd.Env = at.env()
	cmd.Dir = l.Dir
	cmd.Stdout = &at.stdout
	cmd.Stderr = &at.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = pipeGrace

	if err := cmd.Start(); err != nil {
		at.state.CompareAndSwap(int32(running), int32(reasonDone))
		return outcome{status: statusFailed, err: "start: " + err.Error()}
	}
	pid := cmd.Process.Pid
	at.pmu.Lock()
	at.pid, at.alive = pid, true
	// A stop that came while the process was starting could not signal it.
	switch r := reason(at.state.Load()); {
	case r == reasonLost || at.lost.Load():
		at.signalLocked(syscall.SIGKILL)
	case r != running:
		at.signalLocked(syscall.SIGTERM)
	}
	at.pmu.Unlock()

	// Wait for the group leader to exit without reaping it: while it is a zombie its pid is
	// still the group's id, so the whole group can be killed without hitting another process.
	zombie := waitExited(pid)
	at.state.CompareAndSwap(int32(running), int32(reasonDone))
	at.pmu.Lock()
	if zombie {
		// Children left behind would hold the output pipes open and outlive the attempt.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	at.alive = false
	at.pmu.Unlock()

	err := cmd.Wait()
	if !zombie {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // best effort where waitid is unavailable
	}

	var o outcome
	if ps := cmd.ProcessState; ps != nil && ps.Exited() {
		code := ps.ExitCode()
		o.exitCode = &code
	}
	if r := reason(at.state.Load()); r != reasonDone {
		so := at.stoppedOutcome(r)
		o.status, o.err = so.status, so.err
		return o
	}
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success():
		o.status = statusSucceeded
	case errors.As(err, &ee):
		o.status, o.err = statusFailed, ee.Error() // "exit status 3", "signal: killed"
	default:
		o.status, o.err = statusFailed, err.Error()
	}
	return o
}

// signalLocked signals the attempt's process group if its process is running; at.pmu held.
func (at *attempt) signalLocked(sig syscall.Signal) {
	if at.alive {
		_ = syscall.Kill(-at.pid, sig)
	}
}

// env is the process environment: the worker's, then the job's, then stint's variables, and
// for an attempt given GPU devices CUDA_VISIBLE_DEVICES and STINT_GPUS naming them (later
// entries win in exec.Cmd.Env), with CUDA_DEVICE_ORDER=PCI_BUS_ID: the devices are
// nvidia-smi's indices, which follow the PCI bus, while CUDA's default order puts the
// fastest device first and would name other devices on a host of mixed GPUs. An attempt
// given no devices keeps whatever CUDA_VISIBLE_DEVICES the worker's or the job's
// environment has.
func (at *attempt) env() []string {
	l := at.lease
	base := os.Environ()
	env := make([]string, 0, len(base)+len(l.Env)+7)
	env = append(env, base...)
	for k, v := range l.Env {
		env = append(env, k+"="+v)
	}
	args := "{}"
	if len(l.Args) > 0 && string(l.Args) != "null" {
		args = string(l.Args)
	}
	env = append(env,
		"STINT_RUN_ID="+l.RunID,
		"STINT_ATTEMPT="+strconv.Itoa(l.Attempt),
		"STINT_JOB="+l.JobName,
		"STINT_JOB_ID="+l.JobID,
		"STINT_ARGS="+args,
	)
	if len(at.task.GPUs) > 0 {
		devices := strings.Join(at.task.GPUs, ",")
		env = append(env, "CUDA_VISIBLE_DEVICES="+devices, "STINT_GPUS="+devices, "CUDA_DEVICE_ORDER=PCI_BUS_ID")
	}
	return env
}
