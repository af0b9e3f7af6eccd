package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stretchr/testify/require"
)

// manualClock is a clock that moves only when told.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// An attempt whose lease cannot be renewed is killed before the server's lease expires,
// counted on the agent's clock from the last successful renewal: for a lease just granted
// (whose answer spent a while in transit) and for one a heartbeat renewed (even one answered
// at the instant it was sent). The agent is driven by hand: no loops run, so the test alone
// decides when heartbeats happen and what time it is.
func TestKillBeforeServerExpiry(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	clk := &manualClock{t: time.Unix(1_700_000_000, 0)}
	s := newFake()
	s.ttl, s.hbInterval = ttl, 2*time.Second
	var serverRenewal time.Time
	s.onHeartbeat = func() error {
		serverRenewal = clk.now() // the server renews to its now + TTL as the request arrives
		return nil
	}
	started, stopped := make(chan struct{}), make(chan error, 1)
	a, err := New(Config{Server: s, ID: "w1", Now: clk.now, Handlers: map[string]Handler{
		"hold": func(ctx context.Context, _ *Task) error {
			close(started)
			<-ctx.Done()
			stopped <- context.Cause(ctx)
			return nil
		},
	}})
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, a.register(ctx))
	a.mu.Lock()
	a.attemptParent = context.Background()
	a.mu.Unlock()

	// The server grants the lease at grant; its answer arrives 300ms later.
	grant := clk.now()
	clk.advance(300 * time.Millisecond)
	a.accept(&apitype.LeaseResponse{Leases: []apitype.Lease{handlerLease("r", "hold")}}, nil)
	recv(t, started)
	kill := a.expire(clk.now())
	require.False(t, kill.IsZero(), "the lease is held")
	require.True(t, kill.Before(grant.Add(ttl)), "kill at %s, server expiry %s", kill, grant.Add(ttl))

	// A heartbeat answered at once, 6s later, moves the kill past the first expiry but keeps
	// it before the renewed one.
	clk.advance(6 * time.Second)
	require.True(t, a.beat(ctx))
	kill = a.expire(clk.now())
	serverExpiry := serverRenewal.Add(ttl)
	require.True(t, kill.After(grant.Add(ttl)), "the heartbeat renewed the lease")
	require.True(t, kill.Before(serverExpiry), "kill at %s, server expiry %s", kill, serverExpiry)

	// Heartbeats fail from now on: the attempt lives until its kill time, and not after.
	s.mu.Lock()
	s.onHeartbeat = func() error { return context.DeadlineExceeded }
	s.mu.Unlock()
	require.False(t, a.beat(ctx))
	require.Equal(t, kill, a.expire(kill.Add(-time.Millisecond)), "failed heartbeats change nothing")
	select {
	case err := <-stopped:
		t.Fatalf("attempt stopped early: %v", err)
	default:
	}
	a.expire(kill)
	select {
	case err := <-stopped:
		require.ErrorIs(t, err, ErrLeaseLost)
	case <-time.After(waitFor):
		t.Fatal("attempt not stopped at its kill time")
	}
	eventually(t, "lease released", func() bool { l, _ := a.holding(); return l == 0 })
	_, reported := s.completion("r")
	require.False(t, reported, "a lost attempt is not reported")
}

// The margin is a tenth of the TTL, never less than 100ms unless the TTL is tiny.
func TestKillMargin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ ttl, want time.Duration }{
		{15 * time.Second, 1500 * time.Millisecond},
		{time.Second, 100 * time.Millisecond},
		{300 * time.Millisecond, 100 * time.Millisecond},
		{100 * time.Millisecond, 50 * time.Millisecond},
	} {
		require.Equal(t, tc.want, killMargin(tc.ttl), "ttl %s", tc.ttl)
	}
}

// hangingHeartbeats is a worker protocol whose heartbeats, once hang is called, get no answer
// until they time out, as behind a network that drops every packet. It notes when the last
// heartbeat that succeeded was sent.
type hangingHeartbeats struct {
	Server
	mu     sync.Mutex
	hung   bool
	lastOK time.Time
}

func (h *hangingHeartbeats) hang() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hung = true
}

func (h *hangingHeartbeats) lastRenewal() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastOK
}

func (h *hangingHeartbeats) Heartbeat(ctx context.Context, id string, req *apitype.HeartbeatRequest) (*apitype.HeartbeatResponse, error) {
	sent := time.Now()
	h.mu.Lock()
	hung := h.hung
	h.mu.Unlock()
	if hung {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	resp, err := h.Server.Heartbeat(ctx, id, req)
	if err == nil && len(req.Held) > 0 {
		h.mu.Lock()
		h.lastOK = sent
		h.mu.Unlock()
	}
	return resp, err
}

// A heartbeat that gets no answer waits up to its timeout (half the TTL here), longer than
// the kill margin; the kill does not wait for it: the attempt is killed before the lease's
// expiry on the server, the TTL after the last renewal that reached it. (Driven by the
// agent's own loops on the real clock: the TTL is 4 s, its margin 400 ms.)
func TestKillWhileHeartbeatHangs(t *testing.T) {
	t.Parallel()
	const ttl = 4 * time.Second
	s := newFake()
	s.ttl, s.hbInterval = ttl, ttl/5
	h := &hangingHeartbeats{Server: s}
	started, stopped := make(chan struct{}), make(chan time.Time, 1)
	a, err := New(Config{Server: h, ID: "w1", Handlers: map[string]Handler{
		"hold": func(ctx context.Context, _ *Task) error {
			close(started)
			<-ctx.Done()
			stopped <- time.Now()
			return nil
		},
	}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	s.add(handlerLease("r", "hold"))
	recv(t, started)
	eventually(t, "a heartbeat renewing the lease", func() bool { return !h.lastRenewal().IsZero() })
	h.hang()
	killed := recv(t, stopped)
	expiry := h.lastRenewal().Add(ttl)
	require.True(t, killed.Before(expiry), "killed %s after the server's expiry", killed.Sub(expiry))
}
