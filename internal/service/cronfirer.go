package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/cron"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/testsignal"
)

// DefaultMisfireGrace is how late an instant may fire and still count as on time
// (scheduler.PlanFire).
const DefaultMisfireGrace = time.Minute

// CronStore is what the CronFirer asks of the store.
type CronStore interface {
	DueJobs(ctx context.Context, p *store.DueJobsParams) ([]*model.Job, error)
	FireJobs(ctx context.Context, p *store.FireJobsParams) ([]store.FireResult, error)
	NextFire(ctx context.Context, p *store.NextFireParams) (time.Time, bool, error)
	DuePipelines(ctx context.Context, p *store.DuePipelinesParams) ([]*model.Pipeline, error)
	SetPipelineNextFire(ctx context.Context, p *store.SetPipelineNextFireParams) (bool, error)
}

// CronFirerConfig wires a CronFirer.
type CronFirerConfig struct {
	Store  CronStore
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	// Wake returns a channel closed when a job's or a pipeline's next fire may have moved
	// earlier (a schedule created or changed). Nil: never woken early.
	Wake func() <-chan struct{}
	// Lead is how far ahead of its instant a job without a concurrency limit fires: its
	// run is created then, scheduled for the instant, so that the instant itself only
	// promotes it. Zero: every job fires at its instant.
	Lead time.Duration
	// MisfireGrace is how late an instant may fire and still count as on time. Default
	// DefaultMisfireGrace.
	MisfireGrace time.Duration
	// StartPipelineRun creates the run of pipeline pl for instant at, fired at now, in one
	// transaction that also moves the pipeline's next fire to fireNext when that is not
	// nil (a zero time: no further instant); store.ErrStale when the pipeline no longer
	// expects that (another server fired it). The engine's, shared with manual triggers.
	StartPipelineRun func(ctx context.Context, pl *model.Pipeline, at, now time.Time, fireNext *time.Time) error
	// OnFired is told of the runs a fire of jobs created and of the runs it replaced
	// (concurrency policy replace), which their workers must stop.
	OnFired func(created, replaced []*model.Run)
	// OnCount adds what a pass did to the server's cron counters (model.CronStats).
	OnCount func(delta model.CronStats)
	// IdleWait is how long it sleeps when nothing has a schedule. Default DefaultIdleWait.
	IdleWait time.Duration
	// RetryDelay is its pause after a store error. Default DefaultRetryDelay.
	RetryDelay time.Duration
	// Batch caps the jobs (and the pipelines) one pass fires. Default 500.
	Batch int
	// NewID makes the ids of the runs it fires. Default id.New.
	NewID func(time.Time) string
	// Term is the leader's term this firer fires under: the store refuses its fires once
	// another server leads (model.ErrNotLeader), so a deposed leader that wakes late fires
	// nothing. StartPipelineRun must fence with the same term. Zero: not fenced.
	Term int64
}

// CronPass is what one pass of the CronFirer fired.
type CronPass struct {
	Now       time.Time
	Jobs      int // job fires written (stale ones too)
	Pipelines int // pipeline instants fired or schedules moved on
}

// CronFirerSignals are the CronFirer's test signals.
type CronFirerSignals struct {
	Fired  testsignal.Signal[CronPass]  // a pass fired something; another pass follows at once
	Slept  testsignal.Signal[time.Time] // it sleeps until this instant
	Failed testsignal.Signal[error]     // a store call failed; it retries after RetryDelay
}

// CronFirer fires the cron schedules of jobs and pipelines. It sleeps until the earliest
// next fire of all (less Lead), or until a schedule changes. Each due job's runs and its
// next fire are written in one transaction that the store refuses to apply twice
// (invariant 4); scheduler.PlanFire decides what a fire makes.
//
// With Lead, a job without a concurrency limit fires that long before its instant: its run
// is created scheduled for the instant. A job under a limit, and a pipeline, fires at the
// instant itself: the admission of a limited run depends on the runs active then, and a
// pipeline's runs depend on each other, so there is nothing to create ahead.
type CronFirer struct {
	base
	TestSignals CronFirerSignals

	store            CronStore
	lead, grace      time.Duration
	startPipelineRun func(context.Context, *model.Pipeline, time.Time, time.Time, *time.Time) error
	onFired          func(created, replaced []*model.Run)
	onCount          func(model.CronStats)
	batch            int
	term             int64
	newID            func(time.Time) string
	sched            schedules
}

// NewCronFirer returns a CronFirer; call Start to run it.
func NewCronFirer(cfg CronFirerConfig) *CronFirer {
	c := &CronFirer{store: cfg.Store, lead: cfg.Lead, grace: cfg.MisfireGrace, startPipelineRun: cfg.StartPipelineRun,
		onFired: cfg.OnFired, onCount: cfg.OnCount, batch: cfg.Batch, term: cfg.Term, newID: cfg.NewID}
	c.base = newBase(commonConfig{name: "cron", clock: cfg.Clock, log: cfg.Logger, wake: cfg.Wake,
		idleWait: cfg.IdleWait, retryDelay: cfg.RetryDelay, slept: &c.TestSignals.Slept, failed: &c.TestSignals.Failed})
	if c.grace <= 0 {
		c.grace = DefaultMisfireGrace
	}
	if c.onFired == nil {
		c.onFired = func(_, _ []*model.Run) {}
	}
	if c.onCount == nil {
		c.onCount = func(model.CronStats) {}
	}
	if c.batch <= 0 {
		c.batch = 500
	}
	if c.newID == nil {
		c.newID = id.New
	}
	return c
}

// Start runs the cron firer until Stop or ctx's end. It fails when it was started or
// stopped before, and without StartPipelineRun.
func (c *CronFirer) Start(ctx context.Context) error {
	if c.startPipelineRun == nil {
		return fmt.Errorf("start cron firer: %w", errNoPipelineRuns)
	}
	return c.start(ctx, c.loop)
}

var errNoPipelineRuns = errors.New("no StartPipelineRun")

func (c *CronFirer) loop(ctx context.Context) { c.run(ctx, c.Pass, c.passFailed) }

// passFailed is the loop's failure handler: a fire refused for the term pauses like any error,
// but is logged as what it is.
func (c *CronFirer) passFailed(ctx context.Context, err error) {
	if errors.Is(err, model.ErrNotLeader) {
		c.notLeader(ctx, err)
		return
	}
	c.failedPass(ctx, err)
}

// Stepper drives the cron firer from the caller's goroutine instead of Start (see Stepper).
func (c *CronFirer) Stepper() *Stepper { return c.stepper(c.Pass) }

// Pass is one round of the cron firer's loop, in the caller's goroutine: it fires the jobs
// and pipelines due at the clock's reading (jobs without a concurrency limit up to Lead
// ahead), and returns when the next round is due: the earliest next fire less Lead (or the
// instant of a limited job inside the lead), IdleWait from now when nothing has a schedule,
// or the zero time when it fired something (more may be due at once). A fire the store
// refuses for the term is a model.ErrNotLeader error.
func (c *CronFirer) Pass(ctx context.Context) (time.Time, error) {
	now := c.clock.Now()
	horizon := now.Add(c.lead)
	jobs, held, err := c.fireJobs(ctx, now, horizon)
	if err != nil {
		return time.Time{}, fmt.Errorf("fire cron jobs: %w", err)
	}
	pipelines, heldPipeline, err := c.firePipelines(ctx, now, horizon)
	if err != nil {
		return time.Time{}, fmt.Errorf("fire pipelines: %w", err)
	}
	if jobs > 0 || pipelines > 0 {
		c.TestSignals.Fired.Signal(CronPass{Now: now, Jobs: jobs, Pipelines: pipelines})
		return time.Time{}, nil // more may be due
	}
	if !heldPipeline.IsZero() && (held.IsZero() || heldPipeline.Before(held)) {
		held = heldPipeline
	}
	next, ok, err := c.store.NextFire(ctx, &store.NextFireParams{After: horizon})
	if err != nil {
		return time.Time{}, fmt.Errorf("next cron fire: %w", err)
	}
	until := now.Add(c.idleWait) // no schedule: sleep until one changes
	if ok {
		until = next.Add(-c.lead)
	}
	if !held.IsZero() && held.Before(until) {
		until = held // an instant inside the lead that fires at the instant
	}
	return until, nil
}

// notLeader logs a fire the store refused because this server's term no longer leads, and
// pauses like a store error: the elector deposes this firer at its next try.
func (c *CronFirer) notLeader(ctx context.Context, err error) {
	c.log.Warn("cron fire refused: no longer the leader", "term", c.term, "err", err)
	c.failed.Signal(err)
	c.sleepUntil(ctx, nil, c.clock.Now().Add(c.retryDelay))
}

// fireJobs fires one batch of the jobs due by horizon: those due by now, and those without
// a concurrency limit due by horizon (ahead of their instant). It returns how many fires it
// wrote, and the earliest instant of a limited job it left for later (zero: none).
func (c *CronFirer) fireJobs(ctx context.Context, now, horizon time.Time) (int, time.Time, error) {
	jobs, err := c.store.DueJobs(ctx, &store.DueJobsParams{Now: horizon, Limit: c.batch})
	if err != nil {
		return 0, time.Time{}, err
	}
	var held time.Time
	fires := make([]store.Fire, 0, len(jobs))
	for _, j := range jobs {
		if j.NextFireAt.After(now) && scheduler.RunConcurrency(j, nil) != nil {
			if held.IsZero() || j.NextFireAt.Before(held) {
				held = *j.NextFireAt
			}
			continue
		}
		fires = append(fires, c.planFire(j, now))
	}
	if len(fires) == 0 {
		return 0, held, nil
	}
	res, err := c.store.FireJobs(ctx, &store.FireJobsParams{Fires: fires, Term: c.term, Now: now})
	if err != nil {
		return 0, time.Time{}, err
	}
	var (
		created, replaced []*model.Run
		runs              int
	)
	for _, fr := range res {
		if !fr.Stale {
			runs += len(fr.Runs)
		}
		for _, rr := range fr.Runs {
			if rr.Err != nil {
				c.log.Error("cron run not created", "err", rr.Err)
				continue
			}
			if !rr.Existing {
				created = append(created, rr.Run)
			}
			replaced = append(replaced, rr.Replaced...)
		}
	}
	c.onCount(model.CronStats{Runs: uint64(runs)})
	c.onFired(created, replaced)
	return len(fires), held, nil
}

// planFire is what a due job fires at now: the runs for the instants scheduler.PlanFire
// picks, and its next fire. A job fired ahead of its instant (Lead) is planned as at its
// instant, its run scheduled for it.
func (c *CronFirer) planFire(j *model.Job, now time.Time) store.Fire {
	f := store.Fire{JobID: j.ID, Expect: *j.NextFireAt}
	at := now
	if j.NextFireAt.After(now) {
		at = *j.NextFireAt
	}
	var fire []time.Time
	fire, f.Next = c.planInstants("job", j.ID, j.Name, j.Spec.Schedule, *j.NextFireAt, at)
	for _, at := range fire {
		f.Runs = append(f.Runs, scheduler.NewCronRun(c.newID(now), j, at, now)) // scheduled when fired ahead
	}
	return f
}

// firePipelines fires the pipelines due by now. It returns how many instants it fired or
// skipped, and the earliest instant of a pipeline due by horizon but not yet by now.
func (c *CronFirer) firePipelines(ctx context.Context, now, horizon time.Time) (int, time.Time, error) {
	pls, err := c.store.DuePipelines(ctx, &store.DuePipelinesParams{Now: horizon, Limit: c.batch})
	if err != nil {
		return 0, time.Time{}, err
	}
	var (
		held  time.Time
		fired int
	)
	for _, pl := range pls {
		due := *pl.NextFireAt
		if due.After(now) {
			if held.IsZero() || due.Before(held) {
				held = due
			}
			continue
		}
		instants, next := c.planInstants("pipeline", pl.ID, pl.Name, pl.Spec.Schedule, due, now)
		if len(instants) == 0 {
			// Nothing to fire (skipped by misfire policy): move the schedule on alone.
			if _, err := c.store.SetPipelineNextFire(ctx, &store.SetPipelineNextFireParams{ID: pl.ID, Expect: due, Next: next,
				Term: c.term, Now: now}); err != nil {
				return fired, held, err
			}
			fired++
			continue
		}
		for i, at := range instants {
			// The first run's transaction moves the schedule (compare and set on the
			// instant read); the unique (pipeline, instant) keeps the others to one each.
			var fireNext *time.Time
			if i == 0 {
				fireNext = next
				if fireNext == nil {
					fireNext = &time.Time{} // no further instant
				}
			}
			err := c.startPipelineRun(ctx, pl, at, now, fireNext)
			switch {
			case errors.Is(err, store.ErrStale):
				c.log.Debug("pipeline already fired for its instant", "pipeline", pl.ID, "at", at)
				if i == 0 {
					break // another server fired it
				}
				continue
			case err != nil:
				return fired, held, err
			default:
				c.onCount(model.CronStats{Runs: uint64(len(pl.Spec.Steps))})
			}
			fired++
		}
	}
	return fired, held, nil
}

// planInstants returns which instants of schedule s, due since due, fire at now
// (scheduler.PlanFire decides), and where the schedule goes next (nil: nowhere); it logs
// and counts a misfire. kind, id and name name the job or pipeline in logs.
func (c *CronFirer) planInstants(kind, id, name string, s *model.Schedule, due, now time.Time) ([]time.Time, *time.Time) {
	sc, err := c.sched.get(s)
	if err != nil {
		// Stop the schedule rather than retry it forever; its page shows no next fire.
		c.log.Error("cron schedule no longer parses; it stops firing", kind, id, "cron", s.Cron, "timezone", s.Timezone, "err", err)
		return nil, nil
	}
	p := scheduler.PlanFire(sc, s, due, now, c.grace)
	if p.Missed > 0 || p.Dropped > 0 {
		c.onCount(model.CronStats{Missed: uint64(p.Missed), Dropped: uint64(p.Dropped)})
		count := fmt.Sprint(p.Missed)
		if p.More {
			count += "+"
		}
		c.log.Warn("cron misfire: instants missed while no server fired them",
			kind, id, "name", name, "policy", misfirePolicy(s), "missed", count,
			"first", due.UTC(), "runs", len(p.Fire), "dropped", p.Dropped, "limit", scheduler.MisfireLimit(s))
	}
	return p.Fire, p.Next
}

func misfirePolicy(s *model.Schedule) string {
	if s.Misfire == "" {
		return model.MisfireRunOnce
	}
	return s.Misfire
}

// schedules parses schedules once per distinct (expression, zone).
type schedules struct {
	mu sync.Mutex
	m  map[[2]string]*cron.Schedule
}

// get returns the parsed schedule s; expressions were validated on the way in, so an
// error here means the zone database changed under the server.
func (c *schedules) get(s *model.Schedule) (*cron.Schedule, error) {
	k := [2]string{s.Cron, s.Timezone}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc, ok := c.m[k]; ok {
		return sc, nil
	}
	sc, err := cron.Parse(s.Cron, s.Timezone)
	if err != nil {
		return nil, err
	}
	if c.m == nil || len(c.m) >= 10000 {
		c.m = make(map[[2]string]*cron.Schedule) // a crude bound: start over
	}
	c.m[k] = sc
	return sc, nil
}
