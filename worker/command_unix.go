//go:build unix

package worker

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// runCommand runs the attempt's command or shell in an empty working directory, in its own
// process group (and cgroup, with Config.Cgroup), as Config.RunAs, from a clean environment,
// within the job's limits, and maps how it ended to an outcome. When it returns, the process
// group and the cgroup are gone and the working directory is empty or gone (workDirs).
func (at *attempt) runCommand() outcome {
	a := at.agent
	l := at.lease
	fail := func(msg string) outcome {
		at.state.CompareAndSwap(int32(running), int32(reasonDone))
		return outcome{status: statusFailed, err: msg}
	}

	endTurn, err := a.starters.turn()
	if err != nil {
		return fail("start: " + err.Error())
	}
	var turnOnce sync.Once
	defer turnOnce.Do(endTurn)
	workDir, err := a.work.make()
	if err != nil {
		return fail(err.Error())
	}
	// Nothing the attempt started uses its directory any more unless a process left its group
	// and kept the output pipes (see outputs.finish).
	reusable := true
	defer func() {
		if err := a.work.release(workDir, reusable); err != nil {
			a.log.Warn("removing an attempt's work dir", "run_id", l.RunID, "attempt", l.Attempt, "err", err)
		}
	}()
	dir := l.Dir
	if dir == "" {
		dir = workDir
	}

	exe, err := resolveExecutable(l.Command, dir, a.paths)
	if err != nil {
		return fail("start: " + err.Error())
	}
	if !a.allow.allows(exe) {
		err := &notAllowedError{exe: exe, list: a.allow}
		a.log.Warn("refusing a command outside the allowed commands", "run_id", l.RunID, "attempt", l.Attempt, "executable", exe)
		return fail(err.Error())
	}
	var cmd *exec.Cmd
	if len(l.Command) > 0 {
		cmd = exec.Command(exe, l.Command[1:]...)
		cmd.Args[0] = l.Command[0]
	} else {
		cmd = exec.Command(shellPath, "-c", l.Shell)
	}
	home := os.Getenv("HOME")
	attr := &syscall.SysProcAttr{Setpgid: true}
	if c := a.runAs; c != nil {
		home = c.home
		attr.Credential = &syscall.Credential{Uid: c.uid, Gid: c.gid, Groups: c.groups}
	}
	cmd.Env = at.commandEnv(home, workDir)
	cmd.Dir = dir
	cmd.Stdin = a.devNull
	out, err := openOutputs(&at.stdout, &at.stderr, a.cfg.LogFlushInterval)
	if err != nil {
		return fail("start: " + err.Error())
	}
	cmd.Stdout, cmd.Stderr = out.w[0], out.w[1]
	ps := at.setupProcess(attr)
	defer ps.cleanup()
	cmd.SysProcAttr = attr

	at.writeNotes(ps.notes)
	// A starter's thread forks, so that Pdeathsig follows the agent (starter_unix.go).
	err = a.starters.start(cmd)
	turnOnce.Do(endTurn)
	if err != nil {
		out.close()
		return fail("start: " + err.Error())
	}
	out.started()
	ps.closeFD()
	pid := cmd.Process.Pid
	noted := len(ps.notes)
	ps.started(pid)
	at.writeNotes(ps.notes[noted:])
	group := strconv.Itoa(pid)
	a.guard.track(guardGroup, group)
	if ps.cgroupDir() != "" {
		a.guard.track(guardCgroup, ps.cgroupDir())
		defer a.guard.untrack(guardCgroup, ps.cgroupDir())
	}
	at.pmu.Lock()
	at.pid, at.alive, at.proc = pid, true, ps
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
		a.guard.untrack(guardGroup, group)
	}
	ps.killAll() // those that left the group, too
	at.alive = false
	at.pmu.Unlock()

	err = cmd.Wait()
	if !zombie {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // best effort where waitid is unavailable
		a.guard.untrack(guardGroup, group)
	}
	// Nothing the attempt started uses its directory once nothing holds its output pipes.
	reusable = out.finish()

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
	case err == nil:
		o.status = statusSucceeded
	case errors.As(err, &ee):
		o.status, o.err = statusFailed, ee.Error() // "exit status 3", "signal: killed"
	default:
		o.status, o.err = statusFailed, err.Error()
	}
	return o
}

// writeNotes writes the agent's notes about the attempt (limits it could not apply) to the
// attempt's log, on stderr, each line starting "stint: ".
func (at *attempt) writeNotes(notes []string) {
	for _, n := range notes {
		_, _ = at.stderr.Write([]byte("stint: " + n + "\n"))
	}
}

// signalLocked signals the attempt's process group if its process is running, and for
// SIGKILL its cgroup too; at.pmu held.
func (at *attempt) signalLocked(sig syscall.Signal) {
	if at.alive {
		_ = syscall.Kill(-at.pid, sig)
		if sig == syscall.SIGKILL && at.proc != nil {
			at.proc.killAll()
		}
	}
}

// killGroup kills process group pg.
func killGroup(pg int) { _ = syscall.Kill(-pg, syscall.SIGKILL) }

// ownGroup puts a process in a process group of its own.
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
