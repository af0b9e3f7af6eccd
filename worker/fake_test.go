package worker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stretchr/testify/require"
)

// waitFor bounds every wait in these tests.
const waitFor = 15 * time.Second

// fakeServer is an in-memory worker protocol: it hands out the leases a test queues, holds
// lease polls until there is something to say, and records what the agent sends. The on*
// hooks, when set, run first; an error they return fails the call.
type fakeServer struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change

	hbInterval time.Duration
	ttl        time.Duration

	queue    []apitype.Lease
	cancel   []string // pushed on the next lease poll
	lost     []string
	drain    bool
	hbCancel []string // pushed on the next heartbeat answer
	hbLost   []string

	registers      int
	regs           []apitype.RegisterRequest
	resume         bool     // answer a registration naming a session by keeping it
	resumeLost     []string // and report these of its held leases lost
	polls          []int    // Max of each lease poll
	outstanding    map[string]bool
	maxOutstanding int
	completions    []apitype.Completion
	stale          map[string]bool // runs whose completion is refused as the server refuses a lost lease's
	chunks         []apitype.LogChunk
	events         []string // "log RUN", "complete RUN" and "leave", in arrival order
	heartbeats     []apitype.HeartbeatRequest
	hbTimeouts     []time.Duration // how long each heartbeat's context had left when it came
	leaves         []string        // sessions that left

	onRegister  func() error
	onLease     func() error
	onHeartbeat func() error
	onLogs      func(*apitype.LogChunksRequest) error
	onComplete  func(*apitype.CompleteRequest) error
}

var _ Server = (*fakeServer)(nil)

func newFake() *fakeServer {
	return &fakeServer{
		changed:     make(chan struct{}),
		hbInterval:  50 * time.Millisecond,
		ttl:         time.Minute,
		outstanding: make(map[string]bool),
	}
}

func (s *fakeServer) Leave(_ context.Context, _ string, req *apitype.LeaveRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaves = append(s.leaves, req.Session)
	s.events = append(s.events, "leave")
	s.bumpLocked()
	return nil
}

// bumpLocked wakes everyone waiting for a change; s.mu held.
func (s *fakeServer) bumpLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *fakeServer) Register(_ context.Context, req *apitype.RegisterRequest) (*apitype.RegisterResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onRegister != nil {
		if err := s.onRegister(); err != nil {
			return nil, err
		}
	}
	s.registers++
	r := *req
	r.Held = slices.Clone(req.Held)
	s.regs = append(s.regs, r)
	s.bumpLocked()
	resp := &apitype.RegisterResponse{
		Worker:            &apitype.Worker{ID: req.ID, Capacity: req.Capacity, State: "active"},
		Session:           "session-" + strconv.Itoa(s.registers),
		HeartbeatInterval: apitype.Duration(s.hbInterval),
		LeaseTTL:          apitype.Duration(s.ttl),
	}
	if s.resume && req.Session != "" {
		resp.Session, resp.Resumed, resp.Lost = req.Session, true, s.resumeLost
		for _, id := range s.resumeLost {
			delete(s.outstanding, id)
		}
	}
	return resp, nil
}

func (s *fakeServer) Lease(ctx context.Context, _ string, req *apitype.LeaseRequest) (*apitype.LeaseResponse, error) {
	var expired <-chan time.Time
	if req.Wait != nil {
		t := time.NewTimer(req.Wait.Std())
		defer t.Stop()
		expired = t.C
	}
	if req.Max < 0 || req.Max > apitype.MaxLeaseBatch {
		return nil, fmt.Errorf("max: must be between 0 and %d", apitype.MaxLeaseBatch) // as the server refuses it
	}
	s.mu.Lock()
	s.polls = append(s.polls, req.Max)
	s.bumpLocked()
	if s.onLease != nil {
		if err := s.onLease(); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	for {
		resp := &apitype.LeaseResponse{}
		n := min(req.Max, len(s.queue))
		resp.Leases = slices.Clone(s.queue[:n])
		s.queue = s.queue[n:]
		for _, l := range resp.Leases {
			s.outstanding[l.RunID] = true
		}
		s.maxOutstanding = max(s.maxOutstanding, len(s.outstanding))
		resp.Cancel, s.cancel = s.cancel, nil
		resp.Lost, s.lost = s.lost, nil
		for _, id := range resp.Lost {
			delete(s.outstanding, id)
		}
		resp.Drain = s.drain
		if len(resp.Leases) > 0 || len(resp.Cancel) > 0 || len(resp.Lost) > 0 || resp.Drain {
			s.bumpLocked()
			s.mu.Unlock()
			return resp, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-expired:
			return &apitype.LeaseResponse{}, nil
		case <-ch:
		}
		s.mu.Lock()
	}
}

func (s *fakeServer) Heartbeat(ctx context.Context, _ string, req *apitype.HeartbeatRequest) (*apitype.HeartbeatResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		s.hbTimeouts = append(s.hbTimeouts, time.Until(d))
	}
	if s.onHeartbeat != nil {
		if err := s.onHeartbeat(); err != nil {
			return nil, err
		}
	}
	s.heartbeats = append(s.heartbeats, apitype.HeartbeatRequest{Held: slices.Clone(req.Held)})
	resp := &apitype.HeartbeatResponse{Drain: s.drain}
	resp.Cancel, s.hbCancel = s.hbCancel, nil
	resp.Lost, s.hbLost = s.hbLost, nil
	for _, id := range resp.Lost {
		delete(s.outstanding, id)
	}
	s.bumpLocked()
	return resp, nil
}

func (s *fakeServer) AppendLogs(_ context.Context, req *apitype.LogChunksRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onLogs != nil {
		if err := s.onLogs(req); err != nil {
			return err
		}
	}
	for _, c := range req.Chunks {
		s.chunks = append(s.chunks, c)
		s.events = append(s.events, "log "+c.RunID)
	}
	s.bumpLocked()
	return nil
}

func (s *fakeServer) Complete(_ context.Context, req *apitype.CompleteRequest) (*apitype.CompleteResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onComplete != nil {
		if err := s.onComplete(req); err != nil {
			return nil, err
		}
	}
	resp := &apitype.CompleteResponse{}
	for _, c := range req.Completions {
		s.completions = append(s.completions, c)
		s.events = append(s.events, "complete "+c.RunID)
		delete(s.outstanding, c.RunID)
		if s.stale[c.RunID] {
			resp.Results = append(resp.Results, apitype.CompletionResult{RunID: c.RunID, Error: "stale fencing token"})
			continue
		}
		resp.Results = append(resp.Results, apitype.CompletionResult{RunID: c.RunID, Accepted: true})
	}
	s.bumpLocked()
	return resp, nil
}

// add queues leases for the next poll.
func (s *fakeServer) add(leases ...apitype.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, leases...)
	s.bumpLocked()
}

// push changes the fake's state under its lock and wakes pollers.
func (s *fakeServer) push(f func(s *fakeServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
	s.bumpLocked()
}

// await waits until cond, evaluated under the fake's lock, holds.
func (s *fakeServer) await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitFor)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (s *fakeServer) completionLocked(runID string) (apitype.Completion, bool) {
	for _, c := range s.completions {
		if c.RunID == runID {
			return c, true
		}
	}
	return apitype.Completion{}, false
}

// awaitCompletion waits for the completion of runID.
func (s *fakeServer) awaitCompletion(t testing.TB, runID string) apitype.Completion {
	t.Helper()
	var c apitype.Completion
	s.await(t, "completion of "+runID, func() bool {
		var ok bool
		c, ok = s.completionLocked(runID)
		return ok
	})
	return c
}

// completionsSnapshot returns every completion received so far.
func (s *fakeServer) completionsSnapshot() []apitype.Completion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.completions)
}

// completion returns the completion of runID, if any.
func (s *fakeServer) completion(runID string) (apitype.Completion, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.completionLocked(runID)
}

// logLocked is the output of runID on stream ("" for both), in Seq order.
func (s *fakeServer) logLocked(runID, stream string) string {
	var cs []apitype.LogChunk
	for _, c := range s.chunks {
		if c.RunID == runID && (stream == "" || c.Stream == stream) {
			cs = append(cs, c)
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Seq < cs[j].Seq })
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Data)
	}
	return b.String()
}

func (s *fakeServer) log(runID, stream string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logLocked(runID, stream)
}

// awaitLog waits until runID's output contains sub.
func (s *fakeServer) awaitLog(t testing.TB, runID, sub string) {
	t.Helper()
	s.await(t, fmt.Sprintf("%q in the log of %s", sub, runID), func() bool {
		return strings.Contains(s.logLocked(runID, ""), sub)
	})
}

// startAgent runs an agent against s until the test ends. Tests get short drain and kill
// timings; mod changes the config further.
func startAgent(t testing.TB, s *fakeServer, mod func(*Config)) (*Agent, context.CancelFunc, <-chan error) {
	t.Helper()
	cfg := Config{
		Server:       s,
		ID:           "w1",
		Capacity:     apitype.Capacity{Slots: 4},
		Commands:     true,
		Handlers:     map[string]Handler{"noop": Noop},
		DrainTimeout: 5 * time.Second,
		KillGrace:    500 * time.Millisecond,
		FlushTimeout: time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		done <- a.Run(ctx)
		close(finished)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(waitFor):
			t.Errorf("agent did not stop")
		}
	})
	return a, cancel, done
}

// eventually waits until cond holds, checking every few milliseconds: for conditions outside
// the fake (processes, the agent's own state).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// awaitDone waits for Run to return and gives its error.
func awaitDone(t testing.TB, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitFor):
		t.Fatal("Run did not return")
		return nil
	}
}

// holding reports the agent's held leases and used slots.
func (a *Agent) holding() (leases, used int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.attempts), a.used
}

func shellLease(id, script string) apitype.Lease {
	return apitype.Lease{RunID: id, JobID: "job-" + id, JobName: "job-" + id, Attempt: 1, Token: "tok-" + id, Shell: script}
}

func handlerLease(id, kind string) apitype.Lease {
	return apitype.Lease{RunID: id, JobID: "job-" + id, JobName: "job-" + id, Attempt: 1, Token: "tok-" + id, Handler: kind}
}

func timeout(d time.Duration) *apitype.Duration {
	v := apitype.Duration(d)
	return &v
}
