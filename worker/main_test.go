package worker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// TestMain lets the test binary play two other parts, chosen by its first argument:
//
//   - "worker-guard": a worker's guard process (RunGuard on stdin), as `stint worker-guard` is;
//   - "agent-helper SHELL WORKDIR [guard]": a process running an agent (Config.WorkDir
//     WORKDIR), against a fake server, that runs the shell script SHELL and prints "pid N"
//     once the script wrote the number N, then runs until it is killed; with "guard", the
//     agent has a guard (this binary again);
//   - "starter-on-main": starters whose first loop runs on the main thread (starterOnMain),
//
// so that tests can kill a whole agent process and see what outlives it. The main goroutine
// is locked to the main thread (init), so that only a test that means to puts a starter there.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "worker-guard":
			signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
			if err := RunGuard(os.Stdin); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		case "agent-helper":
			os.Exit(agentHelper(os.Args[2:]))
		case "starter-on-main":
			starterOnMain()
		}
	}
	os.Exit(m.Run())
}

func init() { runtime.LockOSThread() }

// starterOnMain runs a starter's loop on the main thread, as the runtime may schedule one,
// has a starter start `sleep 100` with a death signal, closes the starters and prints
// "closed PID"; then it waits to be killed: its death would kill the sleep whatever close did.
func starterOnMain() {
	s := &starters{reqs: make(chan startReq), done: make(chan struct{})}
	go func() {
		cmd := exec.Command("sleep", "100")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := s.start(cmd); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		s.close()
		fmt.Printf("closed %d\n", cmd.Process.Pid)
		_ = cmd.Wait()
	}()
	s.wg.Add(1)
	func() {
		defer s.wg.Done()
		s.loop() // on the main thread: init locked the main goroutine to it
	}()
	select {}
}

// guardArgv starts this test binary as a guard.
func guardArgv() []string { return []string{os.Args[0], "worker-guard"} }

func agentHelper(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "agent-helper: want SHELL WORKDIR [guard]")
		return 2
	}
	s := newFake()
	cfg := Config{Server: s, ID: "helper", Commands: true, FlushTimeout: time.Second, WorkDir: args[1],
		Capacity: apitype.Capacity{Slots: 2}}
	if len(args) > 2 && args[2] == "guard" {
		cfg.Guard = guardArgv()
	}
	a, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = a.Run(context.Background()) }()
	s.add(shellLease("r", args[0]))
	var line string
	if !awaitHelper(s, func() bool {
		first, _, ok := strings.Cut(s.logLocked("r", "stdout"), "\n")
		line = first
		return ok
	}) {
		fmt.Fprintln(os.Stderr, "agent-helper: the script printed no pid")
		return 1
	}
	// Another attempt, beside it, ends and leaves its directory idle, kept for a later one.
	s.add(shellLease("beside", "true"))
	if !awaitHelper(s, func() bool { _, done := s.completionLocked("beside"); return done }) {
		fmt.Fprintln(os.Stderr, "agent-helper: the attempt beside did not complete")
		return 1
	}
	fmt.Printf("pid %s\n", strings.TrimSpace(line))
	select {} // until killed
}

// awaitHelper waits until cond (called with s.mu held) holds, as long as a test waits for
// anything; the helper has no testing.T to fail.
func awaitHelper(s *fakeServer, cond func() bool) bool {
	for deadline := time.Now().Add(waitFor); time.Now().Before(deadline); {
		s.mu.Lock()
		ok, ch := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-time.After(time.Second):
		}
	}
	return false
}
