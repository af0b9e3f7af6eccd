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

// RetentionStore is what the Retention service asks of the store.
type RetentionStore interface {
	PruneRuns(ctx context.Context, p *store.PruneRunsParams) (int, error)
	PruneWorkers(ctx context.Context, p *store.PruneWorkersParams) (int, error)
	PruneRateLimits(ctx context.Context, p *store.PruneRateLimitsParams) (int, error)
}

// RetentionPolicy says how long history is kept. A zero duration or count turns its rule
// off; the zero policy keeps everything.
type RetentionPolicy struct {
	// Runs: finished runs (with their attempts, output, slot rows, fired instants and
	// pipeline runs) go this long after they finished.
	Runs time.Duration
	// KeepPerJob: the Runs rule spares each job's newest KeepPerJob finished runs, but not
	// the run of a one-off job stored as its run alone (store.Anonymous), which would
	// otherwise be kept for ever.
	KeepPerJob int
	// MaxPerJob: a job's finished runs beyond its newest MaxPerJob go whatever their age.
	MaxPerJob int
	// Workers: workers silent this long (lost, or drained and gone) are removed.
	Workers time.Duration
	// Extra are further kinds of history (audit entries, ...), each pruned by age.
	Extra []RetentionRule
}

// RetentionRule is one more kind of history the Retention service keeps bounded by age.
type RetentionRule struct {
	// Name names it in logs ("audit").
	Name string
	// Age: entries older than this go; zero turns the rule off.
	Age time.Duration
	// Prune deletes at most limit entries from before before, and returns how many it
	// deleted.
	Prune func(ctx context.Context, before time.Time, limit int) (int, error)
}

// On reports whether any rule of the policy deletes anything.
func (p RetentionPolicy) On() bool {
	for _, r := range p.Extra {
		if r.Age > 0 {
			return true
		}
	}
	return p.Runs > 0 || p.MaxPerJob > 0 || p.Workers > 0
}

// Defaults of RetentionConfig.
const (
	// DefaultRetentionBatch is how many rows one transaction deletes.
	DefaultRetentionBatch = 500
	// DefaultRetentionPause is the pause between two batches while history is past
	// retention, so that deleting a backlog takes a bounded share of the database.
	DefaultRetentionPause = 100 * time.Millisecond
	// DefaultRetentionInterval is how often it looks again once nothing is past retention.
	DefaultRetentionInterval = time.Minute
	// rateLimitAge: a rate-limit row whose turn is this far past is deleted (a key whose
	// turn is past admits as a new key does; the margin covers servers' clock skew).
	rateLimitAge = time.Hour
)

// RetentionConfig wires a Retention service.
type RetentionConfig struct {
	Store  RetentionStore
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	Policy RetentionPolicy
	// Batch caps the rows of one kind one transaction deletes. Default
	// DefaultRetentionBatch.
	Batch int
	// Pause is the pause between batches while a kind has more past retention. Default
	// DefaultRetentionPause.
	Pause time.Duration
	// Interval is the pause once nothing is left past retention. Default
	// DefaultRetentionInterval.
	Interval time.Duration
	// RetryDelay is its pause after a store error. Default DefaultRetryDelay.
	RetryDelay time.Duration
}

// Pruned counts what one pass of the Retention service deleted.
type Pruned struct {
	Runs, Workers, RateLimits int
	Extra                     map[string]int // by RetentionRule.Name; nil when none deleted
}

// RetentionSignals are the Retention service's test signals.
type RetentionSignals struct {
	Pruned testsignal.Signal[Pruned]    // what one pass deleted (nothing too)
	Slept  testsignal.Signal[time.Time] // it sleeps until this instant
	Failed testsignal.Signal[error]     // a store call failed; it retries after RetryDelay
}

// Retention deletes history past the retention policy, in batches of Batch rows per kind
// and per transaction with a Pause between them, so that a backlog (a first start over a
// large store, a shortened retention) drains at a bounded rate and never holds locks that
// dispatch waits on for long. Once nothing is past retention it looks again every
// Interval. The leader runs it: one deleter per cluster.
type Retention struct {
	base
	TestSignals RetentionSignals

	store    RetentionStore
	policy   RetentionPolicy
	batch    int
	pause    time.Duration
	interval time.Duration
}

// NewRetention returns a Retention service; call Start to run it.
func NewRetention(cfg RetentionConfig) *Retention {
	r := &Retention{store: cfg.Store, policy: cfg.Policy, batch: cfg.Batch, pause: cfg.Pause, interval: cfg.Interval}
	r.base = newBase(commonConfig{name: "retention", clock: cfg.Clock, log: cfg.Logger,
		retryDelay: cfg.RetryDelay, slept: &r.TestSignals.Slept, failed: &r.TestSignals.Failed})
	if r.batch <= 0 {
		r.batch = DefaultRetentionBatch
	}
	if r.pause <= 0 {
		r.pause = DefaultRetentionPause
	}
	if r.interval <= 0 {
		r.interval = DefaultRetentionInterval
	}
	return r
}

// Start runs the service until Stop or ctx's end. It fails when it was started or
// stopped before.
func (r *Retention) Start(ctx context.Context) error { return r.start(ctx, r.loop) }

func (r *Retention) loop(ctx context.Context) { r.run(ctx, r.Pass, r.failedPass) }

// Stepper drives the service from the caller's goroutine instead of Start (see Stepper).
func (r *Retention) Stepper() *Stepper { return r.stepper(r.Pass) }

// Pass is one round of the service's loop, in the caller's goroutine: it deletes one batch
// of each kind of history past retention at the clock's reading and returns when the next
// round is due: Pause later when a kind filled its batch (more is past retention),
// Interval later otherwise.
func (r *Retention) Pass(ctx context.Context) (time.Time, error) {
	now := r.clock.Now()
	var got Pruned
	more := false
	count := func(n int, err error) (int, error) {
		if n >= r.batch {
			more = true
		}
		return n, err
	}
	var err error
	p := r.policy
	if p.Runs > 0 || p.MaxPerJob > 0 {
		params := &store.PruneRunsParams{KeepPerJob: p.KeepPerJob, MaxPerJob: p.MaxPerJob, Limit: r.batch}
		if p.Runs > 0 {
			params.Before = now.Add(-p.Runs)
		}
		if got.Runs, err = count(r.store.PruneRuns(ctx, params)); err != nil {
			return time.Time{}, fmt.Errorf("prune runs: %w", err)
		}
	}
	if p.Workers > 0 {
		if got.Workers, err = count(r.store.PruneWorkers(ctx, &store.PruneWorkersParams{Before: now.Add(-p.Workers), Limit: r.batch})); err != nil {
			return time.Time{}, fmt.Errorf("prune workers: %w", err)
		}
	}
	if got.RateLimits, err = count(r.store.PruneRateLimits(ctx, &store.PruneRateLimitsParams{Before: now.Add(-rateLimitAge), Limit: r.batch})); err != nil {
		return time.Time{}, fmt.Errorf("prune rate limits: %w", err)
	}
	for _, x := range p.Extra {
		if x.Age <= 0 {
			continue
		}
		n, err := count(x.Prune(ctx, now.Add(-x.Age), r.batch))
		if err != nil {
			return time.Time{}, fmt.Errorf("prune %s: %w", x.Name, err)
		}
		if n > 0 {
			if got.Extra == nil {
				got.Extra = map[string]int{}
			}
			got.Extra[x.Name] = n
		}
	}
	if got.Runs+got.Workers+got.RateLimits > 0 || got.Extra != nil {
		r.log.Debug("history pruned", "runs", got.Runs, "workers", got.Workers, "rate_limits", got.RateLimits, "extra", got.Extra)
	}
	r.TestSignals.Pruned.Signal(got)
	if more {
		return now.Add(r.pause), nil
	}
	return now.Add(r.interval), nil
}
