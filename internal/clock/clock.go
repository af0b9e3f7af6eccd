// Package clock is time as a dependency: services take a Clock, tests hand them a Fake and move
// it by hand, so scheduling logic is tested without waiting.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
	// NewTimerAt returns a timer that fires once the clock reads t (at once if it does
	// already). A service that worked out t from a reading of the clock sleeps until t, not
	// until t plus however long it took to get to the timer.
	NewTimerAt(t time.Time) Timer
}

// Timer is the part of *time.Timer that services use.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped a pending timer.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// NewTimerAt is a time.Timer for the time left until t.
func (Real) NewTimerAt(t time.Time) Timer { return realTimer{time.NewTimer(time.Until(t))} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Fake is a clock that moves only when told. It is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// NewFake returns a fake clock reading now.
func NewFake(now time.Time) *Fake {
	return &Fake{now: now}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the clock is advanced past now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timerAt(f.now.Add(d))
}

// NewTimerAt returns a timer that fires when the clock reads at (at once if it does).
func (f *Fake) NewTimerAt(at time.Time) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timerAt(at)
}

// timerAt makes a timer due at at; f.mu is held.
func (f *Fake) timerAt(at time.Time) Timer {
	t := &fakeTimer{f: f, at: at, c: make(chan time.Time, 1)}
	if !at.After(f.now) {
		t.fired = true
		t.c <- f.now
	} else {
		f.timers = append(f.timers, t)
	}
	return t
}

// Pending returns the fire times of the timers that have not fired, so a test can wait
// until a service sleeps until a given instant.
func (f *Fake) Pending() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]time.Time, len(f.timers))
	for i, t := range f.timers {
		out[i] = t.at
	}
	return out
}

// Advance moves the clock forward by d and fires every timer that is due.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the clock to t (never backwards) and fires every timer that is due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	if t.After(f.now) {
		f.now = t
	}
	keep := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.at.After(f.now) {
			tm.fired = true
			tm.c <- f.now
			continue
		}
		keep = append(keep, tm)
	}
	f.timers = keep
	f.mu.Unlock()
}

type fakeTimer struct {
	f     *Fake
	at    time.Time
	c     chan time.Time
	fired bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.fired {
		return false
	}
	for i, tm := range t.f.timers {
		if tm == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			break
		}
	}
	t.fired = true
	return true
}
