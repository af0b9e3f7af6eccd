package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A handler gets the job's secret env beside its env.
func TestHandlerSecretEnv(t *testing.T) {
	t.Parallel()
	got := make(chan *Task, 1)
	s := newFake()
	startAgent(t, s, func(c *Config) {
		c.Handlers = map[string]Handler{"k": func(_ context.Context, t *Task) error { got <- t; return nil }}
	})
	l := handlerLease("r", "k")
	l.Env, l.SecretEnv = map[string]string{"A": "1"}, map[string]string{"S": "s3cret"}
	s.add(l)
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
	task := <-got
	require.Equal(t, map[string]string{"A": "1"}, task.Env)
	require.Equal(t, map[string]string{"S": "s3cret"}, task.SecretEnv)
}

func TestHandlerOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		kind    string
		handler Handler
		status  string
		err     string
		stdout  string
		stderr  string // prefix
	}{
		{
			name: "success with output",
			kind: "k",
			handler: func(_ context.Context, t *Task) error {
				var args struct{ N int }
				if err := t.DecodeArgs(&args); err != nil {
					return err
				}
				fmt.Fprintf(t.Stdout, "%s %s %d n=%d\n", t.RunID, t.JobName, t.Attempt, args.N)
				t.Logf("logged %d", 1)
				return nil
			},
			status: statusSucceeded,
			stdout: "r job-r 1 n=7\n",
			stderr: "logged 1\n",
		},
		{name: "noop", kind: "noop", handler: Noop, status: statusSucceeded},
		{
			name:    "error",
			kind:    "k",
			handler: func(context.Context, *Task) error { return errors.New("boom") },
			status:  statusFailed,
			err:     "boom",
		},
		{
			name:    "panic",
			kind:    "k",
			handler: func(context.Context, *Task) error { panic("kaboom") },
			status:  statusFailed,
			err:     "panic: kaboom",
			stderr:  "panic: kaboom\n\ngoroutine ",
		},
		{name: "unknown kind", kind: "nope", status: statusFailed, err: `no handler for kind "nope" on this worker`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			startAgent(t, s, func(c *Config) {
				c.Handlers = map[string]Handler{"noop": Noop}
				if tt.handler != nil {
					c.Handlers[tt.kind] = tt.handler
				}
			})
			l := handlerLease("r", tt.kind)
			l.Args = json.RawMessage(`{"n": 7}`)
			s.add(l)
			c := s.awaitCompletion(t, "r")
			require.Equal(t, tt.status, c.Status)
			require.Equal(t, tt.err, c.Error)
			require.Nil(t, c.ExitCode)
			require.Equal(t, tt.stdout, s.log("r", "stdout"))
			require.True(t, strings.HasPrefix(s.log("r", "stderr"), tt.stderr), "stderr %q", s.log("r", "stderr"))
		})
	}
}

// A stopped handler sees its context cancelled with the reason as the cause.
func TestHandlerStopped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout time.Duration
		push    func(s *fakeServer)
		cause   error
		status  string // "" for no completion
		err     string
	}{
		{name: "cancel on lease poll", push: func(s *fakeServer) { s.cancel = append(s.cancel, "r") }, cause: ErrCancelled, status: statusCancelled, err: "cancelled"},
		{name: "cancel on heartbeat", push: func(s *fakeServer) { s.hbCancel = append(s.hbCancel, "r") }, cause: ErrCancelled, status: statusCancelled, err: "cancelled"},
		{name: "timeout", timeout: 50 * time.Millisecond, cause: ErrTimedOut, status: statusTimedOut, err: "timed out after 50ms"},
		{name: "lost", push: func(s *fakeServer) { s.lost = append(s.lost, "r") }, cause: ErrLeaseLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			started := make(chan struct{})
			causes := make(chan error, 1)
			deadlines := make(chan bool, 1)
			a, _, _ := startAgent(t, s, func(c *Config) {
				c.Handlers = map[string]Handler{
					"noop": Noop,
					"wait": func(ctx context.Context, task *Task) error {
						_, ok := ctx.Deadline()
						deadlines <- ok && !task.Deadline.IsZero()
						close(started)
						<-ctx.Done()
						causes <- context.Cause(ctx)
						return ctx.Err()
					},
				}
			})
			l := handlerLease("r", "wait")
			if tt.timeout > 0 {
				l.Timeout = timeout(tt.timeout)
			}
			s.add(l)
			<-started
			require.Equal(t, tt.timeout > 0, <-deadlines)
			if tt.push != nil {
				s.push(tt.push)
			}
			require.Equal(t, tt.cause, <-causes)
			if tt.status == "" {
				eventually(t, "attempt released", func() bool { l, u := a.holding(); return l == 0 && u == 0 })
				s.add(handlerLease("after", "noop"))
				s.awaitCompletion(t, "after")
				_, reported := s.completion("r")
				require.False(t, reported)
				return
			}
			c := s.awaitCompletion(t, "r")
			require.Equal(t, tt.status, c.Status)
			require.Equal(t, tt.err, c.Error)
		})
	}
}

// A stopped handler that does not return is reported after KillGrace; it keeps its slot until
// it returns.
func TestHandlerIgnoringCancelIsReported(t *testing.T) {
	t.Parallel()
	s := newFake()
	release := make(chan struct{})
	started := make(chan struct{})
	a, _, _ := startAgent(t, s, func(c *Config) {
		c.KillGrace = 50 * time.Millisecond
		c.Capacity.Slots = 1
		c.Handlers = map[string]Handler{"stuck": func(context.Context, *Task) error {
			close(started)
			<-release
			return nil
		}}
	})
	s.add(handlerLease("r", "stuck"))
	<-started
	s.push(func(s *fakeServer) { s.cancel = append(s.cancel, "r") })
	c := s.awaitCompletion(t, "r")
	require.Equal(t, statusCancelled, c.Status)
	require.Equal(t, "cancelled (handler still running 50ms later)", c.Error)
	eventually(t, "lease released", func() bool { l, _ := a.holding(); return l == 0 })
	_, used := a.holding()
	require.Equal(t, 1, used, "the stuck handler keeps its slot")
	close(release)
	eventually(t, "slot freed", func() bool { _, u := a.holding(); return u == 0 })
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.completions, 1, "no second completion")
}

func TestDecodeArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    string
		want    map[string]any
		wantErr bool
	}{
		{name: "none", args: "", want: map[string]any{}},
		{name: "null", args: "null", want: map[string]any{}},
		{name: "object", args: `{"a":"b"}`, want: map[string]any{"a": "b"}},
		{name: "not json", args: `{`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			task := &Task{Args: json.RawMessage(tt.args)}
			var got map[string]any
			err := task.DecodeArgs(&got)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// A Task built by hand (as in a handler's unit test) does not panic on Logf.
func TestTaskLogfWithoutWriters(t *testing.T) {
	t.Parallel()
	(&Task{}).Logf("nothing %d", 1)
	var b strings.Builder
	(&Task{Stderr: &b}).Logf("line %d", 1)
	require.Equal(t, "line 1\n", b.String())
}
