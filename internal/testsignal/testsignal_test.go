package testsignal

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeTB records failures; Fatalf ends the goroutine, as testing's does.
type fakeTB struct {
	mu     sync.Mutex
	errors []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) failures() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errors
}

// inGoroutine runs fn where a Fatalf may end it, and waits for it.
func inGoroutine(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

func TestSignal(t *testing.T) {
	t.Parallel()
	t.Run("zero value is a no-op", func(t *testing.T) {
		t.Parallel()
		var s Signal[int]
		s.Signal(1) // neither blocks nor panics
	})
	t.Run("values come in order", func(t *testing.T) {
		t.Parallel()
		var s Signal[int]
		s.Init(t)
		go func() {
			for i := range 3 {
				s.Signal(i)
			}
		}()
		for i := range 3 {
			require.Equal(t, i, s.WaitOrTimeout())
		}
		s.RequireEmpty()
	})
	t.Run("WaitUntil skips values", func(t *testing.T) {
		t.Parallel()
		var s Signal[int]
		s.Init(t)
		for i := range 5 {
			s.Signal(i)
		}
		require.Equal(t, 3, s.WaitUntil(func(v int) bool { return v >= 3 }))
		require.Equal(t, 4, s.WaitOrTimeout())
	})
	t.Run("RequireEmpty fails on an unread value", func(t *testing.T) {
		t.Parallel()
		tb := &fakeTB{}
		var s Signal[string]
		s.Init(tb)
		s.Signal("left over")
		inGoroutine(s.RequireEmpty)
		require.Equal(t, []string{"testsignal: unread value left over"}, tb.failures())
	})
	t.Run("a full buffer fails the test", func(t *testing.T) {
		t.Parallel()
		tb := &fakeTB{}
		var s Signal[int]
		s.Init(tb)
		for i := range bufferSize {
			s.Signal(i)
		}
		require.Empty(t, tb.failures())
		s.Signal(bufferSize)
		require.Len(t, tb.failures(), 1)
		require.Equal(t, 0, s.WaitOrTimeout(), "the values before the overflow stay")
	})
}
