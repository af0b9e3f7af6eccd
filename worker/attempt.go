package worker

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// reason is an attempt's state: running, done (it ended by itself), or why it was stopped. The
// first transition away from running wins, so that an attempt that ends as it is stopped gets
// one outcome.
type reason int32

const (
	running reason = iota
	reasonDone
	reasonCancel
	reasonTimeout
	reasonShutdown
	reasonLost
)

// Attempt outcomes as the protocol spells them.
const (
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
	statusTimedOut  = "timed_out"
	statusCancelled = "cancelled"
	statusLost      = "lost"
)

// attempt is one leased run on this worker. It takes a slot while its goroutine runs, and
// holds its lease (in Agent.attempts) until its completion is delivered or the lease is lost.
type attempt struct {
	agent *Agent
	lease *apitype.Lease
	task  Task

	ctx    context.Context
	cancel context.CancelCauseFunc

	state         atomic.Int32 // a reason
	lost          atomic.Bool  // the lease is gone: report nothing
	completed     atomic.Bool  // the completion was handed to the shipper
	leaseReleased atomic.Bool

	renewedAt time.Time // when the lease was last known valid; guarded by agent.mu

	// Process state, for command attempts; timer is the SIGKILL timer of a stopped process
	// or the give-up timer of a stopped handler.
	pmu   sync.Mutex
	pid   int
	alive bool       // the process was started and not yet waited for
	proc  *procSetup // its cgroup, when it has one
	timer *time.Timer

	log            attemptLog
	stdout, stderr streamWriter
}

func (at *attempt) init(a *Agent, l *apitype.Lease, now time.Time) {
	at.agent = a
	at.lease = l
	at.renewedAt = now
	at.ctx, at.cancel = context.WithCancelCause(a.attemptParent)
	at.stdout = streamWriter{at: at, stream: streamStdout}
	at.stderr = streamWriter{at: at, stream: streamStderr}
	at.task = Task{
		RunID:     l.RunID,
		JobID:     l.JobID,
		JobName:   l.JobName,
		Attempt:   l.Attempt,
		Args:      l.Args,
		Env:       l.Env,
		SecretEnv: l.SecretEnv,
		Stdout:    &at.stdout,
		Stderr:    &at.stderr,
	}
}

func (at *attempt) isCommand() bool { return at.lease.Handler == "" }

func (at *attempt) timeout() time.Duration {
	if at.lease.Timeout == nil {
		return 0
	}
	return at.lease.Timeout.Std()
}

// outcome is how an attempt ended.
type outcome struct {
	status   string
	exitCode *int
	err      string
}

func (o outcome) completion(l *apitype.Lease) apitype.Completion {
	return apitype.Completion{RunID: l.RunID, Token: l.Token, Status: o.status, ExitCode: o.exitCode, Error: o.err}
}

// stoppedOutcome is the outcome of an attempt stopped for r.
func (at *attempt) stoppedOutcome(r reason) outcome {
	switch r {
	case reasonCancel:
		return outcome{status: statusCancelled, err: "cancelled"}
	case reasonTimeout:
		return outcome{status: statusTimedOut, err: fmt.Sprintf("timed out after %s", at.timeout())}
	default: // reasonShutdown; a lost attempt reports nothing
		return outcome{status: statusLost, err: "worker shutting down: attempt stopped"}
	}
}

// run executes the attempt in its own goroutine and reports the outcome.
func (at *attempt) run() {
	ctx, release := at.withTimeout()
	o := at.execute(ctx)
	release()
	at.finish(o)
}

// execute runs what the lease says, holding the GPU devices it needs while it runs.
func (at *attempt) execute(ctx context.Context) outcome {
	l := at.lease
	var body func() outcome
	switch {
	case reason(at.state.Load()) != running:
		return at.stoppedOutcome(reason(at.state.Load()))
	case l.Handler != "":
		h, ok := at.agent.cfg.Handlers[l.Handler]
		if !ok {
			at.state.CompareAndSwap(int32(running), int32(reasonDone))
			return outcome{status: statusFailed, err: fmt.Sprintf("no handler for kind %q on this worker", l.Handler)}
		}
		body = func() outcome { return at.runHandler(ctx, h) }
	case len(l.Command) > 0 || l.Shell != "":
		if !at.agent.cfg.Commands {
			return outcome{status: statusFailed, err: "this worker does not run commands"}
		}
		body = at.runCommand
	default:
		return outcome{status: statusFailed, err: "lease has nothing to run: no command, shell or handler"}
	}
	if o, ok := at.acquireGPUs(ctx); !ok {
		return o
	}
	// The devices come back when the process has exited or the handler has returned, however
	// the attempt ends; a handler that ignores its stop keeps them as it keeps its slot.
	defer at.agent.gpus.release(at)
	return body()
}

// withTimeout returns the context to run under: the attempt's, with the job's timeout if it
// has one, which stops the attempt when it expires. release frees the timer.
func (at *attempt) withTimeout() (context.Context, func()) {
	d := at.timeout()
	if d <= 0 {
		return at.ctx, func() {}
	}
	ctx, cancel := context.WithTimeoutCause(at.ctx, d, ErrTimedOut)
	at.task.Deadline, _ = ctx.Deadline()
	stop := context.AfterFunc(ctx, func() {
		if context.Cause(ctx) == ErrTimedOut {
			at.stop(reasonTimeout)
		}
	})
	return ctx, func() {
		stop()
		cancel()
	}
}

// finish flushes the attempt's output, hands its completion to the shipper (unless the lease
// is lost or the completion was already given up on), and drops the goroutine's reference.
func (at *attempt) finish(o outcome) {
	at.pmu.Lock()
	if at.timer != nil {
		at.timer.Stop()
	}
	at.pmu.Unlock()
	at.closeLog()
	if !at.lost.Load() && at.completed.CompareAndSwap(false, true) {
		at.agent.ship.addCompletion(at, o.completion(at.lease))
	}
	at.cancel(nil)
	at.agent.goroutineDone()
}

// runHandler calls h, the attempt's handler, and maps what it returned to an outcome.
func (at *attempt) runHandler(ctx context.Context, h Handler) outcome {
	err := at.call(ctx, h)
	if context.Cause(ctx) == ErrTimedOut {
		// The handler saw the deadline before the timeout watcher ran.
		at.stop(reasonTimeout)
	}
	if at.state.CompareAndSwap(int32(running), int32(reasonDone)) {
		if err != nil {
			msg := err.Error()
			if msg == "" {
				msg = "handler failed"
			}
			return outcome{status: statusFailed, err: msg}
		}
		return outcome{status: statusSucceeded}
	}
	return at.stoppedOutcome(reason(at.state.Load()))
}

// call runs h, turning a panic into an error and writing its stack to the run's log.
func (at *attempt) call(ctx context.Context, h Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
			_, _ = fmt.Fprintf(&at.stderr, "panic: %v\n\n%s", p, debug.Stack())
		}
	}()
	return h(ctx, &at.task)
}

// stop stops a running attempt for r: it cancels the context and signals the process group
// (SIGTERM, then SIGKILL after KillGrace; SIGKILL at once for a lost lease). A stopped
// handler that does not return within KillGrace is reported anyway. Stopping an attempt that
// already ended or was already stopped does nothing.
func (at *attempt) stop(r reason) {
	if !at.state.CompareAndSwap(int32(running), int32(r)) {
		return
	}
	at.cancel(causeOf(r))
	at.pmu.Lock()
	defer at.pmu.Unlock()
	grace := at.agent.cfg.KillGrace
	if !at.isCommand() {
		at.timer = time.AfterFunc(grace, at.giveUp)
		return
	}
	if r == reasonLost {
		at.signalLocked(syscall.SIGKILL)
		return
	}
	at.signalLocked(syscall.SIGTERM)
	at.timer = time.AfterFunc(grace, func() {
		at.pmu.Lock()
		defer at.pmu.Unlock()
		at.signalLocked(syscall.SIGKILL)
	})
}

func causeOf(r reason) error {
	switch r {
	case reasonCancel:
		return ErrCancelled
	case reasonTimeout:
		return ErrTimedOut
	case reasonLost:
		return ErrLeaseLost
	default:
		return ErrShutdown
	}
}

// markLost acts on a lost lease: kill the attempt at once, report nothing, and stop
// heartbeating the lease.
func (at *attempt) markLost() {
	at.lost.Store(true)
	at.stop(reasonLost)
	at.cancel(ErrLeaseLost)
	if at.isCommand() {
		// The attempt may have been stopped already with SIGTERM; do not wait for the grace.
		at.pmu.Lock()
		at.signalLocked(syscall.SIGKILL)
		at.pmu.Unlock()
	}
	at.agent.releaseLeases(at)
}

// giveUp reports a stopped handler that has not returned within KillGrace. Its goroutine keeps
// its slot until it returns.
func (at *attempt) giveUp() {
	if at.lost.Load() || !at.completed.CompareAndSwap(false, true) {
		return
	}
	r := reason(at.state.Load())
	grace := at.agent.cfg.KillGrace
	at.agent.log.Warn("handler did not return after it was stopped; reporting the attempt",
		"run_id", at.lease.RunID, "attempt", at.lease.Attempt, "grace", grace)
	at.closeLog()
	o := at.stoppedOutcome(r)
	o.err += fmt.Sprintf(" (handler still running %s later)", grace)
	at.agent.ship.addCompletion(at, o.completion(at.lease))
}
