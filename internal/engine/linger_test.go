package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
)

// TestCommitterSpacing checks that a flush begins no sooner than spacing after the previous
// one, and that what arrives meanwhile goes in it.
func TestCommitterSpacing(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	var mu sync.Mutex
	var batches [][]int
	c := newCommitter(100, func(_ context.Context, reqs []int) ([]int, error) {
		mu.Lock()
		batches = append(batches, append([]int(nil), reqs...))
		mu.Unlock()
		return make([]int, len(reqs)), nil
	})
	c.spacing, c.clock = 10*time.Millisecond, clk
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.run(ctx)
	stop := make(chan struct{})

	_, err := c.do(ctx, stop, []int{1}) // nothing before it: flushed at once
	require.NoError(t, err)

	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			_, err := c.do(ctx, stop, []int{10 + i})
			require.NoError(t, err)
		})
		if i == 0 {
			// The committer waits out the spacing on the first of them.
			require.Eventually(t, func() bool { return len(clk.Pending()) == 1 }, 10*time.Second, time.Millisecond)
		}
	}
	require.Eventually(t, func() bool { return len(c.in) == 2 }, 10*time.Second, time.Millisecond)
	mu.Lock()
	require.Len(t, batches, 1, "no flush before the spacing is over")
	mu.Unlock()
	clk.Advance(10 * time.Millisecond)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, batches, 2, "the three calls went in one flush")
	require.ElementsMatch(t, []int{10, 11, 12}, batches[1])
}

// TestLeaseLinger checks that a worker's lease transactions are spaced by LeaseLinger: a
// poll right after a lease waits out the rest of it, then leases what came meanwhile.
func TestLeaseLinger(t *testing.T) {
	t.Parallel()
	e, b := setup(t, func(c *Config) { c.LeaseLinger = 5 * time.Millisecond })
	clk := b.clk
	register(t, e, "w1")

	first := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	resp := lease(t, e, "w1", 5, time.Hour) // no lease before: not held back
	require.Len(t, resp.Leases, 1)
	require.Equal(t, first.ID, resp.Leases[0].Run.ID)

	got := make(chan *LeaseResult, 1)
	go func() { got <- lease(t, e, "w1", 5, time.Hour) }()
	waitTimer(t, b, t0.Add(5*time.Millisecond)) // the poll waits out the linger
	a := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	c := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	select {
	case <-got:
		t.Fatal("leased before the linger was over")
	case <-time.After(20 * time.Millisecond):
	}
	clk.Advance(5 * time.Millisecond)
	resp = pollAnswer(t, got, "the poll did not lease after the linger")
	require.Len(t, resp.Leases, 2)
	require.ElementsMatch(t, []string{a.ID, c.ID}, []string{resp.Leases[0].Run.ID, resp.Leases[1].Run.ID},
		"both runs that came during the linger, in one lease")
}

// TestLeaseLingerSkippedOnBacklog: a lease that took all the worker asked for says more
// work may be waiting, so the next poll is not held back.
func TestLeaseLingerSkippedOnBacklog(t *testing.T) {
	t.Parallel()
	e, b := setup(t, func(c *Config) { c.LeaseLinger = 5 * time.Millisecond })
	register(t, e, "w1")

	first := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	second := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	resp := lease(t, e, "w1", 1, time.Hour)
	require.Len(t, resp.Leases, 1)

	got := make(chan *LeaseResult, 1)
	go func() { got <- lease(t, e, "w1", 1, time.Hour) }() // the clock does not move
	next := pollAnswer(t, got, "the poll after a full lease waited out the linger")
	require.Len(t, next.Leases, 1)
	require.ElementsMatch(t, []string{first.ID, second.ID}, []string{resp.Leases[0].Run.ID, next.Leases[0].Run.ID})
}
