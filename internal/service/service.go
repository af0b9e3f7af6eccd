package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/testsignal"
)

// Errors of Start.
var (
	// ErrStarted: Start was called on a service that is running.
	ErrStarted = errors.New("service already started")
	// ErrStopped: Start was called on a service that was stopped; build a new one.
	ErrStopped = errors.New("service stopped")
)

// Defaults shared by the services' configs.
const (
	// DefaultIdleWait is how long a service sleeps when it knows of nothing to wait for.
	DefaultIdleWait = 5 * time.Minute
	// DefaultRetryDelay is how long a service pauses after a store error.
	DefaultRetryDelay = time.Second
)

type state int

const (
	idle state = iota
	running
	stopped
)

// runner is the start/stop machinery every service embeds: one goroutine, started once.
type runner struct {
	name   string
	mu     sync.Mutex
	state  state
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs loop in a goroutine with a context that ends at ctx's end or at Stop.
func (r *runner) start(ctx context.Context, loop func(context.Context)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.state {
	case running:
		return fmt.Errorf("start %s: %w", r.name, ErrStarted)
	case stopped:
		return fmt.Errorf("start %s: %w", r.name, ErrStopped)
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	r.state = running
	go func() {
		defer close(r.done)
		loop(ctx)
	}()
	return nil
}

// Stop ends the service and waits for its goroutine. It is idempotent, and may be called
// before Start (which then fails with ErrStopped).
func (r *runner) Stop() {
	r.mu.Lock()
	r.state = stopped
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// base holds what every service's loop uses: the clock, the logger, its wake-up source and
// its sleep and failure signals.
type base struct {
	runner
	clock      clock.Clock
	log        *slog.Logger
	wake       func() <-chan struct{}
	idleWait   time.Duration
	retryDelay time.Duration
	slept      *testsignal.Signal[time.Time]
	failed     *testsignal.Signal[error]
}

// commonConfig is the part of every service's Config that base takes.
type commonConfig struct {
	name       string
	clock      clock.Clock
	log        *slog.Logger
	wake       func() <-chan struct{}
	idleWait   time.Duration
	retryDelay time.Duration
	slept      *testsignal.Signal[time.Time]
	failed     *testsignal.Signal[error]
}

func newBase(c commonConfig) base {
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.wake == nil {
		c.wake = func() <-chan struct{} { return nil } // never woken
	}
	if c.idleWait <= 0 {
		c.idleWait = DefaultIdleWait
	}
	if c.retryDelay <= 0 {
		c.retryDelay = DefaultRetryDelay
	}
	return base{runner: runner{name: c.name}, clock: c.clock, log: c.log.With("service", c.name),
		wake: c.wake, idleWait: c.idleWait, retryDelay: c.retryDelay, slept: c.slept, failed: c.failed}
}

// sleepUntil waits until the clock reads until, a wake-up on wake, or ctx's end; it reports
// false when ctx ended. A service works out until from a reading of the clock and then
// queries the store: a timer set for a duration from that reading would oversleep by the
// time the queries took (and, on a fake clock, by however far a test moved it meanwhile).
// The Slept signal carries until once the timer is set, so a test that waits on it may move
// the clock.
func (b *base) sleepUntil(ctx context.Context, wake <-chan struct{}, until time.Time) bool {
	t := b.clock.NewTimerAt(until)
	defer t.Stop()
	b.slept.Signal(until)
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-t.C():
	}
	return true
}

// pass is one round of a service's loop, run in the caller's goroutine: it acts on what is
// due at the clock's reading and returns the instant its next round is due, or the zero
// time when it did work and more may be due at once. Each service's Pass is one.
type pass func(ctx context.Context) (time.Time, error)

// run is a service's loop over its pass: after a round that names an instant it sleeps
// until then (or a wake-up), after one that did work it goes again at once, and after a
// failure it hands the error to failed (which pauses).
func (b *base) run(ctx context.Context, p pass, failed func(context.Context, error)) {
	for ctx.Err() == nil {
		wake := b.wake()
		next, err := p(ctx)
		if err != nil {
			failed(ctx, err)
			continue
		}
		if next.IsZero() {
			continue
		}
		if !b.sleepUntil(ctx, wake, next) {
			return
		}
	}
}

// failedPass is run's usual failure handler: log the error and pause RetryDelay.
func (b *base) failedPass(ctx context.Context, err error) { b.retryLater(ctx, "pass failed", err) }

// Stepper runs a service's rounds in the caller's goroutine instead of the service's own
// goroutine, at the moments its loop would run them: the first time, once the instant the
// previous round named has come, at once after a round that did work, and as soon as the
// service's Wake source fired after the previous round began; after a failed round, once
// RetryDelay has passed. Nothing happens between two calls of Step, so a caller that also
// owns the (fake) clock decides every interleaving: internal/sim drives the engine's
// services so, through the engine's Stepped mode, to make a simulation depend on its seed
// alone. A service is either started or stepped, never both.
type Stepper struct {
	name  string
	pass  pass
	base  *base
	ran   bool
	next  time.Time       // what the last round returned; zero: due at once
	woken <-chan struct{} // the wake-up channel taken as the last round began
}

func (b *base) stepper(p pass) *Stepper { return &Stepper{name: b.runner.name, pass: p, base: b} }

// Name is the service's name ("promoter", "cron", ...).
func (s *Stepper) Name() string { return s.name }

// Next returns when the service's next round is due: the clock's reading when it is due
// now.
func (s *Stepper) Next() time.Time {
	now := s.base.clock.Now()
	if !s.ran || s.next.IsZero() || !s.next.After(now) || s.wokenUp() {
		return now
	}
	return s.next
}

// wokenUp reports whether the wake-up channel taken as the last round began has fired.
func (s *Stepper) wokenUp() bool {
	select {
	case <-s.woken: // a nil channel (after a failure, or no Wake) never fires
		return true
	default:
		return false
	}
}

// Step runs one round if one is due (Next is not after the clock's reading) and reports
// whether it ran one. A failed round's error is returned, wrapped with the service's name;
// the next is then due RetryDelay later, not woken early, as in the loop.
func (s *Stepper) Step(ctx context.Context) (bool, error) {
	if s.Next().After(s.base.clock.Now()) {
		return false, nil
	}
	s.ran = true
	s.woken = s.base.wake()
	next, err := s.pass(ctx)
	if err != nil {
		s.woken = nil
		s.next = s.base.clock.Now().Add(s.base.retryDelay)
		return true, fmt.Errorf("%s: %w", s.name, err)
	}
	s.next = next
	return true, nil
}

// retryLater logs a store error and pauses RetryDelay, not woken early, so that a store
// outage neither spins nor kills the loop.
func (b *base) retryLater(ctx context.Context, what string, err error) {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	b.log.Error(what, "err", err)
	b.failed.Signal(err)
	b.sleepUntil(ctx, nil, b.clock.Now().Add(b.retryDelay))
}
