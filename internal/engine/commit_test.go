package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCommitterGroupsConcurrentCalls checks group commit: calls that arrive while a flush is
// running go together in the next flush, and each caller gets its own results back.
func TestCommitterGroupsConcurrentCalls(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	var mu sync.Mutex
	var batches [][]int
	c := newCommitter(100, func(_ context.Context, reqs []int) ([]int, error) {
		mu.Lock()
		batches = append(batches, append([]int(nil), reqs...))
		mu.Unlock()
		entered <- struct{}{}
		<-release
		out := make([]int, len(reqs))
		for i, r := range reqs {
			out[i] = r * 10
		}
		return out, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.run(ctx)
	stop := make(chan struct{})

	first := make(chan []int, 1)
	go func() {
		res, err := c.do(ctx, stop, []int{1})
		require.NoError(t, err)
		first <- res
	}()
	<-entered // the first flush is running and blocked

	var wg sync.WaitGroup
	results := make([][]int, 5)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.do(ctx, stop, []int{100 + 2*i, 101 + 2*i})
			require.NoError(t, err)
			results[i] = res
		}()
	}
	require.Eventually(t, func() bool { return len(c.in) == 5 }, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()

	require.Equal(t, []int{10}, <-first)
	for i, res := range results {
		require.Equal(t, []int{(100 + 2*i) * 10, (101 + 2*i) * 10}, res, "caller %d gets its own results", i)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, batches, 2, "five concurrent callers share one flush")
	require.Len(t, batches[1], 10)
}

func TestCommitterFlushErrorReachesEveryCaller(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	c := newCommitter(100, func(context.Context, []int) ([]int, error) { return nil, boom })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.run(ctx)
	_, err := c.do(ctx, make(chan struct{}), []int{1, 2})
	require.ErrorIs(t, err, boom)
}

func TestCommitterStopped(t *testing.T) {
	t.Parallel()
	c := newCommitter(100, func(_ context.Context, r []int) ([]int, error) { return r, nil })
	stop := make(chan struct{})
	close(stop)
	// nothing runs the committer and its queue is full: the stop channel must answer.
	for range cap(c.in) {
		c.in <- &commitCall[int, int]{done: make(chan struct{})}
	}
	_, err := c.do(context.Background(), stop, []int{1})
	require.ErrorIs(t, err, errStopped)
}
