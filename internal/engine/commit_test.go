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

// TestCommitterSmallFlushesOneAtATime: with several goroutines flushing, the calls that
// queue while a small batch flushes wait for it and go together in the next flush, while
// big batches flush side by side.
func TestCommitterSmallFlushesOneAtATime(t *testing.T) {
	t.Parallel()
	type flushing struct {
		entered chan []int
		release chan struct{}
		mu      sync.Mutex
		active  int
		most    int
	}
	start := func(t *testing.T, goroutines int) (*committer[int, int], *flushing, chan struct{}, func(reqs []int) <-chan error) {
		f := &flushing{entered: make(chan []int, 10), release: make(chan struct{})}
		c := newCommitter(1000, func(_ context.Context, reqs []int) ([]int, error) {
			f.mu.Lock()
			f.active++
			f.most = max(f.most, f.active)
			f.mu.Unlock()
			f.entered <- append([]int(nil), reqs...)
			<-f.release
			f.mu.Lock()
			f.active--
			f.mu.Unlock()
			return reqs, nil
		})
		waiting := make(chan struct{}, 10)
		c.waiting = func() { waiting <- struct{}{} }
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		for range goroutines {
			go c.run(ctx)
		}
		do := func(reqs []int) <-chan error {
			errc := make(chan error, 1)
			go func() {
				_, err := c.do(ctx, make(chan struct{}), reqs)
				errc <- err
			}()
			return errc
		}
		return c, f, waiting, do
	}
	bigBatch := func(from int) []int {
		b := make([]int, concurrentBatch)
		for i := range b {
			b[i] = from + i
		}
		return b
	}

	t.Run("small", func(t *testing.T) {
		c, f, waiting, do := start(t, 3)
		first := do([]int{1})
		require.Equal(t, []int{1}, <-f.entered)
		select {
		case <-waiting: // another goroutine waits for the lane, holding no call
		case <-time.After(5 * time.Second):
			t.Fatal("the other goroutines did not wait while a small batch flushed")
		}
		second, third := do([]int{2}), do([]int{3})
		require.Eventually(t, func() bool { return len(c.in) == 2 }, 5*time.Second, time.Millisecond, "both stay queued")
		close(f.release)
		require.ElementsMatch(t, []int{2, 3}, <-f.entered, "the queued calls go together")
		for _, errc := range []<-chan error{first, second, third} {
			require.NoError(t, <-errc)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		require.Equal(t, 1, f.most)
	})

	t.Run("big", func(t *testing.T) {
		_, f, _, do := start(t, 3)
		one := do(bigBatch(1000))
		require.Len(t, <-f.entered, concurrentBatch)
		two := do(bigBatch(2000))
		require.Len(t, <-f.entered, concurrentBatch, "a second big batch flushes beside the first")
		close(f.release)
		require.NoError(t, <-one)
		require.NoError(t, <-two)
		f.mu.Lock()
		defer f.mu.Unlock()
		require.Equal(t, 2, f.most)
	})
}
