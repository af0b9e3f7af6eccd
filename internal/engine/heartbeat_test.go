package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// beatCounter is a store that records the beats of each Heartbeat call.
type beatCounter struct {
	store.Store
	mu      sync.Mutex
	batches [][]string // worker ids, per call
}

func (s *beatCounter) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]store.HeartbeatResult, error) {
	ids := make([]string, len(p.Beats))
	for i, b := range p.Beats {
		ids[i] = b.WorkerID
	}
	s.mu.Lock()
	s.batches = append(s.batches, ids)
	s.mu.Unlock()
	return s.Store.Heartbeat(ctx, p)
}

func (s *beatCounter) calls() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.batches...)
}

// Heartbeats that come within HeartbeatLinger of the previous flush wait for the rest of it
// and are recorded together, in one store call stamped with the flush's time; each caller
// gets its own answer, and one worker's unknown session fails only its own heartbeat.
func TestHeartbeatsAreGroupCommitted(t *testing.T) {
	t.Parallel()
	const linger = 50 * time.Millisecond
	counter := &beatCounter{}
	e, b := setup(t, func(c *Config) {
		counter.Store = c.Store
		c.Store, c.HeartbeatLinger = counter, linger
	})
	ctx := context.Background()
	for _, w := range []string{"w1", "w2", "w3"} {
		register(t, e, w)
	}
	run := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	l := lease(t, e, "w2", 1, 0).Leases[0]

	// A lone heartbeat is recorded at once.
	_, err := e.Heartbeat(ctx, "w1", &HeartbeatParams{})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"w1"}}, counter.calls())

	// The next ones wait for the linger to pass, and go together.
	type answer struct {
		res *HeartbeatResult
		err error
	}
	w2, w3 := make(chan answer, 1), make(chan answer, 1)
	go func() {
		res, err := e.Heartbeat(ctx, "w2", &HeartbeatParams{Held: []store.LeaseRef{{RunID: run.ID, Token: l.Token}}})
		w2 <- answer{res, err}
	}()
	waitTimer(t, b, t0.Add(linger)) // the committer holds w2's heartbeat
	go func() {
		res, err := e.Heartbeat(ctx, "w3", &HeartbeatParams{Session: "not-its-session"})
		w3 <- answer{res, err}
	}()
	waitFor(t, func() bool { return len(e.beats.in) == 1 }, "w3's heartbeat queued behind w2's")
	require.Len(t, counter.calls(), 1, "nothing recorded before the linger passed")
	b.clk.Set(t0.Add(linger))

	a2, a3 := <-w2, <-w3
	require.NoError(t, a2.err)
	require.Empty(t, a2.res.Lost)
	require.ErrorIs(t, a3.err, ErrUnknownWorker, "w3's session is not its own")
	require.Equal(t, [][]string{{"w1"}, {"w2", "w3"}}, counter.calls(), "one store call for both")
	r := getRun(t, b, run.ID)
	require.Equal(t, t0.Add(linger).Add(10*time.Second), *r.LeaseExpiresAt, "renewed at the flush, to its time + TTL")
}

// The heartbeat interval workers are told is a third of the lease TTL unless configured.
func TestDefaultHeartbeatInterval(t *testing.T) {
	t.Parallel()
	e, _ := setup(t, func(c *Config) { c.LeaseTTL = 15 * time.Second })
	reg, err := e.Register(context.Background(), &RegisterParams{ID: "w1", Capacity: model.Capacity{Slots: 1}, Handlers: []string{"noop"}})
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, reg.HeartbeatInterval)
	require.Equal(t, 15*time.Second, reg.LeaseTTL)

	e, _ = setup(t, func(c *Config) { c.HeartbeatInterval = 2 * time.Second })
	reg, err = e.Register(context.Background(), &RegisterParams{ID: "w1", Capacity: model.Capacity{Slots: 1}, Handlers: []string{"noop"}})
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, reg.HeartbeatInterval, "a configured interval is kept")
}
