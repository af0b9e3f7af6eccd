package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/testsignal"
)

// ReleaserStore is what the Releaser asks of the store.
type ReleaserStore interface {
	NextRelease(ctx context.Context) (time.Time, bool, error)
	ReleaseDue(ctx context.Context, p *store.ReleaseDueParams) ([]*model.Run, error)
	NextQueueTurn(ctx context.Context, p *store.NextQueueTurnParams) (time.Time, bool, error)
}

// ReleaserConfig wires a Releaser.
type ReleaserConfig struct {
	Store  ReleaserStore
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	// Wake returns a channel closed when a new held run or an underfilled lease may have
	// brought the next turn earlier. Nil: never woken early.
	Wake func() <-chan struct{}
	// RateQueues reports whether some queue has a rate limit; only then does it watch the
	// queues' turns. Nil: none has.
	RateQueues func() bool
	// OnReleased is told of the runs a pass admitted (possibly none).
	OnReleased func(runs []*model.Run)
	// OnTurn is called when a rate-limited queue's turn came: leases may take its runs
	// again.
	OnTurn func()
	// IdleWait is how long it sleeps when nothing is held. Default DefaultIdleWait.
	IdleWait time.Duration
	// RetryDelay is its pause after a store error. Default DefaultRetryDelay.
	RetryDelay time.Duration
}

// ReleaserSignals are the Releaser's test signals.
type ReleaserSignals struct {
	Released testsignal.Signal[[]*model.Run] // the runs one pass released (none too)
	Turn     testsignal.Signal[time.Time]    // a queue's turn at this instant came (after OnTurn)
	Slept    testsignal.Signal[time.Time]    // it sleeps until this instant
	Failed   testsignal.Signal[error]        // a store call failed; it retries after RetryDelay
}

// Releaser keeps rate limits moving without polling: it admits runs held by a key's rate
// limit when their turn comes, and tells the engine when a rate-limited queue gets its next
// turn. It sleeps until the earlier of the two, or until woken.
type Releaser struct {
	base
	TestSignals ReleaserSignals

	store      ReleaserStore
	rateQueues func() bool
	onReleased func([]*model.Run)
	onTurn     func()
	looked     time.Time // when the last round that looked at the queues' turns did
}

// NewReleaser returns a Releaser; call Start to run it.
func NewReleaser(cfg ReleaserConfig) *Releaser {
	r := &Releaser{store: cfg.Store, rateQueues: cfg.RateQueues, onReleased: cfg.OnReleased, onTurn: cfg.OnTurn}
	r.base = newBase(commonConfig{name: "releaser", clock: cfg.Clock, log: cfg.Logger, wake: cfg.Wake,
		idleWait: cfg.IdleWait, retryDelay: cfg.RetryDelay, slept: &r.TestSignals.Slept, failed: &r.TestSignals.Failed})
	if r.rateQueues == nil {
		r.rateQueues = func() bool { return false }
	}
	if r.onReleased == nil {
		r.onReleased = func([]*model.Run) {}
	}
	if r.onTurn == nil {
		r.onTurn = func() {}
	}
	return r
}

// Start runs the releaser until Stop or ctx's end. It fails when the releaser was started
// or stopped before.
func (r *Releaser) Start(ctx context.Context) error { return r.start(ctx, r.loop) }

func (r *Releaser) loop(ctx context.Context) { r.run(ctx, r.Pass, r.failedPass) }

// Stepper drives the releaser from the caller's goroutine instead of Start (see Stepper).
func (r *Releaser) Stepper() *Stepper { return r.stepper(r.Pass) }

// Pass is one round of the releaser's loop, in the caller's goroutine. It admits the runs
// whose rate-limit turn has come, if any, and otherwise tells of a rate-limited queue's turn
// that came since the previous round looked (OnTurn): the instant it slept until, or one
// that came while it was busy or woken late. It returns when the next round is due: the
// earliest held run's turn or queue turn to come, IdleWait from now when there is none, or
// the zero time after a release or a turn told of (more may be due at once).
func (r *Releaser) Pass(ctx context.Context) (time.Time, error) {
	now := r.clock.Now()
	next, ok, err := r.store.NextRelease(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("next rate-limit release: %w", err)
	}
	if ok && !next.After(now) {
		runs, err := r.store.ReleaseDue(ctx, &store.ReleaseDueParams{Now: now})
		if err != nil {
			return time.Time{}, fmt.Errorf("release rate-limited runs: %w", err)
		}
		r.onReleased(runs)
		r.TestSignals.Released.Signal(runs)
		return time.Time{}, nil
	}
	if r.rateQueues() {
		// Turns up to the previous look were told of; a round that failed did not look.
		turn, tok, err := r.store.NextQueueTurn(ctx, &store.NextQueueTurnParams{Now: now, After: r.looked})
		if err != nil {
			return time.Time{}, fmt.Errorf("next queue turn: %w", err)
		}
		if tok && !turn.After(now) {
			r.looked = now
			r.onTurn() // wakes every worker: one call tells of every queue's turn up to now
			r.TestSignals.Turn.Signal(turn)
			return time.Time{}, nil
		}
		if tok && (!ok || turn.Before(next)) {
			next, ok = turn, true
		}
	}
	r.looked = now
	if !ok {
		return now.Add(r.idleWait), nil
	}
	return next, nil
}
