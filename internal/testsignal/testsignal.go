// Package testsignal lets a test wait for a service to reach a point instead of polling
// for its effects or sleeping. A service declares a struct of typed signals (a Signal[T]
// each) and sends on them at the points a test may care about: "promoted 3 runs", "asleep
// until 12:05". In production nothing initialises them and sending is a no-op costing one
// nil check; a test initialises the ones it waits on and reads them in order with
// WaitOrTimeout.
//
// A signal buffers what the service sends, so the service never blocks on a test. A test
// that initialises a signal reads every value of it, in order: one that lets the buffer
// fill has its test failed, since it would be waiting on stale values.
package testsignal

import (
	"time"
)

// bufferSize is how many values a signal holds before its test is failed.
const bufferSize = 100

// Timeout is how long WaitOrTimeout waits: long enough for a loaded machine, short enough
// that a missing signal fails its test rather than the test binary.
const Timeout = 10 * time.Second

// TB is the part of testing.TB a signal uses (so this package does not import testing).
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Signal is one typed signal; the zero value is a no-op until Init.
type Signal[T any] struct {
	tb TB
	ch chan T
}

// Init makes the signal live for tb's test. Call it before the service starts.
func (s *Signal[T]) Init(tb TB) {
	s.tb = tb
	s.ch = make(chan T, bufferSize)
}

// Signal sends v to the test, if the signal was initialised; it never blocks.
func (s *Signal[T]) Signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
		s.tb.Errorf("testsignal: buffer of %d values full: the test does not read this signal", bufferSize)
	}
}

// WaitOrTimeout returns the next value sent, failing the test when none comes within
// Timeout. It must be called from the test's goroutine.
func (s *Signal[T]) WaitOrTimeout() T {
	if s.ch == nil {
		panic("testsignal: WaitOrTimeout on a signal that was not initialised")
	}
	s.tb.Helper()
	select {
	case v := <-s.ch:
		return v
	case <-time.After(Timeout):
		s.tb.Fatalf("testsignal: no value within %s", Timeout)
		panic("unreachable")
	}
}

// WaitUntil returns the first value sent for which ok holds, discarding those before it,
// failing the test when none comes within Timeout. For a signal whose count of values
// depends on timing the test does not control (a wake-up that may or may not interleave).
func (s *Signal[T]) WaitUntil(ok func(T) bool) T {
	if s.ch == nil {
		panic("testsignal: WaitUntil on a signal that was not initialised")
	}
	s.tb.Helper()
	deadline := time.After(Timeout)
	for {
		select {
		case v := <-s.ch:
			if ok(v) {
				return v
			}
		case <-deadline:
			s.tb.Fatalf("testsignal: no matching value within %s", Timeout)
			panic("unreachable")
		}
	}
}

// RequireEmpty fails the test when a value was sent that it has not read.
func (s *Signal[T]) RequireEmpty() {
	if s.ch == nil {
		panic("testsignal: RequireEmpty on a signal that was not initialised")
	}
	s.tb.Helper()
	select {
	case v := <-s.ch:
		s.tb.Fatalf("testsignal: unread value %v", v)
	default:
	}
}
