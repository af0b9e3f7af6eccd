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
