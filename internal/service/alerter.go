package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/testsignal"
)

// AlerterStore is what the Alerter asks of the store.
type AlerterStore interface {
	AlertFacts(ctx context.Context, p *store.AlertFactsParams) (*alerting.Facts, error)
	ApplyAlerts(ctx context.Context, p *store.ApplyAlertsParams) error
	ListAlerts(ctx context.Context, p *store.ListAlertsParams) ([]alerting.Alert, error)
}

// Alerter defaults.
const (
	// DefaultAlertInterval is how often the Alerter evaluates the rules when nothing wakes it.
	DefaultAlertInterval = 5 * time.Second
	// DefaultAlertMinGap is the least time between two evaluations, however often it is woken.
	DefaultAlertMinGap = time.Second
	// AlertLookback is how far back a new Alerter (a new leader's) looks for failed runs.
	AlertLookback = 24 * time.Hour
	// maxOpenAlerts bounds the firing alerts one pass reads.
	maxOpenAlerts = 100000
)

// AlerterConfig wires an Alerter.
type AlerterConfig struct {
	Store  AlerterStore
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	// Wake returns a channel closed when something the rules read changed (a run ended, a
	// worker was lost): the Alerter evaluates then, at most once per MinGap. Nil: it
	// evaluates every Interval only.
	Wake     func() <-chan struct{}
	Interval time.Duration // default DefaultAlertInterval
	MinGap   time.Duration // default DefaultAlertMinGap
	Rules    alerting.Rules
	// NewID makes an alert's id (time-sortable). Required.
	NewID func(time.Time) string
	// Notify is handed the alerts that fired and resolved in a pass, once they are
	// persisted. It must not block (the notifiers queue them). Nil: nothing is told.
	Notify     func([]alerting.Alert)
	RetryDelay time.Duration // default DefaultRetryDelay
}

// AlerterSignals are the Alerter's test signals.
type AlerterSignals struct {
	Evaluated testsignal.Signal[alerting.Result] // a pass persisted this result (empty too)
	Slept     testsignal.Signal[time.Time]
	Failed    testsignal.Signal[error]
}

// Alerter evaluates the alert rules (alerting.Evaluate) over the facts the store gathers,
// persists the alerts that fire, resolve or change, and hands the fired and resolved ones
// to Notify. The leader alone runs it, so each transition is decided once; the store's
// one-firing-alert-per-(rule, subject) index refuses a second fire from a deposed leader
// that has not stopped yet.
type Alerter struct {
	base
	TestSignals AlerterSignals

	store     AlerterStore
	interval  time.Duration
	minGap    time.Duration
	rules     alerting.Rules
	newID     func(time.Time) string
	notify    func([]alerting.Alert)
	last      time.Time // the previous pass's reading of the clock
	scansRead time.Time // the reading of the last pass that read the cron jobs, queues and running runs
}

// NewAlerter returns an Alerter; call Start to run it.
func NewAlerter(cfg AlerterConfig) *Alerter {
	a := &Alerter{store: cfg.Store, interval: cfg.Interval, minGap: cfg.MinGap, rules: cfg.Rules,
		newID: cfg.NewID, notify: cfg.Notify}
	a.base = newBase(commonConfig{name: "alerter", clock: cfg.Clock, log: cfg.Logger, wake: cfg.Wake,
		retryDelay: cfg.RetryDelay, slept: &a.TestSignals.Slept, failed: &a.TestSignals.Failed})
	if a.interval <= 0 {
		a.interval = DefaultAlertInterval
	}
	if a.minGap <= 0 {
		a.minGap = DefaultAlertMinGap
	}
	if a.notify == nil {
		a.notify = func([]alerting.Alert) {}
	}
	return a
}

var errNoNewID = errors.New("no NewID")

// Start runs the alerter until Stop or ctx's end.
func (a *Alerter) Start(ctx context.Context) error {
	if a.newID == nil {
		return fmt.Errorf("start alerter: %w", errNoNewID)
	}
	return a.start(ctx, func(ctx context.Context) { a.run(ctx, a.Pass, a.failedPass) })
}

// Stepper drives the alerter from the caller's goroutine instead of Start (see Stepper).
func (a *Alerter) Stepper() *Stepper { return a.stepper(a.Pass) }

// Pass is one round: unless the previous one was less than MinGap ago (a wake-up came
// early), it reads the open alerts and the facts (the cron jobs, queues and running runs
// only when Interval has passed since they were last read), evaluates the rules at the
// clock's reading, persists the result and notifies; it returns when the next round is due.
func (a *Alerter) Pass(ctx context.Context) (time.Time, error) {
	now := a.clock.Now()
	if !a.last.IsZero() && now.Before(a.last.Add(a.minGap)) {
		return a.last.Add(a.minGap), nil
	}
	open, err := a.store.ListAlerts(ctx, &store.ListAlertsParams{State: alerting.Firing, Limit: maxOpenAlerts})
	if err != nil {
		return time.Time{}, fmt.Errorf("open alerts: %w", err)
	}
	var streakJobs []string
	for _, al := range open {
		if al.Rule == alerting.RuleJobFailing {
			streakJobs = append(streakJobs, al.Subject[len("job:"):])
		}
	}
	since := now.Add(-AlertLookback)
	if !a.last.IsZero() {
		since = a.last.Add(-time.Minute) // servers' clocks differ a little: read a margin again
	}
	// The cron jobs are a row each, the queues' backlog a count of every queued run, and
	// the running runs a walk of an index that churns with every run: they are read at
	// most once per interval. A pass that a run's end woke early leaves them out, and their
	// alerts as they are.
	skipScans := !a.scansRead.IsZero() && now.Before(a.scansRead.Add(a.interval))
	facts, err := a.store.AlertFacts(ctx, &store.AlertFactsParams{Now: now, FailedAfter: since, StreakJobs: streakJobs,
		Streak: alerting.MaxConsecutiveFailures, RunningBefore: now.Add(-alerting.MinMaxDuration), SkipScans: skipScans})
	if err != nil {
		return time.Time{}, fmt.Errorf("alert facts: %w", err)
	}
	res := alerting.Evaluate(open, *facts, a.rules, now)
	for i := range res.Fire {
		res.Fire[i].ID = a.newID(now)
	}
	if !res.Empty() {
		if err := a.store.ApplyAlerts(ctx, &store.ApplyAlertsParams{Fire: res.Fire, Resolve: res.Resolve, Update: res.Update}); err != nil {
			if errors.Is(err, model.ErrConflict) {
				a.log.Warn("alerts changed meanwhile (another leader?): evaluating again", "err", err)
			}
			return time.Time{}, fmt.Errorf("apply alerts: %w", err)
		}
		for _, al := range res.Fire {
			a.log.Warn("alert firing", "id", al.ID, "rule", al.Rule, "subject", al.Subject, "summary", al.Summary)
		}
		for _, al := range res.Resolve {
			a.log.Info("alert resolved", "id", al.ID, "rule", al.Rule, "subject", al.Subject)
		}
		if changed := append(append([]alerting.Alert(nil), res.Fire...), res.Resolve...); len(changed) > 0 {
			a.notify(changed)
		}
	}
	a.last = now
	if !skipScans {
		a.scansRead = now
	}
	a.TestSignals.Evaluated.Signal(res)
	return now.Add(a.interval), nil
}
