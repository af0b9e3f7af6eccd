package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/testsignal"
)

// PromoterStore is what the Promoter asks of the store.
type PromoterStore interface {
	NextDue(ctx context.Context) (time.Time, bool, error)
	PromoteDue(ctx context.Context, p *store.PromoteDueParams) (int, error)
}

// PromoterConfig wires a Promoter.
type PromoterConfig struct {
	Store  PromoterStore
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	// Wake returns a channel closed when the earliest due time may have moved earlier (a
	// new scheduled run). Nil: never woken early.
	Wake func() <-chan struct{}
	// OnPromoted is told how many runs one pass moved to queued (more than zero).
	OnPromoted func(n int)
	// IdleWait is how long it sleeps when no run is scheduled: a safety net for runs it
	// is not woken for (another server's). Default DefaultIdleWait.
	IdleWait time.Duration
	// RetryDelay is its pause after a store error. Default DefaultRetryDelay.
	RetryDelay time.Duration
	// Batch caps the runs one pass promotes. Default 5000. The first pass after an idle
	// one promotes an eighth of it, and each full pass doubles that up to Batch: a burst's
	// first runs are queued (and leased) after a short statement instead of a long one.
	Batch int
}

// PromoterSignals are the Promoter's test signals.
type PromoterSignals struct {
	Promoted testsignal.Signal[int]       // runs one pass promoted (zero too)
	Slept    testsignal.Signal[time.Time] // it sleeps until this instant
	Failed   testsignal.Signal[error]     // a store call failed; it retries after RetryDelay
}

// Promoter moves scheduled runs to queued as they fall due. It sleeps until the earliest
// due time, or until woken because a new scheduled run may have moved it earlier.
type Promoter struct {
	base
	TestSignals PromoterSignals

	store      PromoterStore
	onPromoted func(int)
	batch      int
	next       int // the limit of the next pass: promoteLimit of the last
}

// NewPromoter returns a Promoter; call Start to run it.
func NewPromoter(cfg PromoterConfig) *Promoter {
	p := &Promoter{store: cfg.Store, onPromoted: cfg.OnPromoted, batch: cfg.Batch}
	p.base = newBase(commonConfig{name: "promoter", clock: cfg.Clock, log: cfg.Logger, wake: cfg.Wake,
		idleWait: cfg.IdleWait, retryDelay: cfg.RetryDelay, slept: &p.TestSignals.Slept, failed: &p.TestSignals.Failed})
	if p.onPromoted == nil {
		p.onPromoted = func(int) {}
	}
	if p.batch <= 0 {
		p.batch = 5000
	}
	return p
}

// Start runs the promoter until Stop or ctx's end. It fails when the promoter was started
// or stopped before.
func (p *Promoter) Start(ctx context.Context) error { return p.start(ctx, p.loop) }

func (p *Promoter) loop(ctx context.Context) { p.run(ctx, p.Pass, p.failedPass) }

// Stepper drives the promoter from the caller's goroutine instead of Start (see Stepper).
func (p *Promoter) Stepper() *Stepper { return p.stepper(p.Pass) }

// Pass is one round of the promoter's loop, in the caller's goroutine: it promotes the runs
// due at the clock's reading, if any, and returns when the next round is due: the earliest
// due time, IdleWait from now when nothing is scheduled, or the zero time after a
// promotion (more may be due at once).
func (p *Promoter) Pass(ctx context.Context) (time.Time, error) {
	next, ok, err := p.store.NextDue(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("next due: %w", err)
	}
	now := p.clock.Now()
	if ok && !next.After(now) {
		limit := promoteLimit(p.next, p.batch)
		n, err := p.store.PromoteDue(ctx, &store.PromoteDueParams{Now: now, Limit: limit})
		if err != nil {
			return time.Time{}, fmt.Errorf("promote due runs: %w", err)
		}
		p.next = 0
		if n >= limit {
			p.next = limit // more may be due: the next pass doubles it
		}
		if n > 0 {
			p.onPromoted(n)
		}
		p.TestSignals.Promoted.Signal(n)
		return time.Time{}, nil
	}
	p.next = 0
	if !ok {
		return now.Add(p.idleWait), nil
	}
	return next, nil
}

// promoteLimit is the limit of a pass after one whose limit was last (0: the pass before
// promoted all that was due, or none), with most the most a pass promotes: most/8 (at least
// one) after an idle pass, then twice the last, up to most.
func promoteLimit(last, most int) int {
	if last <= 0 {
		return (most + 7) / 8
	}
	return min(2*last, most)
}
