package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Handler runs one attempt of a handler job in the worker's process. It returns nil for
// success; an error fails the attempt with the error's text (and the job's retry policy
// decides what happens next); a panic is recovered and fails the attempt with the panic
// message.
//
// ctx is cancelled when the run is cancelled, when the job's timeout expires (ctx also carries
// that deadline), when the lease is lost, and when a draining worker gives up waiting;
// context.Cause(ctx) says which (ErrCancelled, ErrTimedOut, ErrLeaseLost, ErrShutdown). A
// handler should return soon after: the agent reports a stopped attempt once the handler
// returns, or after Config.KillGrace if it does not.
//
// Execution is at least once: an attempt may run again after a lost lease or a crash, so a
// handler with effects outside stint should make them idempotent, keyed by Task.RunID.
type Handler func(ctx context.Context, t *Task) error

// Noop is a handler that does nothing and succeeds. The server registers it as the built-in
// "noop" kind.
func Noop(context.Context, *Task) error { return nil }

// Task is the attempt a Handler runs.
type Task struct {
	RunID   string
	JobID   string
	JobName string
	Attempt int // 1 for the first attempt of the run
	// Args is the run's arguments as JSON (an object), nil when the run has none.
	Args json.RawMessage
	Env  map[string]string
	// SecretEnv are the job's secret variables in clear (the lease's): for this attempt
	// only. Don't log them.
	SecretEnv map[string]string
	// Deadline is when the job's timeout expires; zero when the job has none.
	Deadline time.Time
	// GPUs are the GPU devices this attempt was given, as CUDA names them (Config.GPUs), when
	// its run needs some (requirements.gpu); nil otherwise. They are the attempt's alone until
	// the handler returns. A handler runs in the worker's process, so CUDA_VISIBLE_DEVICES
	// cannot be set for it: it must select these devices itself (for example by passing them
	// to its library, or to a process it starts as CUDA_VISIBLE_DEVICES).
	GPUs []string

	// Stdout and Stderr stream to the run's log, as a command's output does. They are safe for
	// concurrent use. Output past Config.LogCap is dropped.
	Stdout io.Writer
	Stderr io.Writer
}

// Logf writes one line to the run's log (stream stderr), adding a newline if format lacks one.
func (t *Task) Logf(format string, args ...any) {
	if t.Stderr == nil {
		return
	}
	b := fmt.Appendf(make([]byte, 0, 128), format, args...)
	if len(b) == 0 || b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	_, _ = t.Stderr.Write(b)
}

// DecodeArgs unmarshals the run's arguments into v. No arguments decode as the empty object.
func (t *Task) DecodeArgs(v any) error {
	args := bytes.TrimSpace(t.Args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("decode args: %w", err)
	}
	return nil
}
