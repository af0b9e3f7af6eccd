package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/service"
	"github.com/stint-dev/stint/internal/store"
)

// serviceLoop is a loop of internal/service as the engine runs it.
type serviceLoop interface {
	Start(ctx context.Context) error
	Stop()
	Stepper() *service.Stepper
}

// dueGrace is how long a due scheduled run waits for a lease straight from scheduled
// before the promoter queues it (service.PromoterConfig.Grace): longer than a burst of
// runs due at one instant takes to lease where workers have room for it, short enough that
// a run no worker takes soon shows as queued, with its pending reason, within seconds.
const dueGrace = 2 * time.Second

// newServices builds the services every server runs: the promoter and the releaser. Their
// work is set-based and idempotent, so servers running them at once is safe, and each is
// woken by its own server's submissions and queue changes (a delayed run or a rate limit
// set through a follower is promoted or released there, without waiting for the leader).
func (e *Engine) newServices() {
	idle := e.cfg.MaxLeaseWait * 10 // nothing to wait for: a safety net for other servers' changes
	e.promoter = service.NewPromoter(service.PromoterConfig{
		Store: e.store, Clock: e.clock, Logger: e.log, Wake: e.timers.Wait, IdleWait: idle,
		Grace: dueGrace, OnDue: e.work.Notify,
		OnPromoted: func(int) {
			e.work.Notify()
			e.changes.Notify()
		},
	})
	e.releaser = service.NewReleaser(service.ReleaserConfig{
		Store: e.store, Clock: e.clock, Logger: e.log, Wake: e.timers.Wait, IdleWait: idle,
		RateQueues: e.rateQueues.Load,
		OnReleased: e.wakeFor,
		OnTurn:     e.work.Notify,
	})
	e.elector = service.NewElector(service.ElectorConfig{
		Store: e.store, Clock: e.clock, Logger: e.log,
		ID: e.cfg.ServerID, Addr: e.cfg.AdvertiseAddr, StartedAt: e.clock.Now(),
		TTL: e.cfg.LeaderTTL, OnElected: e.becomeLeader, OnDeposed: e.loseLeadership,
	})
}

// newLeaderServices builds the services only the leader runs, for its term:
//   - the cron firer, because a cron instant must fire once: its fires carry the term
//     and the store refuses them once another server leads, so a deposed leader that
//     wakes late fires nothing;
//   - the rescuer, because it ends attempts as lost by comparing lease expiries with its
//     server's clock: one judge of expiry, instead of every server's clock, and one pass
//     over the cluster's leases instead of N servers racing to end the same attempts;
//   - the retention service, when Config.Retention has a rule: one deleter of history per
//     cluster, whose batches never race another server's.
//   - the alerter (with Config.Alerts), so that each alert fires and resolves once.
//
// A stopped service cannot start again, so each term gets new ones.
func (e *Engine) newLeaderServices(term int64) []serviceLoop {
	idle := e.cfg.MaxLeaseWait * 10
	rescuer := service.NewRescuer(service.RescuerConfig{
		Store: e.store, Clock: e.clock, Logger: e.log, Wake: e.timers.Wait,
		LeaseTTL: e.cfg.LeaseTTL, Rand: e.cfg.Rand,
		OnLost: func(runs []*model.Run) {
			e.obs.LeasesExpired(runs)
			e.obs.Ended(runs)
			e.pushLost(runs)
			e.wakeFor(runs)
			e.capacityFreed(runs)
		},
		OnResolved: func(runs []*model.Run) {
			e.obs.Ended(runs) // dependants skipped
			e.wakeFor(runs)
		},
	})
	cron := service.NewCronFirer(service.CronFirerConfig{
		Store: e.store, Clock: e.clock, Logger: e.log, Wake: e.schedChanged.Wait, IdleWait: idle,
		Lead: e.cfg.CronLead, MisfireGrace: e.cfg.MisfireGrace, Term: term, NewID: e.cfg.NewID,
		StartPipelineRun: func(ctx context.Context, pl *model.Pipeline, at, now time.Time, fireNext *time.Time) error {
			_, err := e.startPipelineRun(ctx, pl, model.TriggerCron, nil, at, now, fireNext, term)
			return err
		},
		OnFired: func(created, replaced []*model.Run) {
			e.obs.Ended(created) // skipped by a concurrency policy
			e.wakeFor(created)
			e.pushCancels(replaced)
		},
		OnCount: func(d model.CronStats) {
			e.cronRuns.Add(d.Runs)
			e.cronMissed.Add(d.Missed)
			e.cronDropped.Add(d.Dropped)
		},
	})
	cron.TestSignals.Slept = e.TestSignals.CronSlept
	services := []serviceLoop{rescuer, cron}
	if e.cfg.Retention.On() {
		services = append(services, service.NewRetention(service.RetentionConfig{
			Store: e.store, Clock: e.clock, Logger: e.log, Policy: e.cfg.Retention,
			Batch: e.cfg.RetentionBatch, Pause: e.cfg.RetentionPause, Interval: e.cfg.RetentionInterval,
		}))
	}
	if a := e.cfg.Alerts; a != nil {
		services = append(services, service.NewAlerter(service.AlerterConfig{
			Store: e.store, Clock: e.clock, Logger: e.log, Wake: e.changes.Wait,
			Interval: a.Interval, Rules: a.Rules, NewID: e.cfg.NewID, Notify: a.Notify,
		}))
	}
	return services
}

// becomeLeader is the elector's OnElected: it repairs what a crash may have left half
// done (an admission or a dependency resolution interrupted between two transactions,
// possible on PostgreSQL), then starts the leader services for term.
func (e *Engine) becomeLeader(ctx context.Context, term int64) {
	now := e.clock.Now()
	admitted, err := e.store.AdmitHeld(ctx, &store.AdmitHeldParams{Now: now})
	if err != nil {
		e.log.Error("leader repair: admit held runs", "err", err) // the next end of a run admits them
	}
	resolved, err := e.store.ResolvePending(ctx, &store.ResolvePendingParams{Now: now})
	if err != nil {
		e.log.Error("leader repair: resolve pending dependants", "err", err) // the rescuer retries it
	}
	e.obs.Ended(resolved)
	e.wakeFor(append(admitted, resolved...))
	services := e.newLeaderServices(term)
	if e.cfg.Stepped {
		steppers := make([]*service.Stepper, len(services))
		for i, s := range services {
			steppers[i] = s.Stepper()
		}
		e.leaderMu.Lock()
		e.leaderServices, e.leaderSteppers, e.term = services, steppers, term
		e.leaderMu.Unlock()
		return
	}
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			for _, started := range services[:i] {
				started.Stop()
			}
			e.log.Error("start leader services", "term", term, "err", err)
			return
		}
	}
	e.leaderMu.Lock()
	e.leaderServices, e.term = services, term
	e.leaderMu.Unlock()
}

// loseLeadership is the elector's OnDeposed: it stops the leader services and waits for
// them, so that nothing of the old term acts once it returns.
func (e *Engine) loseLeadership(term int64) {
	e.leaderMu.Lock()
	services := e.leaderServices
	e.leaderServices, e.leaderSteppers, e.term = nil, nil, 0
	e.leaderMu.Unlock()
	for _, s := range services {
		s.Stop()
	}
	e.log.Info("leader services stopped", "term", term)
}

// Term returns the term this server leads with, or 0 when it does not lead.
func (e *Engine) Term() int64 {
	e.leaderMu.Lock()
	defer e.leaderMu.Unlock()
	return e.term
}

// Cluster returns who leads (nil when no lease is live) and the servers seen within the
// last ten leader TTLs.
func (e *Engine) Cluster(ctx context.Context) (*model.Cluster, error) {
	now := e.clock.Now()
	var c model.Cluster
	l, err := e.store.Leader(ctx, &store.LeaderParams{Now: now})
	switch {
	case err == nil:
		c.Leader = l
	case !errors.Is(err, model.ErrNotFound):
		return nil, fmt.Errorf("cluster: %w", err)
	}
	ttl := e.cfg.LeaderTTL
	if ttl <= 0 {
		ttl = service.DefaultLeaderTTL
	}
	if c.Servers, err = e.store.ListServers(ctx, &store.ListServersParams{SeenAfter: now.Add(-10 * ttl)}); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return &c, nil
}

// errNotStepped answers Step on an engine whose services run their own loops.
var errNotStepped = errors.New("step: the engine is not Stepped")

// Step runs, on the caller's goroutine, one round of each service that is due at the
// clock's reading (service.Stepper: it never ran, the instant its last round named has
// come, or it was woken since): the elector's try first (winning it runs the leader's
// repairs, as at a start), then the promoter, the releaser and, while this server leads, the
// rescuer and the cron firer. It returns the earliest instant at which one of them is due
// again, which is not after the clock's reading while one is due at once (its round did
// work, or another's woke it), and stops at the first failed round with its error. A caller
// that moves the clock calls Step until the instant is after the clock's reading before it
// moves it on, as the loops would have run by then. Only for Config.Stepped.
func (e *Engine) Step(ctx context.Context) (time.Time, error) {
	if !e.cfg.Stepped {
		return time.Time{}, errNotStepped
	}
	if _, err := e.steppers[0].Step(ctx); err != nil { // the elector: it may win or lose the lead
		return time.Time{}, fmt.Errorf("step: %w", err)
	}
	for _, s := range e.allSteppers()[1:] {
		if _, err := s.Step(ctx); err != nil {
			return time.Time{}, fmt.Errorf("step: %w", err)
		}
	}
	var next time.Time
	for _, s := range e.allSteppers() {
		if n := s.Next(); next.IsZero() || n.Before(next) {
			next = n
		}
	}
	return next, nil
}

// allSteppers lists the rounds Step runs, in order.
func (e *Engine) allSteppers() []*service.Stepper {
	e.leaderMu.Lock()
	defer e.leaderMu.Unlock()
	return append(slices.Clone(e.steppers), e.leaderSteppers...)
}
