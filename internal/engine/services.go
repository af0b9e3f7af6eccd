package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/service"
)

// leaderService is a loop of internal/service as the engine runs it.
type leaderService interface {
	Start(ctx context.Context) error
	Stop()
}

// newServices builds the services of internal/service over the engine's store, clock and
// broadcasts; what they find is handed back to the engine's wake-ups.
func (e *Engine) newServices() {
	idle := e.cfg.MaxLeaseWait * 10 // nothing to wait for: a safety net for other servers' changes
	e.promoter = service.NewPromoter(service.PromoterConfig{
		Store: e.store, Clock: e.clock, Logger: e.log, Wake: e.timers.Wait, IdleWait: idle,
		OnPromoted: func(int) {
			e.work.Notify()
			e.changes.Notify()
		},
	})
	e.rescuer = service.NewRescuer(service.RescuerConfig{
		Store: e.store, Clock: e.clock, Logger: e.log, Wake: e.timers.Wait,
		LeaseTTL: e.cfg.LeaseTTL, Rand: e.cfg.Rand,
		OnLost: func(runs []*model.Run) {
			e.pushLost(runs)
			e.wakeFor(runs)
			e.capacityFreed(runs)
		},
		OnResolved: e.wakeFor,
	})
	e.releaser = service.NewReleaser(service.ReleaserConfig{
		Store: e.store, Clock: e.clock, Logger: e.log, Wake: e.timers.Wait, IdleWait: idle,
		RateQueues: e.rateQueues.Load,
		OnReleased: e.wakeFor,
		OnTurn:     e.work.Notify,
	})
	e.cron = service.NewCronFirer(service.CronFirerConfig{
		Store: e.store, Clock: e.clock, Logger: e.log, Wake: e.schedChanged.Wait, IdleWait: idle,
		Lead: e.cfg.CronLead, MisfireGrace: e.cfg.MisfireGrace,
		StartPipelineRun: func(ctx context.Context, pl *model.Pipeline, at, now time.Time, fireNext *time.Time) error {
			_, err := e.startPipelineRun(ctx, pl, model.TriggerCron, nil, at, now, fireNext)
			return err
		},
		OnFired: func(created, replaced []*model.Run) {
			e.wakeFor(created)
			e.pushCancels(replaced)
		},
		OnCount: func(d model.CronStats) {
			e.cronRuns.Add(d.Runs)
			e.cronMissed.Add(d.Missed)
			e.cronDropped.Add(d.Dropped)
		},
	})
	e.leaderServices = []leaderService{e.promoter, e.rescuer, e.releaser, e.cron}
}

// startLeaderServices starts the services that act on every run of the cluster (promote,
// rescue, release, cron). Today every server runs them, and Start calls this; with leader
// election (issue 11) the server that wins leadership will call it instead, and stop them
// with stopLeaderServices when it loses leadership (a service starts once, so winning it
// again means newServices first). Their work is idempotent, so two servers running them
// at once is safe, only wasteful.
func (e *Engine) startLeaderServices(ctx context.Context) error {
	for i, s := range e.leaderServices {
		if err := s.Start(ctx); err != nil {
			for _, started := range e.leaderServices[:i] {
				started.Stop()
			}
			return fmt.Errorf("start leader services: %w", err)
		}
	}
	return nil
}

// stopLeaderServices stops the leader services and waits for them.
func (e *Engine) stopLeaderServices() {
	for _, s := range e.leaderServices {
		s.Stop()
	}
}
