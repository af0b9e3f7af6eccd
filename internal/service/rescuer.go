package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/testsignal"
)

// RescuerStore is what the Rescuer asks of the store.
type RescuerStore interface {
	RescueExpired(ctx context.Context, p *store.RescueExpiredParams) ([]*model.Run, error)
	ResolvePending(ctx context.Context, p *store.ResolvePendingParams) ([]*model.Run, error)
	NextLeaseExpiry(ctx context.Context) (time.Time, bool, error)
}

// RescuerConfig wires a Rescuer.
type RescuerConfig struct {
	Store  RescuerStore
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	// Wake returns a channel closed when the earliest lease expiry may have moved earlier.
	// Nil: never woken early.
	Wake func() <-chan struct{}
	// LeaseTTL is how long it sleeps when no lease is held (a lease taken meanwhile
	// expires no sooner than that). Required: Start fails without it.
	LeaseTTL time.Duration
	// Rand returns uniform numbers in [0, 1) for the retry jitter of a run whose attempt
	// was lost, handed to the store (see store.RescueExpiredParams).
	Rand func() float64
	// OnLost is told of the runs whose attempts a pass ended as lost (never empty).
	OnLost func(runs []*model.Run)
	// OnResolved is told of the dependants a pass resolved (never empty).
	OnResolved func(runs []*model.Run)
	// RetryDelay is its pause after a store error. Default DefaultRetryDelay.
	RetryDelay time.Duration
	// Batch caps the attempts one pass rescues. Default 1000.
	Batch int
}

// RescuerSignals are the Rescuer's test signals.
type RescuerSignals struct {
	Rescued testsignal.Signal[[]*model.Run] // the runs one pass rescued (none too)
	Slept   testsignal.Signal[time.Time]    // it sleeps until this instant
	Failed  testsignal.Signal[error]        // a store call failed; it retries after RetryDelay
}

// Rescuer ends attempts whose lease expired (their worker died or was cut off) as lost,
// which retries or fails their runs. It sleeps until the earliest lease expiry. Each pass
// also resolves the dependants whose resolution did not follow their upstream's end (a
// store that resolves in a transaction of its own, which failed): at the latest a lease
// TTL later; a failure there is logged and retried at the next pass.
type Rescuer struct {
	base
	TestSignals RescuerSignals

	store      RescuerStore
	leaseTTL   time.Duration
	rand       func() float64
	onLost     func([]*model.Run)
	onResolved func([]*model.Run)
	batch      int
}

// NewRescuer returns a Rescuer; call Start to run it.
func NewRescuer(cfg RescuerConfig) *Rescuer {
	r := &Rescuer{store: cfg.Store, leaseTTL: cfg.LeaseTTL, rand: cfg.Rand,
		onLost: cfg.OnLost, onResolved: cfg.OnResolved, batch: cfg.Batch}
	r.base = newBase(commonConfig{name: "rescuer", clock: cfg.Clock, log: cfg.Logger, wake: cfg.Wake,
		retryDelay: cfg.RetryDelay, slept: &r.TestSignals.Slept, failed: &r.TestSignals.Failed})
	if r.onLost == nil {
		r.onLost = func([]*model.Run) {}
	}
	if r.onResolved == nil {
		r.onResolved = func([]*model.Run) {}
	}
	if r.batch <= 0 {
		r.batch = 1000
	}
	return r
}

// Start runs the rescuer until Stop or ctx's end. It fails when the rescuer was started
// or stopped before.
func (r *Rescuer) Start(ctx context.Context) error {
	if r.leaseTTL <= 0 {
		return fmt.Errorf("start rescuer: %w", errNoLeaseTTL)
	}
	return r.start(ctx, r.loop)
}

var errNoLeaseTTL = errors.New("no lease TTL")

func (r *Rescuer) loop(ctx context.Context) { r.run(ctx, r.Pass, r.failedPass) }

// Stepper drives the rescuer from the caller's goroutine instead of Start (see Stepper).
func (r *Rescuer) Stepper() *Stepper { return r.stepper(r.Pass) }

// Pass is one round of the rescuer's loop, in the caller's goroutine: it ends the attempts
// whose lease expired before the clock's reading and resolves pending dependants, and
// returns when the next round is due: just after the earliest lease expiry, a lease TTL
// from now when no lease is held, or the zero time when it rescued a whole batch (more may
// have expired).
func (r *Rescuer) Pass(ctx context.Context) (time.Time, error) {
	now := r.clock.Now()
	runs, err := r.store.RescueExpired(ctx, &store.RescueExpiredParams{Now: now, Limit: r.batch, Rand: r.rand})
	if err != nil {
		return time.Time{}, fmt.Errorf("rescue expired leases: %w", err)
	}
	if resolved, err := r.store.ResolvePending(ctx, &store.ResolvePendingParams{Now: now}); err != nil {
		r.log.Error("resolve dependants", "err", err)
	} else if len(resolved) > 0 {
		r.onResolved(resolved)
	}
	if len(runs) > 0 {
		r.log.Warn("attempts lost: lease expired", "runs", len(runs))
		r.onLost(runs)
	}
	r.TestSignals.Rescued.Signal(runs)
	if len(runs) == r.batch {
		return time.Time{}, nil // more may have expired
	}
	next, ok, err := r.store.NextLeaseExpiry(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("next lease expiry: %w", err)
	}
	if !ok {
		return now.Add(r.leaseTTL), nil
	}
	return next.Add(time.Millisecond), nil // expired means before Now
}
