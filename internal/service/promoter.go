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
	NextDue(ctx context.Context, after time.Time) (time.Time, bool, error)
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
	// OnDue is told when scheduled runs fell due since it was last told: a worker may lease
	// them now, straight from scheduled. Nil: nobody is told.
	OnDue func()
	// OnPromoted is told how many runs one pass moved to queued (more than zero).
	OnPromoted func(n int)
	// Grace is how long a due run stays scheduled, for a worker to lease it without its
	// promotion's write, before the promoter queues it. Zero: promoted as it falls due.
	Grace time.Duration
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

// Promoter tells the leasers when scheduled runs fall due, and moves the due runs that no
// worker leased within Grace to queued. A lease takes a due scheduled run as it takes a
// queued one, so in a burst of runs due at one instant the runs that find a free worker at
// once skip the promotion's row update (a tenth to a quarter of PostgreSQL's time per run);
// the ones left over are queued after Grace, where they show their pending reason. It
// sleeps until the next instant that falls due or the end of the earliest due run's grace,
// or until woken because a new scheduled run may have moved those earlier.
type Promoter struct {
	base
	TestSignals PromoterSignals

	store      PromoterStore
	onDue      func()
	onPromoted func(int)
	batch      int
	grace      time.Duration
	next       int       // the limit of the next pass: promoteLimit of the last
	told       time.Time // OnDue was told of the runs due at or before this instant
}

// NewPromoter returns a Promoter; call Start to run it.
func NewPromoter(cfg PromoterConfig) *Promoter {
	p := &Promoter{store: cfg.Store, onDue: cfg.OnDue, onPromoted: cfg.OnPromoted, batch: cfg.Batch, grace: max(cfg.Grace, 0)}
	p.base = newBase(commonConfig{name: "promoter", clock: cfg.Clock, log: cfg.Logger, wake: cfg.Wake,
		idleWait: cfg.IdleWait, retryDelay: cfg.RetryDelay, slept: &p.TestSignals.Slept, failed: &p.TestSignals.Failed})
	if p.onDue == nil {
		p.onDue = func() {}
	}
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

// Pass is one round of the promoter's loop, in the caller's goroutine: it tells OnDue when
// runs fell due since it last did, promotes the runs due for longer than Grace at the
// clock's reading, if any, and returns when the next round is due: the zero time after a
// promotion (more may be due at once), a grace from now when the runs past their grace
// were all held by leases, else the earlier of the next instant a run falls due and the
// end of the earliest due run's grace, or IdleWait from now when nothing is scheduled.
func (p *Promoter) Pass(ctx context.Context) (time.Time, error) {
	now := p.clock.Now()
	fresh, ok, err := p.store.NextDue(ctx, p.told)
	if err != nil {
		return time.Time{}, fmt.Errorf("next due: %w", err)
	}
	if ok && !fresh.After(now) {
		p.onDue()
		p.told = now
	}
	cut := now.Add(-p.grace)
	first, ok, err := p.store.NextDue(ctx, time.Time{})
	if err != nil {
		return time.Time{}, fmt.Errorf("next due: %w", err)
	}
	if ok && !first.After(cut) {
		limit := promoteLimit(p.next, p.batch)
		n, err := p.store.PromoteDue(ctx, &store.PromoteDueParams{Now: cut, Limit: limit})
		if err != nil {
			return time.Time{}, fmt.Errorf("promote due runs: %w", err)
		}
		if n > 0 {
			p.onPromoted(n)
		}
		p.TestSignals.Promoted.Signal(n)
		p.next = 0
		if n >= limit {
			p.next = limit // more may be due: the next pass doubles it
		}
		if n > 0 {
			return time.Time{}, nil
		}
		// Runs past their grace that it could not promote are held by leases, which take
		// them; should one fail, the run is queued a grace (or, without one, a moment) later.
		return now.Add(max(p.grace, time.Millisecond)), nil
	}
	p.next = 0
	switch {
	case !ok:
		return now.Add(p.idleWait), nil
	case first.After(now):
		return first, nil // nothing is due yet
	}
	next := first.Add(p.grace)
	if t, ok, err := p.store.NextDue(ctx, now); err != nil {
		return time.Time{}, fmt.Errorf("next due: %w", err)
	} else if ok && t.Before(next) {
		next = t
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
