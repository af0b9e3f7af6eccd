//go:build unix

package worker

import (
	"errors"
	"os/exec"
	"runtime"
	"sync"
)

// errStartersClosed is what a start asked of closed starters gets.
var errStartersClosed = errors.New("the worker stopped running commands")

// starters start the attempts' processes from a few goroutines, each locked to its OS thread
// from its start until close: Pdeathsig (Linux) sends its signal when the thread that started
// the process ends, not the process, so a process started from a thread that lives as long
// as the agent runs commands dies with the agent and not before. The attempts wait for and
// reap their processes on their own goroutines, which hold no thread: locking each attempt's
// goroutine to its thread for the process's whole life instead (as the agent once did) made
// one locked thread per running attempt, each wake-up a hand-off between threads, and under
// many slots starts stalled behind them long enough for leases to expire.
type starters struct {
	reqs chan startReq
	done chan struct{} // closed by close
	wg   sync.WaitGroup

	// turns bounds the attempts that prepare a start at once (make their directory and
	// cgroup, then wait for a starter): the others wait before making anything, so that a
	// thousand attempts leased together do not make a thousand directories at once in one
	// parent and hold them while the starters start them a few at a time.
	turns chan struct{}
}

type startReq struct {
	cmd  *exec.Cmd
	errc chan error
}

// newStarters starts n starters, each on a thread of its own, and returns once they run.
func newStarters(n int) *starters {
	s := &starters{reqs: make(chan startReq), done: make(chan struct{}), turns: make(chan struct{}, turnsPerStarter*n)}
	for range n {
		s.wg.Go(s.loop)
	}
	return s
}

// loop serves starts until close. It never unlocks its thread: when it returns, the runtime
// ends the thread, and a process it started that still runs then gets its death signal.
// The runtime never ends the process's main thread, though: a loop that finds itself
// locked to it hands its place to another goroutine and returns still locked, which keeps
// the main thread from every other goroutine, starters included.
func (s *starters) loop() {
	runtime.LockOSThread()
	if onMainThread() {
		s.wg.Go(s.loop)
		return
	}
	for {
		select {
		case r := <-s.reqs:
			r.errc <- r.cmd.Start()
		case <-s.done:
			return
		}
	}
}

// turnsPerStarter is how many attempts per starter may prepare a start at once. Fewer left
// the starters idle at times on a busy machine (bench exec, 2 CPUs: 4 a starter reached
// 53-62% of the machine's limit, 16 reached 60-67%, 64 63-66%); with no bound (58-62%) only
// the slots bound the directories made at once when a worker starts.
const turnsPerStarter = 16

// turn waits for a turn to prepare a start and returns what gives it back, or an error once
// the starters closed.
func (s *starters) turn() (done func(), err error) {
	select {
	case <-s.done:
		return nil, errStartersClosed
	default:
	}
	select {
	case s.turns <- struct{}{}:
		return func() { <-s.turns }, nil
	case <-s.done:
		return nil, errStartersClosed
	}
}

// start starts cmd (cmd.Start) on a starter's thread and returns its error.
func (s *starters) start(cmd *exec.Cmd) error {
	r := startReq{cmd: cmd, errc: make(chan error, 1)}
	select {
	case s.reqs <- r:
		return <-r.errc
	case <-s.done:
		return errStartersClosed
	}
}

// close ends the starters and their threads, once the starts under way returned. Call it
// once no attempt runs: a process still running that a starter started gets its death
// signal (SIGKILL), as if the agent had died.
func (s *starters) close() {
	if s == nil {
		return
	}
	close(s.done)
	s.wg.Wait()
}

// startersN is how many starters an agent runs: one per CPU the Go runtime uses, at least
// two. More would not start more at once: forks take syscall.ForkLock one at a time.
func startersN() int { return max(2, runtime.GOMAXPROCS(0)) }
