package worker

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stretchr/testify/require"
)

func TestGPUConfig(t *testing.T) {
	t.Parallel()
	srv := newFake()
	tests := []struct {
		name     string
		gpus     []string
		count    int
		wantGPUs []string
		wantN    int
		err      string
	}{
		{name: "none", wantGPUs: []string{}},
		{name: "count names 0 to n-1", count: 3, wantGPUs: []string{"0", "1", "2"}, wantN: 3},
		{name: "devices set the count", gpus: []string{"2", "5"}, wantGPUs: []string{"2", "5"}, wantN: 2},
		{name: "devices and count agree", gpus: []string{"GPU-a", "GPU-b"}, count: 2, wantGPUs: []string{"GPU-a", "GPU-b"}, wantN: 2},
		{name: "devices and count disagree", gpus: []string{"0", "1"}, count: 3, err: "new worker: Capacity.GPU is 3 but GPUs names 2 devices"},
		{name: "negative count", count: -1, err: "new worker: Capacity.GPU must not be negative"},
		{name: "duplicate", gpus: []string{"0", "0"}, err: `new worker: GPU device "0" is named twice`},
		{name: "empty id", gpus: []string{""}, err: `new worker: GPU device id "" must be non-empty without surrounding space`},
		{name: "comma", gpus: []string{"0,1"}, err: `new worker: GPU device id "0,1" must not contain ',' or '='`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := slices.Clone(tt.gpus)
			a, err := New(Config{Server: srv, Commands: true, GPUs: in, Capacity: apitype.Capacity{GPU: tt.count}})
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantGPUs, a.cfg.GPUs)
			require.Equal(t, tt.wantN, a.cfg.Capacity.GPU)
			if len(in) > 0 {
				in[0] = "changed"
				require.Equal(t, tt.wantGPUs, a.cfg.GPUs, "the agent keeps its own copy of GPUs")
			}
		})
	}
}

// The worker registers as many GPUs as it names devices.
func TestGPURegistered(t *testing.T) {
	t.Parallel()
	s := newFake()
	var req *apitype.RegisterRequest
	a, err := New(Config{
		Server:   &recordingRegister{Server: s, got: &req},
		ID:       "w1",
		Capacity: apitype.Capacity{Slots: 2},
		GPUs:     []string{"1", "3", "4"},
		Commands: true,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	s.await(t, "registration", func() bool { return s.registers == 1 })
	cancel()
	require.NoError(t, awaitDone(t, done))
	require.Equal(t, apitype.Capacity{GPU: 3, Slots: 2}, req.Capacity)
}

func gpuLease(l apitype.Lease, n int) apitype.Lease {
	l.Requirements = &apitype.Requirements{GPU: n}
	return l
}

// blockingGPUHandler sends each task's GPUs on got, then blocks until release is closed,
// ignoring its context.
func blockingGPUHandler(got chan<- []string, release <-chan struct{}) Handler {
	return func(_ context.Context, t *Task) error {
		got <- t.GPUs
		<-release
		return nil
	}
}

func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatal("timed out waiting on a channel")
		var zero T
		return zero
	}
}

// Handlers running at once get disjoint devices, lowest free first, in Task.GPUs; a run that
// needs no GPU gets none; devices come back when the handler returns.
func TestGPUHandlersGetDisjointDevices(t *testing.T) {
	t.Parallel()
	s := newFake()
	got := make(chan []string, 8)
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	a, _, _ := startAgent(t, s, func(c *Config) {
		c.Capacity.Slots = 8
		c.GPUs = []string{"0", "1", "2", "3"}
		c.Handlers["gpu"] = blockingGPUHandler(got, release)
	})
	s.add(gpuLease(handlerLease("a", "gpu"), 2))
	require.Equal(t, []string{"0", "1"}, recv(t, got))
	s.add(gpuLease(handlerLease("b", "gpu"), 1))
	require.Equal(t, []string{"2"}, recv(t, got))
	s.add(handlerLease("none", "gpu"))
	require.Nil(t, recv(t, got), "a run that needs no GPU gets none")
	s.add(gpuLease(handlerLease("c", "gpu"), 1))
	require.Equal(t, []string{"3"}, recv(t, got))

	held, _ := a.gpus.state()
	require.Equal(t, map[string][]string{"a": {"0", "1"}, "b": {"2"}, "c": {"3"}}, held)

	close(release)
	for _, id := range []string{"a", "b", "c", "none"} {
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, id).Status)
	}
	eventually(t, "devices given back", func() bool { held, _ := a.gpus.state(); return len(held) == 0 })

	// All four are free again, for one run that needs them all.
	s.add(gpuLease(handlerLease("all", "gpu"), 4))
	require.Equal(t, []string{"0", "1", "2", "3"}, recv(t, got))
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "all").Status)
}

// Many GPU runs at once on few devices, over and over: no device is ever given to two
// attempts at once.
func TestGPUConcurrentAttemptsNeverShare(t *testing.T) {
	t.Parallel()
	s := newFake()
	var mu sync.Mutex
	inUse := map[string]string{} // device -> run
	var clash []string
	a, _, _ := startAgent(t, s, func(c *Config) {
		// Two slots of at most 2 GPUs each: as the server books them, never more than 4.
		c.Capacity.Slots = 2
		c.GPUs = []string{"0", "1", "2", "3"}
		c.Handlers["gpu"] = func(ctx context.Context, task *Task) error {
			mu.Lock()
			for _, d := range task.GPUs {
				if other, ok := inUse[d]; ok {
					clash = append(clash, d+" in "+other+" and "+task.RunID)
				}
				inUse[d] = task.RunID
			}
			mu.Unlock()
			// Widen the window in which another attempt could be given the same devices.
			for range 100 {
				if ctx.Err() != nil {
					break
				}
				runtime.Gosched()
			}
			mu.Lock()
			for _, d := range task.GPUs {
				delete(inUse, d)
			}
			mu.Unlock()
			return nil
		}
	})
	var leases []apitype.Lease
	for i := range 40 {
		n := []int{2, 1, 0, 2, 2}[i%5]
		leases = append(leases, gpuLease(handlerLease("r"+strconv.Itoa(i), "gpu"), n))
	}
	s.add(leases...)
	for _, l := range leases {
		c := s.awaitCompletion(t, l.RunID)
		require.Equal(t, statusSucceeded, c.Status, "%s: %s", l.RunID, c.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, clash)
	held, _ := a.gpus.state()
	require.Empty(t, held)
}

// A lease that needs more devices than are free fails at once, without running, with an
// error that says so, and the agent logs it.
func TestGPUTooManyFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		gpus    []string
		holding int // GPUs a running attempt holds first
		need    int
		err     string
	}{
		{name: "more than the worker has", gpus: []string{"0", "1"}, need: 3, err: "needs 3 GPUs, 2 of 2 free on this worker"},
		{name: "worker has none", need: 1, err: "needs 1 GPU, 0 of 0 free on this worker"},
		{name: "some held", gpus: []string{"0", "1", "2", "3"}, holding: 3, need: 2, err: "needs 2 GPUs, 1 of 4 free on this worker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			var logs syncBuffer
			ran := make(chan string, 4)
			release := make(chan struct{})
			defer close(release)
			a, _, _ := startAgent(t, s, func(c *Config) {
				c.GPUs = tt.gpus
				c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				c.Handlers["gpu"] = func(_ context.Context, task *Task) error {
					ran <- task.RunID
					<-release
					return nil
				}
			})
			if tt.holding > 0 {
				s.add(gpuLease(handlerLease("holder", "gpu"), tt.holding))
				require.Equal(t, "holder", recv(t, ran))
			}
			s.add(gpuLease(handlerLease("r", "gpu"), tt.need))
			c := s.awaitCompletion(t, "r")
			require.Equal(t, statusFailed, c.Status)
			require.Equal(t, tt.err, c.Error)
			require.Nil(t, c.ExitCode)
			require.Empty(t, ran, "the handler must not run")
			require.Contains(t, logs.String(), "lease needs more GPUs than are free on this worker; failing the attempt")
			require.Contains(t, logs.String(), "run_id=r ")
			held, _ := a.gpus.state()
			require.NotContains(t, held, "r")
			require.Len(t, held["holder"], tt.holding)
		})
	}
}

// An attempt stopped while it waits for devices that a stopped attempt still holds ends as
// stopped, not failed, and never runs.
func TestGPUStoppedWhileWaiting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		lease  func(l apitype.Lease) apitype.Lease
		stop   func(s *fakeServer)
		status string
	}{
		{name: "cancel", lease: func(l apitype.Lease) apitype.Lease { return l },
			stop: func(s *fakeServer) { s.cancel = append(s.cancel, "r") }, status: statusCancelled},
		// Timing out proves the wait: without it, r would fail at once.
		{name: "timeout", lease: func(l apitype.Lease) apitype.Lease { l.Timeout = timeout(300 * time.Millisecond); return l },
			status: statusTimedOut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			ran := make(chan string, 4)
			release := make(chan struct{})
			defer close(release)
			a, _, _ := startAgent(t, s, func(c *Config) {
				c.GPUs = []string{"0"}
				c.KillGrace = time.Minute // the stuck holder is not reported meanwhile
				c.Handlers["stuck"] = func(_ context.Context, task *Task) error {
					ran <- task.RunID
					<-release // ignores its context
					return nil
				}
			})
			s.add(gpuLease(handlerLease("holder", "stuck"), 1))
			require.Equal(t, "holder", recv(t, ran))
			s.push(func(s *fakeServer) { s.cancel = append(s.cancel, "holder") })
			eventually(t, "holder stopped", func() bool {
				at := a.held("holder")
				return at != nil && reason(at.state.Load()) == reasonCancel
			})
			// The holder is being stopped: the next attempt waits for its device.
			s.add(gpuLease(tt.lease(handlerLease("r", "stuck")), 1))
			if tt.stop != nil {
				eventually(t, "r waiting", func() bool { _, w := a.gpus.state(); return w == 1 })
				s.push(tt.stop)
			}
			c := s.awaitCompletion(t, "r")
			require.Equal(t, tt.status, c.Status, c.Error)
			require.Empty(t, ran, "r must not run")
			held, waiting := a.gpus.state()
			require.Equal(t, map[string][]string{"holder": {"0"}}, held)
			require.Zero(t, waiting)
		})
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use, for capturing logs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
