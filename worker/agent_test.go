package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stretchr/testify/require"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	srv := newFake()
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{name: "no server", cfg: Config{Commands: true}, err: "new worker: Server is required"},
		{name: "nothing to run", cfg: Config{Server: srv}, err: "new worker: nothing to run: set Commands or at least one handler"},
		{name: "nil handler", cfg: Config{Server: srv, Handlers: map[string]Handler{"k": nil}}, err: `new worker: handler for kind "k" is nil`},
		{name: "empty kind", cfg: Config{Server: srv, Handlers: map[string]Handler{"": Noop}}, err: "new worker: handler kind must not be empty"},
		{name: "negative slots", cfg: Config{Server: srv, Commands: true, Capacity: apitype.Capacity{Slots: -1}}, err: "new worker: Capacity.Slots must not be negative"},
		{name: "negative grace", cfg: Config{Server: srv, Commands: true, KillGrace: -time.Second}, err: "new worker: KillGrace must not be negative"},
		{name: "ok", cfg: Config{Server: srv, Commands: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, err := New(tt.cfg)
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.NotEmpty(t, a.ID())
			require.Positive(t, a.slots)
		})
	}
}

func TestRegister(t *testing.T) {
	t.Parallel()
	s := newFake()
	var req *apitype.RegisterRequest
	a, err := New(Config{
		Server:   &recordingRegister{Server: s, got: &req},
		ID:       "w7",
		Labels:   map[string]string{"zone": "a"},
		Capacity: apitype.Capacity{CPU: 2, Slots: 3},
		Commands: true,
		Handlers: map[string]Handler{"b": Noop, "a": Noop},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	s.await(t, "registration", func() bool { return s.registers == 1 })
	cancel()
	require.NoError(t, awaitDone(t, done))
	require.Equal(t, &apitype.RegisterRequest{
		ID:       "w7",
		Labels:   map[string]string{"zone": "a"},
		Capacity: apitype.Capacity{CPU: 2, Slots: 3},
		Handlers: []string{"a", "b"},
		Commands: true,
	}, req)
}

type recordingRegister struct {
	Server
	got **apitype.RegisterRequest
}

func (r *recordingRegister) Register(ctx context.Context, req *apitype.RegisterRequest) (*apitype.RegisterResponse, error) {
	*r.got = req
	return r.Server.Register(ctx, req)
}

func TestRegisterErrors(t *testing.T) {
	t.Parallel()
	t.Run("transient errors are retried", func(t *testing.T) {
		t.Parallel()
		s := newFake()
		fails := 2
		s.onRegister = func() error {
			if fails > 0 {
				fails--
				return &apitype.Problem{Status: 503, Title: "Service Unavailable"}
			}
			return nil
		}
		startAgent(t, s, nil)
		s.add(handlerLease("r", "noop"))
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
	})
	t.Run("an id in use by a live session is waited for", func(t *testing.T) {
		t.Parallel()
		s := newFake()
		refusals := 2
		s.onRegister = func() error {
			if refusals > 0 {
				refusals--
				return &apitype.Problem{Status: 409, Title: "Conflict", Detail: `worker id "w" is in use by a live session`}
			}
			return nil
		}
		startAgent(t, s, nil)
		s.add(handlerLease("r", "noop"))
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
		s.mu.Lock()
		defer s.mu.Unlock()
		require.Zero(t, refusals, "registered once the other session let go")
	})
	t.Run("permanent error is fatal", func(t *testing.T) {
		t.Parallel()
		s := newFake()
		s.onRegister = func() error { return &apitype.Problem{Status: 403, Title: "Forbidden"} }
		_, _, done := startAgent(t, s, nil)
		require.EqualError(t, awaitDone(t, done), "register worker: Forbidden")
	})
}

// The agent registers again when the server says it does not know the worker, whether it
// says so with ErrUnknownWorker or with a 404 problem.
func TestReregisterOnUnknownWorker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
	}{
		{name: "sentinel", err: fmt.Errorf("lease: %w", ErrUnknownWorker)},
		{name: "problem 404", err: &apitype.Problem{Status: 404, Title: "Not Found", Detail: "no worker w1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFake()
			unknown := true
			s.onLease = func() error {
				if unknown {
					return tt.err
				}
				return nil
			}
			s.onRegister = func() error {
				if s.registers == 1 {
					unknown = false // the second registration makes the worker known
				}
				return nil
			}
			startAgent(t, s, nil)
			s.add(handlerLease("r", "noop"))
			require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
			s.mu.Lock()
			defer s.mu.Unlock()
			require.Equal(t, 2, s.registers)
		})
	}
}

// A worker whose server forgot it re-attaches with its session and held leases, and its
// attempts run on; those the server reports lost are killed.
func TestReattachKeepsRunningAttempts(t *testing.T) {
	t.Parallel()
	s := newFake()
	s.hbInterval = 10 * time.Millisecond
	s.resume, s.resumeLost = true, []string{"b"}
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	stopped := make(chan error, 2)
	startAgent(t, s, func(c *Config) {
		c.Handlers = map[string]Handler{"hold": func(ctx context.Context, _ *Task) error {
			started <- struct{}{}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				stopped <- context.Cause(ctx)
				return ctx.Err()
			}
		}}
	})
	s.add(handlerLease("a", "hold"), handlerLease("b", "hold"))
	<-started
	<-started
	s.mu.Lock()
	once := true
	s.onHeartbeat = func() error {
		if once {
			once = false
			return ErrUnknownWorker // the worker's server died; this one does not know it
		}
		return nil
	}
	s.mu.Unlock()
	s.await(t, "a re-registration", func() bool { return s.registers == 2 })
	require.ErrorIs(t, <-stopped, ErrLeaseLost, "b was not kept")
	close(release)
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "a").Status, "a ran on")
	s.mu.Lock()
	defer s.mu.Unlock()
	re := s.regs[1]
	require.Equal(t, "session-1", re.Session)
	require.ElementsMatch(t, []apitype.LeaseRef{{RunID: "a", Token: "tok-a"}, {RunID: "b", Token: "tok-b"}}, re.Held)
	for _, c := range s.completions {
		require.NotEqual(t, "b", c.RunID, "a lost attempt is not reported")
	}
	require.Empty(t, s.regs[0].Session, "a process that starts resumes nothing")
}

func TestHeartbeatCarriesHeldLeases(t *testing.T) {
	t.Parallel()
	s := newFake()
	s.hbInterval = 10 * time.Millisecond
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	startAgent(t, s, func(c *Config) {
		c.Handlers = map[string]Handler{"hold": func(context.Context, *Task) error {
			started <- struct{}{}
			<-release
			return nil
		}}
	})
	s.add(handlerLease("a", "hold"), handlerLease("b", "hold"))
	<-started
	<-started
	s.await(t, "a heartbeat with both leases", func() bool {
		if len(s.heartbeats) == 0 {
			return false
		}
		held := map[apitype.LeaseRef]bool{}
		for _, r := range s.heartbeats[len(s.heartbeats)-1].Held {
			held[r] = true
		}
		return len(held) == 2 && held[apitype.LeaseRef{RunID: "a", Token: "tok-a"}] && held[apitype.LeaseRef{RunID: "b", Token: "tok-b"}]
	})
	close(release)
	s.awaitCompletion(t, "a")
	s.awaitCompletion(t, "b")
	s.await(t, "an empty heartbeat", func() bool {
		hb := s.heartbeats[len(s.heartbeats)-1]
		return hb.Held != nil && len(hb.Held) == 0
	})
}

// The agent never runs more attempts than it has slots, and never asks for more.
func TestSlotLimit(t *testing.T) {
	t.Parallel()
	const slots, runs = 3, 60
	s := newFake()
	var running, peak atomic.Int32
	startAgent(t, s, func(c *Config) {
		c.Capacity.Slots = slots
		c.Handlers = map[string]Handler{"count": func(context.Context, *Task) error {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			for range 1000 {
				_ = strconv.Itoa(int(n)) // a little work while holding the slot
			}
			running.Add(-1)
			return nil
		}}
	})
	for i := range runs {
		s.add(handlerLease("r"+strconv.Itoa(i), "count"))
	}
	for i := range runs {
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r"+strconv.Itoa(i)).Status)
	}
	require.LessOrEqual(t, peak.Load(), int32(slots))
	s.mu.Lock()
	defer s.mu.Unlock()
	require.LessOrEqual(t, s.maxOutstanding, HeldLeasesPerSlot*slots)
	for _, m := range s.polls {
		require.LessOrEqual(t, m, slots)
		require.GreaterOrEqual(t, m, 0)
	}
}

// A slot frees when its attempt ends, before the completion reaches the server; while
// completions cannot be delivered, the worker holds at most HeldLeasesPerSlot times its slots.
func TestSlotFreesBeforeTheCompletionIsDelivered(t *testing.T) {
	t.Parallel()
	const slots, runs = 2, 3 * HeldLeasesPerSlot
	s := newFake()
	var deliver atomic.Bool
	s.onComplete = func(*apitype.CompleteRequest) error {
		if !deliver.Load() {
			return errors.New("the server cannot take completions now")
		}
		return nil
	}
	started := make(chan string, runs)
	startAgent(t, s, func(c *Config) {
		c.Capacity.Slots = slots
		c.Handlers = map[string]Handler{"quick": func(_ context.Context, task *Task) error {
			started <- task.RunID
			return nil
		}}
	})
	for i := range runs {
		s.add(handlerLease("r"+strconv.Itoa(i), "quick"))
	}
	for range HeldLeasesPerSlot * slots {
		select {
		case <-started:
		case <-time.After(waitFor):
			t.Fatal("timed out waiting for attempts to start")
		}
	}
	s.await(t, "a poll for nothing with the bound's leases held", func() bool {
		return len(s.outstanding) == HeldLeasesPerSlot*slots && s.polls[len(s.polls)-1] == 0
	})
	deliver.Store(true)
	for i := range runs {
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r"+strconv.Itoa(i)).Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, HeldLeasesPerSlot*slots, s.maxOutstanding)
}

// A worker with more slots than one lease request may ask for fills them all: each poll asks
// for at most apitype.MaxLeaseBatch runs, and the next one for the rest.
func TestSlotsBeyondOneLeaseBatch(t *testing.T) {
	t.Parallel()
	const slots = apitype.MaxLeaseBatch + 500
	s := newFake()
	var running atomic.Int32
	release := make(chan struct{})
	startAgent(t, s, func(c *Config) {
		c.Capacity.Slots = slots
		c.Handlers = map[string]Handler{"hold": func(context.Context, *Task) error {
			running.Add(1)
			<-release
			return nil
		}}
	})
	for i := range slots {
		s.add(handlerLease("r"+strconv.Itoa(i), "hold"))
	}
	s.await(t, "every slot leased", func() bool { return len(s.outstanding) == slots })
	close(release)
	for i := range slots {
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r"+strconv.Itoa(i)).Status)
	}
	require.EqualValues(t, slots, running.Load())
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Contains(t, s.polls, apitype.MaxLeaseBatch)
}

// A full worker keeps a poll outstanding with Max 0 (so pushes reach it), and polls again for
// work as soon as a slot frees.
func TestFullWorkerPollsWithMaxZero(t *testing.T) {
	t.Parallel()
	s := newFake()
	release := make(chan struct{})
	startAgent(t, s, func(c *Config) {
		c.Capacity.Slots = 1
		c.Handlers = map[string]Handler{"hold": func(context.Context, *Task) error { <-release; return nil }}
	})
	s.add(handlerLease("a", "hold"), handlerLease("b", "hold"))
	s.await(t, "a poll with Max 0", func() bool { return len(s.polls) > 0 && s.polls[len(s.polls)-1] == 0 })
	close(release)
	s.awaitCompletion(t, "a")
	s.awaitCompletion(t, "b")
}

// A full worker with runs waiting for it gathers room before it leases again: it does not
// poll as each slot frees but once an eighth of its slots are free, or Config.LeaseGather
// after.
func TestLeaseGather(t *testing.T) {
	t.Parallel()
	hold := func(t *testing.T, slots int, gather time.Duration, queued int) (*fakeServer, *Agent, context.CancelFunc, func(id string)) {
		s := newFake()
		var mu sync.Mutex
		release := map[string]chan struct{}{}
		released := map[string]bool{}
		ch := func(id string) chan struct{} {
			mu.Lock()
			defer mu.Unlock()
			if release[id] == nil {
				release[id] = make(chan struct{})
			}
			return release[id]
		}
		free := func(id string) {
			c := ch(id)
			mu.Lock()
			defer mu.Unlock()
			if !released[id] {
				released[id] = true
				close(c)
			}
		}
		a, cancel, _ := startAgent(t, s, func(c *Config) {
			c.Capacity.Slots = slots
			c.LeaseGather = gather
			c.Handlers = map[string]Handler{"hold": func(_ context.Context, task *Task) error {
				<-ch(task.RunID)
				return nil
			}}
		})
		t.Cleanup(func() {
			for i := range queued {
				free("r" + strconv.Itoa(i))
			}
		})
		for i := range queued {
			s.add(handlerLease("r"+strconv.Itoa(i), "hold"))
		}
		s.await(t, "every slot taken and a poll for nothing", func() bool {
			return len(s.outstanding) == slots && s.polls[len(s.polls)-1] == 0
		})
		return s, a, cancel, free
	}
	// polledFor reports whether a poll after the first two (every slot, then none) asked for n.
	polledFor := func(s *fakeServer, n int) func() bool {
		return func() bool { return len(s.polls) > 2 && slices.Contains(s.polls[2:], n) }
	}
	// used reports the slots taken; the agent decides whether to poll when a slot frees,
	// under the same lock.
	outstandingPoll := func(a *Agent, used int) func() bool {
		return func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.used == used && a.poll.cancel != nil && a.poll.max == 0 && !a.poll.aborted
		}
	}

	t.Run("room", func(t *testing.T) {
		t.Parallel()
		const slots = 16 // gathers 2
		s, a, _, release := hold(t, slots, time.Hour, slots+10)
		release("r0")
		eventually(t, "one slot free, the poll for nothing still outstanding", outstandingPoll(a, slots-1))
		release("r1")
		s.await(t, "a poll for the two free slots", polledFor(s, 2))
		s.mu.Lock()
		defer s.mu.Unlock()
		require.Equal(t, []int{slots, 0, 2}, s.polls[:3])
	})
	t.Run("completions", func(t *testing.T) {
		// The first completion call waits for nothing; the next waits for as many
		// completions as a poll gathers (3 here), or for the drain.
		t.Parallel()
		const slots = 24 // gathers 3
		s, a, stop, release := hold(t, slots, time.Hour, slots+10)
		var calls [][]string
		s.onComplete = func(req *apitype.CompleteRequest) error { // s.mu held
			var ids []string
			for _, c := range req.Completions {
				ids = append(ids, c.RunID)
			}
			calls = append(calls, ids)
			return nil
		}
		release("r0")
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r0").Status)
		release("r1")
		eventually(t, "r1's completion held, the ship loop past its wake-up", func() bool {
			a.ship.mu.Lock()
			defer a.ship.mu.Unlock()
			return len(a.ship.comps) == 1 && a.ship.comps[0].c.RunID == "r1" && len(a.ship.wake) == 0
		})
		stop() // the drain sends it
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r1").Status)
		s.mu.Lock()
		defer s.mu.Unlock()
		require.Equal(t, []string{"r0"}, calls[0])
		require.Equal(t, []string{"r1"}, calls[1])
	})
	t.Run("short answer", func(t *testing.T) {
		// The completion that ends while the poll for room is out waits for its answer;
		// the answer fills one of the two free slots, which ends the gather, and the
		// completion goes then.
		t.Parallel()
		const slots = 16
		s, _, _, release := hold(t, slots, time.Hour, slots)
		// Whether r16 was leased when r1's completion came (onComplete runs with s.mu held).
		var r16Leased bool
		s.onComplete = func(req *apitype.CompleteRequest) error {
			if req.Completions[0].RunID == "r1" {
				r16Leased = s.outstanding["r16"]
			}
			return nil
		}
		release("r0")
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r0").Status)
		release("r1")
		s.await(t, "a poll for the two free slots", polledFor(s, 2))
		s.add(handlerLease("r16", "hold"))
		t.Cleanup(func() { release("r16") })
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r1").Status)
		s.mu.Lock()
		defer s.mu.Unlock()
		require.True(t, r16Leased, "r1's completion went before the poll's answer")
	})
	// With a gather that ends (10 ms) or none, a poll for the one free slot comes.
	for name, gather := range map[string]time.Duration{"wait": 10 * time.Millisecond, "off": -1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const slots = 16
			s, _, _, release := hold(t, slots, gather, slots+10)
			release("r0")
			s.await(t, "a poll for the one free slot", polledFor(s, 1))
			require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r0").Status)
		})
	}
}

// While the worker gathers leases, its completion calls begin Config.LeaseGather apart
// unless as many completions as a lease gathers are waiting.
func TestCompletionWait(t *testing.T) {
	t.Parallel()
	const gather, room = 50 * time.Millisecond, 8
	last := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		busy  bool
		n     int
		since time.Duration
		want  time.Duration
	}{
		{"nothing to send", true, 0, 0, 0},
		{"not gathering", false, 1, 0, 0},
		{"a few, just after a call", true, 1, 10 * time.Millisecond, 40 * time.Millisecond},
		{"a few, the gather over", true, room - 1, gather, 0},
		{"a few, long after", true, 1, time.Hour, 0},
		{"as many as a lease gathers", true, room, 0, 0},
	} {
		got := completionWait(tc.busy, tc.n, room, gather, last, last.Add(tc.since))
		if tc.want <= 0 {
			require.LessOrEqual(t, got, time.Duration(0), tc.name)
		} else {
			require.Equal(t, tc.want, got, tc.name)
		}
	}
}

// A worker gathers while its last poll was full and fewer slots are free than a poll
// gathers, counting those a poll out for less than the gather asks for as taken.
func TestGathering(t *testing.T) {
	t.Parallel()
	const gather, room = 50 * time.Millisecond, 8
	for _, tc := range []struct {
		name         string
		full         bool
		free, asked  int
		age, gatherd time.Duration
		want         bool
	}{
		{"full, no room", true, room - 1, 0, 0, gather, true},
		{"full, room", true, room, 0, 0, gather, false},
		{"last poll short", false, 0, 0, 0, gather, false},
		{"off", true, 0, 0, 0, -1, false},
		{"a poll for the room just out", true, room + 2, room + 2, time.Millisecond, gather, true},
		{"a poll for more than room just out", true, 3 * room, 3 * room, time.Millisecond, gather, true},
		{"room beyond what the poll asks", true, 2 * room, room, time.Millisecond, gather, false},
		{"a poll held past the gather", true, room + 2, room + 2, gather, gather, false},
	} {
		require.Equal(t, tc.want, gathering(tc.full, tc.free, room, tc.asked, tc.age, tc.gatherd), tc.name)
	}
}

func TestCompleteRetries(t *testing.T) {
	t.Parallel()
	t.Run("transient errors", func(t *testing.T) {
		t.Parallel()
		s := newFake()
		fails := 3
		s.onComplete = func(*apitype.CompleteRequest) error {
			if fails > 0 {
				fails--
				if fails%2 == 0 {
					return errors.New("connection reset")
				}
				return &apitype.Problem{Status: 503, Title: "Service Unavailable"}
			}
			return nil
		}
		startAgent(t, s, nil)
		s.add(handlerLease("r", "noop"))
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
	})
	t.Run("a refused completion does not sink the batch", func(t *testing.T) {
		t.Parallel()
		s := newFake()
		s.onComplete = func(req *apitype.CompleteRequest) error {
			for _, c := range req.Completions {
				if c.RunID == "bad" {
					return &apitype.Problem{Status: 400, Title: "Bad Request"}
				}
			}
			return nil
		}
		// Hold the shipper in its first call so that the next completions queue up as one batch.
		gate := &gatedComplete{Server: s, entered: make(chan struct{}), release: make(chan struct{})}
		a, _, _ := startAgent(t, s, func(c *Config) {
			c.Server = gate
			c.Capacity.Slots = 8
		})
		s.add(handlerLease("g", "noop"))
		<-gate.entered
		s.add(handlerLease("ok1", "noop"), handlerLease("bad", "noop"), handlerLease("ok2", "noop"))
		eventually(t, "three completions queued", func() bool {
			a.ship.mu.Lock()
			defer a.ship.mu.Unlock()
			return len(a.ship.comps) == 3
		})
		close(gate.release)
		for _, id := range []string{"g", "ok1", "ok2"} {
			require.Equal(t, statusSucceeded, s.awaitCompletion(t, id).Status)
		}
		eventually(t, "all leases released", func() bool { l, u := a.holding(); return l == 0 && u == 0 })
		_, ok := s.completion("bad")
		require.False(t, ok)
	})
}

// On ctx cancel the agent stops leasing and waits for running attempts to finish.
func TestDrainWaitsForRunningAttempts(t *testing.T) {
	t.Parallel()
	s := newFake()
	release := make(chan struct{})
	started := make(chan struct{})
	var stoppedEarly atomic.Bool
	a, cancel, done := startAgent(t, s, func(c *Config) {
		c.DrainTimeout = -1 // for ever
		c.Handlers = map[string]Handler{"hold": func(ctx context.Context, _ *Task) error {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				stoppedEarly.Store(true)
			}
			return nil
		}}
	})
	s.add(handlerLease("r", "hold"))
	<-started
	cancel()
	eventually(t, "leasing stopped", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.draining && a.poll.cancel == nil
	})
	s.add(handlerLease("late", "noop")) // not leased by a draining worker
	select {
	case <-done:
		t.Fatal("Run returned while an attempt was running")
	default:
	}
	close(release)
	require.NoError(t, awaitDone(t, done))
	require.False(t, stoppedEarly.Load())
	c, ok := s.completion("r")
	require.True(t, ok)
	require.Equal(t, statusSucceeded, c.Status)
	_, ok = s.completion("late")
	require.False(t, ok)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []string{a.Session()}, s.leaves, "the drained worker says it leaves, once, after its completions")
	require.Equal(t, []string{"complete r", "leave"}, s.events[len(s.events)-2:])
}

// A drain pushed by the server ends Run once the running attempts are done.
func TestServerDrain(t *testing.T) {
	t.Parallel()
	s := newFake()
	release := make(chan struct{})
	started := make(chan struct{})
	_, _, done := startAgent(t, s, func(c *Config) {
		c.Handlers = map[string]Handler{"hold": func(context.Context, *Task) error {
			close(started)
			<-release
			return nil
		}}
	})
	s.add(handlerLease("r", "hold"))
	<-started
	s.push(func(s *fakeServer) { s.drain = true })
	// Run returns only because of the drain: its context is never cancelled.
	close(release)
	require.NoError(t, awaitDone(t, done))
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
}

// A handler that ignores a drain past DrainTimeout is stopped and reported lost.
func TestDrainTimeoutStopsHandlers(t *testing.T) {
	t.Parallel()
	s := newFake()
	started := make(chan struct{})
	causes := make(chan error, 1)
	_, cancel, done := startAgent(t, s, func(c *Config) {
		c.DrainTimeout = 50 * time.Millisecond
		c.Handlers = map[string]Handler{"hold": func(ctx context.Context, _ *Task) error {
			close(started)
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		}}
	})
	s.add(handlerLease("r", "hold"))
	<-started
	cancel()
	require.NoError(t, awaitDone(t, done))
	require.Equal(t, ErrShutdown, <-causes)
	c, ok := s.completion("r")
	require.True(t, ok)
	require.Equal(t, statusLost, c.Status)
}

// Leases beyond the free slots (a server bug) wait for a slot instead of overrunning them.
func TestExtraLeasesWaitForSlots(t *testing.T) {
	t.Parallel()
	s := newFake()
	var running, peak atomic.Int32
	release := make(chan struct{})
	a, _, _ := startAgent(t, s, func(c *Config) {
		c.Capacity.Slots = 1
		c.Handlers = map[string]Handler{"hold": func(context.Context, *Task) error {
			n := running.Add(1)
			if n > peak.Load() {
				peak.Store(n)
			}
			<-release
			running.Add(-1)
			return nil
		}}
	})
	// Hand three leases in one answer to a poll that asked for one.
	resp := &apitype.LeaseResponse{Leases: []apitype.Lease{handlerLease("a", "hold"), handlerLease("b", "hold"), handlerLease("c", "hold")}}
	s.await(t, "registered", func() bool { return s.registers == 1 })
	eventually(t, "agent started", func() bool { return a.attemptParentSet() })
	a.accept(resp, nil)
	close(release)
	for _, id := range []string{"a", "b", "c"} {
		require.Equal(t, statusSucceeded, s.awaitCompletion(t, id).Status)
	}
	require.Equal(t, int32(1), peak.Load())
}

func (a *Agent) attemptParentSet() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.attemptParent != nil
}

// gatedComplete holds the first Complete call until release is closed.
type gatedComplete struct {
	Server
	once    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedComplete) Complete(ctx context.Context, req *apitype.CompleteRequest) (*apitype.CompleteResponse, error) {
	if g.once.CompareAndSwap(false, true) {
		close(g.entered)
		<-g.release
	}
	return g.Server.Complete(ctx, req)
}

// An attempt whose completion is on its way is not killed as lost when heartbeats fail for
// a whole lease TTL: there is nothing to kill, and the server's answer to the completion
// settles the lease.
func TestQueuedCompletionOutlivesTheLeaseTTL(t *testing.T) {
	t.Parallel()
	s := newFake()
	s.hbInterval, s.ttl = 10*time.Millisecond, time.Minute
	var (
		logs  syncBuffer
		shift atomic.Int64 // how far the agent's clock is ahead
	)
	deliver, tries, hbs := false, 0, 0
	// The hooks run with s.mu held; they bump s.changed so that await sees their counts.
	s.onComplete = func(*apitype.CompleteRequest) error {
		if !deliver {
			tries++
			s.bumpLocked()
			return &apitype.Problem{Status: 503, Title: "Service Unavailable"}
		}
		return nil
	}
	s.onHeartbeat = func() error {
		hbs++
		s.bumpLocked()
		return &apitype.Problem{Status: 503, Title: "Service Unavailable"}
	}
	startAgent(t, s, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.Now = func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	})
	s.add(handlerLease("r", "noop"))
	s.await(t, "a refused completion", func() bool { return tries > 0 })
	shift.Store(int64(2 * time.Minute)) // two TTLs without a successful heartbeat
	s.mu.Lock()
	seen := hbs
	s.mu.Unlock()
	s.await(t, "heartbeats after the jump", func() bool { return hbs > seen+2 })
	s.mu.Lock()
	deliver = true
	s.mu.Unlock()
	require.Equal(t, statusSucceeded, s.awaitCompletion(t, "r").Status)
	require.NotContains(t, logs.String(), "killing attempt")
}

// A lease answer may name a run in lost and lease it again: the server ended the old
// attempt's lease (it expired) and then gave the run back to this worker. lost names the
// lease held before the answer: the old attempt is killed and the new one runs to its end.
// (Killing the new one instead made the server expire it, push lost and lease the run to
// this worker again, until the run had used up its disruptions and failed.)
func TestLostAndLeasedAgainInOneAnswer(t *testing.T) {
	t.Parallel()
	for _, held := range []bool{true, false} {
		t.Run(fmt.Sprintf("old attempt held: %v", held), func(t *testing.T) {
			t.Parallel()
			s := newFake()
			started, stopped := make(chan struct{}), make(chan error, 1)
			startAgent(t, s, func(c *Config) {
				c.Handlers["hold"] = func(ctx context.Context, _ *Task) error {
					close(started)
					<-ctx.Done()
					stopped <- context.Cause(ctx)
					return nil
				}
			})
			if held {
				s.add(handlerLease("r", "hold"))
				s.await(t, "attempt 1 running", func() bool {
					return len(s.events) > 0 || len(s.heartbeats) > 0 && len(s.heartbeats[len(s.heartbeats)-1].Held) == 1
				})
			}
			again := handlerLease("r", "noop")
			again.Attempt, again.Token = 2, "tok-r-2"
			s.push(func(s *fakeServer) {
				s.lost = append(s.lost, "r")
				s.queue = append(s.queue, again)
			})
			c := s.awaitCompletion(t, "r")
			require.Equal(t, "tok-r-2", c.Token, "the new attempt completes")
			require.Equal(t, "succeeded", c.Status)
			if held {
				require.ErrorIs(t, recv(t, stopped), ErrLeaseLost, "the old attempt is killed")
			}
		})
	}
}

// answerLostToStop is a server whose first registration is made on the server, but whose
// answer reaches the agent only after its context is done, as a stop that lands while the
// call is in flight would have it: an HTTP call would then fail with the context's error.
type answerLostToStop struct {
	*fakeServer
	stop context.CancelFunc
}

func (s *answerLostToStop) Register(ctx context.Context, req *apitype.RegisterRequest) (*apitype.RegisterResponse, error) {
	resp, err := s.fakeServer.Register(ctx, req)
	s.stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return resp, err
}

// A worker stopped while its registration is in flight still learns its session and says
// it leaves, so that the server does not list it as active until its heartbeats are missed.
func TestStopDuringRegistrationStillLeaves(t *testing.T) {
	t.Parallel()
	s := newFake()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := New(Config{
		Server:       &answerLostToStop{fakeServer: s, stop: cancel},
		ID:           "w1",
		Capacity:     apitype.Capacity{Slots: 1},
		Handlers:     map[string]Handler{"noop": Noop},
		FlushTimeout: time.Second,
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	require.NoError(t, awaitDone(t, done))
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []string{"session-1"}, s.leaves)
}
