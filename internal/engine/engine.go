package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/service"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/testsignal"
)

// Config wires an Engine.
type Config struct {
	Store  store.Store
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	// LeaseTTL is how long a lease lives without a heartbeat; a worker silent that long
	// has its attempts ended as lost. Default 15s.
	LeaseTTL time.Duration
	// HeartbeatInterval is what workers are told to use. Default LeaseTTL/3
	// (DefaultHeartbeatInterval).
	HeartbeatInterval time.Duration
	// MaxLeaseWait caps a worker's long poll. Default 30s.
	MaxLeaseWait time.Duration
	// Committers is how many transactions each group committer may run at once: 1 for
	// SQLite (one writer), a few for PostgreSQL. Default 1.
	Committers int
	// MaxBatch caps the entries of one group commit. Default 2000.
	MaxBatch int
	// LeaseLinger spaces one worker's lease transactions: a lease poll that comes (or is woken)
	// sooner than this after the worker's previous lease began waits for the rest of it, so
	// that under a stream of submissions one transaction leases what arrived meanwhile
	// instead of one transaction each. A worker that leases rarely is never held back, nor
	// one whose last lease took all it asked for (a backlog: waiting gathers nothing). It
	// adds at most this to submit-to-start latency. Zero: no spacing.
	LeaseLinger time.Duration
	// CompleteLinger spaces the group commits of completions the same way: a flush waits
	// until this after the previous one began, gathering what comes meanwhile. Zero: none.
	CompleteLinger time.Duration
	// HeartbeatLinger spaces the group commits of heartbeats the same way, so that the
	// heartbeats of many workers are recorded by one statement: with thousands of workers
	// the heartbeats are a steady stream of small writes. It delays each heartbeat's answer
	// by at most this, which the interval and the lease TTL dwarf. Zero: none.
	HeartbeatLinger time.Duration
	// AuditLinger spaces the audit log's writes the same way: a write waits until this
	// after the previous one began, so that under a stream of requests one transaction
	// writes the entries of many. Entries are written after their request's answer either
	// way; this delays them by at most AuditLinger more, and no request. Zero: none.
	AuditLinger time.Duration
	// Rand returns uniform numbers in [0, 1) for retry jitter. Default math/rand/v2.
	Rand func() float64
	// CronLead is how far ahead of its instant a cron job without a concurrency limit
	// fires: its run is created then, scheduled for the instant, so that the instant itself
	// only promotes it. Zero: every job fires at its instant.
	CronLead time.Duration
	// MisfireGrace is how late a cron instant may fire and still count as on time; an
	// instant later than that was missed and its job's misfire policy applies. Default
	// DefaultMisfireGrace.
	MisfireGrace time.Duration
	// BestFitHold is how long a run with requirements, once due, is kept for the live
	// worker it fits best (least room left) when another worker that fits it asks first;
	// after that any worker that fits takes it. Default DefaultBestFitHold; negative: no
	// hold, the first worker that fits takes it.
	BestFitHold time.Duration
	// ServerID names this server in the cluster (its row in servers, the leader lease's
	// holder). Default: hostname-pid.
	ServerID string
	// AdvertiseAddr is where clients and workers reach this server, shown in the cluster.
	AdvertiseAddr string
	// LeaderTTL is the leader lease's length: a dead leader is replaced within about 1.25
	// of it. Default service.DefaultLeaderTTL (1 s).
	LeaderTTL time.Duration
	// Notifier carries wake-ups to and from the other servers on the same store; nil keeps
	// them inside this process (one server, or SQLite).
	Notifier Notifier
	// Stepped runs no loop besides the group committers: Start starts no service (nor the
	// elector), and the caller runs the services' rounds with Step, on its own goroutine, at
	// the instants it moves its clock to. With one caller at a time, every store call then
	// happens in an order the caller decides: internal/sim drives an engine so, which makes
	// a simulation depend on its seed alone.
	Stepped bool
	// NewID makes the ids of what the engine creates itself: cron runs, pipelines, their
	// step jobs and runs. Default id.New; a simulation passes one drawn from its seed,
	// since ids order runs of equal priority and due time.
	NewID func(time.Time) string
	// MaxLogBytes caps the output stored per attempt (store.AppendLogsParams.MaxAttemptBytes);
	// 0: no cap.
	MaxLogBytes int64
	// Observer is told of the runs this server ends, retries and leases. Default: none.
	Observer Observer
	// Retention is how long history is kept; while this server leads it deletes what is
	// past it (service.Retention). The zero policy keeps everything.
	Retention RetentionPolicy
	// RetentionBatch and RetentionPause pace those deletes: rows per transaction, and the
	// pause between two batches. Defaults service.DefaultRetentionBatch and
	// service.DefaultRetentionPause.
	RetentionBatch int
	RetentionPause time.Duration
	// RetentionInterval is how often it looks again once nothing is past retention.
	// Default service.DefaultRetentionInterval.
	RetentionInterval time.Duration
	// Alerts, when set, runs the alert rules on the leader (service.Alerter); nil: no
	// alerts are evaluated.
	Alerts *AlertsConfig
}

// AlertsConfig configures the leader's Alerter.
type AlertsConfig struct {
	Rules alerting.Rules
	// Interval is how often the rules are evaluated (default service.DefaultAlertInterval);
	// a run's change also wakes the Alerter, at most once per service.DefaultAlertMinGap.
	Interval time.Duration
	// Notify is handed the alerts that fired and resolved; it must not block.
	Notify func([]alerting.Alert)
}

// DefaultHeartbeatInterval is Config.HeartbeatInterval's default for a lease TTL: a third
// of it. A worker kills an attempt whose lease it could not renew a tenth of the TTL before
// the lease would expire (worker.Agent), so at this interval two heartbeats, and the
// retries of a failed one, fit in the life of a renewal before that: one heartbeat lost or
// answered late costs no attempt. A shorter interval buys more tries at the price of more
// requests: 2,000 workers at the default TTL (15 s) send 400 heartbeats a second at a
// third, 667 at a fifth (BENCHMARKS.md, "Workers at scale").
func DefaultHeartbeatInterval(leaseTTL time.Duration) time.Duration { return leaseTTL / 3 }

// RetentionPolicy and RetentionRule are service's, named here for the engine's callers.
type (
	RetentionPolicy = service.RetentionPolicy
	RetentionRule   = service.RetentionRule
)

// DefaultBestFitHold is Config.BestFitHold's default: a few of a busy worker's lease
// polls, short enough that a best fit that never asks (busy with other kinds of work)
// delays a run by no more than that.
const DefaultBestFitHold = 2 * time.Second

// Engine is the server core; see the package doc.
type Engine struct {
	cfg   Config
	store store.Store
	clock clock.Clock
	log   *slog.Logger
	obs   Observer

	submits   *committer[store.NewJob, store.CreateJobResult]
	completes *committer[store.Completion, store.CompletionResult]
	logs      *committer[model.LogChunk, error]
	beats     *committer[store.Beat, store.HeartbeatResult]
	audits    chan *model.AuditEntry // RecordAudit's queue, written by writeAudits

	// The wake-ups, shared with the other servers through Config.Notifier.
	work    *topic // a run became queued
	timers  *topic // the earliest due time or lease expiry may have moved earlier
	changes *topic // a run changed state or got log output (followers)

	schedChanged *topic      // a job's next fire may have moved earlier
	rateQueues   atomic.Bool // some queue has a rate limit (leases then watch for turns)

	cronRuns, cronMissed, cronDropped atomic.Uint64 // see CronStats

	// The services every server runs, and the elector that starts and stops the leader's
	// (see newLeaderServices) as this server gains and loses leadership.
	promoter *service.Promoter
	releaser *service.Releaser
	elector  *service.Elector

	leaderMu       sync.Mutex
	leaderServices []serviceLoop // running (or, Stepped, stepped) while this server leads
	term           int64         // the term it leads with; 0: a follower

	// Stepped (Config.Stepped): the rounds of the elector, promoter and releaser, and of the
	// leader's services of the current term (leaderSteppers, under leaderMu).
	steppers       []*service.Stepper
	leaderSteppers []*service.Stepper

	mu      sync.Mutex
	workers map[string]*workerConn

	TestSignals Signals

	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
	cancel  context.CancelFunc
}

// Signals are sent at points the engine's tests wait on; see internal/testsignal.
type Signals struct {
	Parked testsignal.Signal[string] // a worker's lease poll (its id) found nothing and waits
	// CronSlept is the Slept signal of the cron firer of each leadership term: the instant
	// the leader's firer sleeps until.
	CronSlept testsignal.Signal[time.Time]
}

// New returns an engine; call Start before use.
func New(cfg Config) *Engine {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval(cfg.LeaseTTL)
	}
	if cfg.MaxLeaseWait <= 0 {
		cfg.MaxLeaseWait = 30 * time.Second
	}
	if cfg.Committers <= 0 {
		cfg.Committers = 1
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 2000
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	switch {
	case cfg.BestFitHold == 0:
		cfg.BestFitHold = DefaultBestFitHold
	case cfg.BestFitHold < 0:
		cfg.BestFitHold = 0
	}
	if cfg.MisfireGrace <= 0 {
		cfg.MisfireGrace = DefaultMisfireGrace
	}
	if cfg.NewID == nil {
		cfg.NewID = id.New
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.ServerID == "" {
		host, _ := os.Hostname()
		cfg.ServerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	e := &Engine{
		cfg:     cfg,
		store:   cfg.Store,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		obs:     cfg.Observer,
		work:    newTopic(store.TopicWork, cfg.Notifier),
		timers:  newTopic(store.TopicTimers, cfg.Notifier),
		changes: newTopic(store.TopicChanges, cfg.Notifier),
		workers: make(map[string]*workerConn),

		schedChanged: newTopic(store.TopicSchedules, cfg.Notifier),
		stop:         make(chan struct{}),
	}
	e.submits = newCommitter(cfg.MaxBatch, e.flushSubmits)
	e.completes = newCommitter(cfg.MaxBatch, e.flushCompletions)
	e.completes.spacing, e.completes.clock = cfg.CompleteLinger, cfg.Clock
	e.logs = newCommitter(cfg.MaxBatch, e.flushLogs)
	e.beats = newCommitter(cfg.MaxBatch, e.flushHeartbeats)
	e.beats.spacing, e.beats.clock = cfg.HeartbeatLinger, cfg.Clock
	e.audits = make(chan *model.AuditEntry, auditQueue)
	e.newServices()
	if cfg.Stepped {
		e.steppers = []*service.Stepper{e.elector.Stepper(), e.promoter.Stepper(), e.releaser.Stepper()}
	}
	return e
}

// Store returns the engine's store, for reads that need no engine logic.
func (e *Engine) Store() store.Store { return e.store }

// Clock returns the engine's clock.
func (e *Engine) Clock() clock.Clock { return e.clock }

// ServerID returns this server's id in the cluster.
func (e *Engine) ServerID() string { return e.cfg.ServerID }

// Start runs the committers and the timer loops until Stop.
func (e *Engine) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.cancel = cancel
	if e.cfg.Notifier != nil {
		e.goLoop(ctx, func(ctx context.Context) { e.cfg.Notifier.Run(ctx, e.onNotify) })
	}
	for range e.cfg.Committers {
		e.goLoop(ctx, e.submits.run)
		e.goLoop(ctx, e.completes.run)
		e.goLoop(ctx, e.logs.run)
	}
	// One heartbeat committer: its flushes are short, and one gathering goroutine makes the
	// batches Committers times bigger than several would (each spaces its own flushes).
	e.goLoop(ctx, e.beats.run)
	e.goLoop(ctx, e.writeAudits)
	queues, err := e.store.ListQueues(ctx)
	if err != nil {
		cancel()
		return fmt.Errorf("start engine: %w", err)
	}
	for _, q := range queues {
		if q.RateLimit != nil {
			e.rateQueues.Store(true)
		}
	}
	if e.cfg.Stepped {
		return nil // the caller runs the services' rounds (Step)
	}
	for _, s := range []serviceLoop{e.promoter, e.releaser, e.elector} {
		if err := s.Start(ctx); err != nil {
			cancel()
			e.promoter.Stop()
			e.releaser.Stop()
			return fmt.Errorf("start engine: %w", err)
		}
	}
	return nil
}

func (e *Engine) goLoop(ctx context.Context, f func(context.Context)) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f(ctx)
	}()
}

// Stop ends the loops and waits for them; requests still queued are answered with an error.
func (e *Engine) Stop() {
	e.stopped.Do(func() {
		close(e.stop)
		e.elector.Stop() // stops the leader services and resigns the lease
		e.promoter.Stop()
		e.releaser.Stop()
		if e.cancel != nil {
			e.cancel()
		}
		e.wg.Wait()
	})
}

// Changes returns a channel closed at the next change of any run's state or logs. Followers
// take it, read, and wait on it when there is nothing new.
func (e *Engine) Changes() <-chan struct{} { return e.changes.Wait() }

// Work returns a channel closed at the next wake-up of the workers' long polls (runs became
// queued, capacity was freed, a rate-limited queue got its turn). A caller that polls Lease
// without waiting (LeaseParams.Wait zero, as internal/sim's workers do on a Stepped engine)
// parks on it as Lease's long poll would.
func (e *Engine) Work() <-chan struct{} { return e.work.Wait() }

// SubmitJobs creates jobs and their first runs, group-committed with concurrent callers.
func (e *Engine) SubmitJobs(ctx context.Context, jobs []store.NewJob) ([]store.CreateJobResult, error) {
	res, err := e.submits.do(ctx, e.stop, jobs)
	if err != nil {
		return nil, fmt.Errorf("submit jobs: %w", err)
	}
	return res, nil
}

func (e *Engine) flushSubmits(ctx context.Context, jobs []store.NewJob) ([]store.CreateJobResult, error) {
	res, err := e.store.CreateJobs(ctx, &store.CreateJobsParams{Jobs: jobs, Now: e.clock.Now()})
	if err != nil {
		return nil, err
	}
	var runs, replaced []*model.Run
	for _, r := range res {
		if r.Err == nil && !r.Existing && r.Job.NextFireAt != nil {
			e.schedChanged.Notify()
		}
		if r.Err == nil && !r.Existing && r.Run != nil {
			runs = append(runs, r.Run)
			replaced = append(replaced, r.Replaced...)
		}
	}
	e.wakeFor(runs)
	e.pushCancels(replaced)
	e.obs.Ended(runs)
	return res, nil
}

// wakeFor wakes workers when some runs are queued and the promoter when some are scheduled.
func (e *Engine) wakeFor(runs []*model.Run) {
	var queued, scheduled bool
	for _, r := range runs {
		switch r.Status {
		case model.RunQueued:
			queued = true
		case model.RunScheduled:
			scheduled = true
		case model.RunWaiting:
			scheduled = scheduled || r.PendingCode == model.PendingRateLimited
		}
	}
	if queued {
		e.work.Notify()
	}
	if scheduled {
		e.timers.Notify()
	}
	if len(runs) > 0 {
		e.changes.Notify()
	}
}

// Trigger creates runs of existing jobs (manual, event, cron).
func (e *Engine) Trigger(ctx context.Context, runs []*model.Run) ([]store.CreateRunResult, error) {
	res, err := e.store.CreateRuns(ctx, &store.CreateRunsParams{Runs: runs, Now: e.clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("trigger: %w", err)
	}
	var created, replaced []*model.Run
	for _, r := range res {
		if r.Err == nil && !r.Existing {
			created = append(created, r.Run)
			replaced = append(replaced, r.Replaced...)
		}
	}
	e.wakeFor(created)
	e.pushCancels(replaced)
	e.obs.Ended(created)
	return res, nil
}

// UpdateJob stores a job's new spec and enabled flag.
func (e *Engine) UpdateJob(ctx context.Context, p *store.UpdateJobParams) (*model.Job, error) {
	p.Now = e.clock.Now()
	job, err := e.store.UpdateJob(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("update job: %w", err)
	}
	e.timers.Notify()
	e.schedChanged.Notify()
	return job, nil
}

// DeleteJob deletes a job and cancels its active runs, stopping running ones.
func (e *Engine) DeleteJob(ctx context.Context, jobID string) ([]*model.Run, error) {
	runs, err := e.store.DeleteJob(ctx, &store.DeleteJobParams{ID: jobID, Now: e.clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("delete job: %w", err)
	}
	e.pushCancels(runs)
	e.wakeFor(runs) // runs held behind the cancelled ones may have been admitted
	return runs, nil
}

// DeletePipeline deletes a pipeline and the jobs of its steps, cancelling their active runs
// (running ones are stopped by their workers); the runs stay, as history. A pipeline or a
// step job already gone is no error. It returns the runs it cancelled. The cron firer is not
// woken: a deletion only moves the earliest fire later, and the loop finds nothing due then.
func (e *Engine) DeletePipeline(ctx context.Context, pl *model.Pipeline) ([]*model.Run, error) {
	if err := e.store.DeletePipeline(ctx, &store.DeletePipelineParams{ID: pl.ID}); err != nil && !errors.Is(err, model.ErrNotFound) {
		return nil, fmt.Errorf("delete pipeline %s: %w", pl.Name, err)
	}
	var cancelled []*model.Run
	for _, s := range pl.Spec.Steps {
		runs, err := e.DeleteJob(ctx, s.JobID)
		if err != nil && !errors.Is(err, model.ErrNotFound) {
			return cancelled, fmt.Errorf("delete pipeline %s: step %q: %w", pl.Name, s.Name, err)
		}
		cancelled = append(cancelled, runs...)
	}
	return cancelled, nil
}

// RotateWebhookSecret gives a job or a pipeline (ownerID names either) a new webhook secret,
// replacing any earlier one, and returns it; model.ErrNotFound when neither exists. seal,
// when set, turns the secret into what the store keeps (the API encrypts it). It wakes
// nothing: a secret only checks webhook calls.
func (e *Engine) RotateWebhookSecret(ctx context.Context, ownerID string, seal func(string) (string, error)) (string, error) {
	secret := id.Token()
	stored := secret
	if seal != nil {
		var err error
		if stored, err = seal(secret); err != nil {
			return "", fmt.Errorf("rotate webhook secret of %s: %w", ownerID, err)
		}
	}
	err := e.store.SetWebhookSecret(ctx, &store.SetWebhookSecretParams{JobID: ownerID, Secret: stored, Now: e.clock.Now()})
	if err != nil {
		return "", fmt.Errorf("rotate webhook secret of %s: %w", ownerID, err)
	}
	return secret, nil
}

// CancelRuns cancels runs (by id, or every active run of a job); running ones are stopped by
// their worker and end cancelled.
func (e *Engine) CancelRuns(ctx context.Context, p *store.CancelRunsParams) ([]*model.Run, error) {
	p.Now = e.clock.Now()
	if p.Reason == "" {
		p.Reason = scheduler.CancelledByRequest
	}
	runs, err := e.store.CancelRuns(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("cancel runs: %w", err)
	}
	e.pushCancels(runs)
	e.wakeFor(runs) // runs held behind the cancelled ones may have been admitted
	return runs, nil
}

// pushLost tells the workers of attempts the rescuer ended as lost, through their
// outstanding long poll, to kill them: a worker that is still polling but whose heartbeats
// did not arrive for a whole lease TTL would otherwise learn it at its next heartbeat.
// A worker attached to another server is told through that server.
func (e *Engine) pushLost(runs []*model.Run) {
	var remote []store.WorkerRun
	e.mu.Lock()
	for _, r := range runs {
		for _, a := range r.Attempts {
			if a.Status != model.AttemptLost {
				continue
			}
			if w := e.workers[a.WorkerID]; w != nil {
				w.lost = append(w.lost, r.ID)
				w.events.Notify()
			} else {
				remote = append(remote, store.WorkerRun{WorkerID: a.WorkerID, RunID: r.ID})
			}
		}
	}
	e.mu.Unlock()
	e.publishRuns(store.TopicLost, remote)
}

// pushCancels tells the workers of running runs that were asked to cancel, through their
// outstanding long poll; a worker attached to another server is told through that server
// (and learns it at its next heartbeat in any case). Every cancellation passes here, so it
// also tells the Observer of the runs it ended (and of those it admitted or skipped).
func (e *Engine) pushCancels(runs []*model.Run) {
	e.obs.Ended(runs)
	var remote []store.WorkerRun
	e.mu.Lock()
	for _, r := range runs {
		if r.Status == model.RunRunning && r.CancelRequested {
			if w := e.workers[r.WorkerID]; w != nil {
				w.cancel = append(w.cancel, r.ID)
				w.events.Notify()
			} else {
				remote = append(remote, store.WorkerRun{WorkerID: r.WorkerID, RunID: r.ID})
			}
		}
	}
	e.mu.Unlock()
	e.publishRuns(store.TopicCancel, remote)
	if len(runs) > 0 {
		e.changes.Notify()
	}
}

// RetryRun reopens a failed or cancelled run.
func (e *Engine) RetryRun(ctx context.Context, runID string) (*model.Run, error) {
	run, err := e.store.RetryRun(ctx, &store.RetryRunParams{ID: runID, Now: e.clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("retry run: %w", err)
	}
	e.wakeFor([]*model.Run{run})
	return run, nil
}

// UpdateQueue changes a queue; resuming one or raising its limit wakes workers.
func (e *Engine) UpdateQueue(ctx context.Context, p *store.UpdateQueueParams) (*model.Queue, error) {
	p.Now = e.clock.Now()
	// Wake the workers as soon as the change is committed: counting the depth of a queue
	// that holds 100,000 runs takes tens of milliseconds.
	p.Committed = e.work.Notify
	q, err := e.store.UpdateQueue(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("update queue: %w", err)
	}
	if q.RateLimit != nil {
		e.rateQueues.Store(true)
		e.timers.Notify()
	}
	e.work.Notify()
	return q, nil
}

// Workers lists workers, marking lost those silent for longer than the lease TTL (a worker
// that left stays drained).
func (e *Engine) Workers(ctx context.Context) ([]*model.Worker, error) {
	ws, err := e.store.ListWorkers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	now := e.clock.Now()
	for _, w := range ws {
		e.markLost(w, now)
	}
	return ws, nil
}

// Worker returns one worker, marked lost when silent for longer than the lease TTL.
func (e *Engine) Worker(ctx context.Context, workerID string) (*model.Worker, error) {
	w, err := e.store.GetWorker(ctx, &store.GetWorkerParams{ID: workerID})
	if err != nil {
		return nil, fmt.Errorf("get worker: %w", err)
	}
	e.markLost(w, e.clock.Now())
	return w, nil
}

func (e *Engine) markLost(w *model.Worker, now time.Time) {
	if w.State != model.WorkerDrained && now.Sub(w.LastHeartbeat) > e.cfg.LeaseTTL {
		w.State = model.WorkerLost
	}
}

// DrainWorker asks a worker to stop taking work and exit once its running attempts end.
func (e *Engine) DrainWorker(ctx context.Context, workerID string) error {
	if err := e.store.SetWorkerState(ctx, &store.SetWorkerStateParams{ID: workerID, State: model.WorkerDraining}); err != nil {
		return fmt.Errorf("drain worker: %w", err)
	}
	e.mu.Lock()
	if w := e.workers[workerID]; w != nil {
		w.drain = true
		w.events.Notify()
	}
	e.mu.Unlock()
	return nil
}

// ListQueues lists queues with their depth by status.
func (e *Engine) ListQueues(ctx context.Context) ([]*model.Queue, error) {
	qs, err := e.store.ListQueues(ctx)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return qs, nil
}

// OldestQueued returns the earliest ScheduledFor of each queue's queued runs (see
// store.Store.OldestQueued).
func (e *Engine) OldestQueued(ctx context.Context) (map[string]time.Time, error) {
	oldest, err := e.store.OldestQueued(ctx)
	if err != nil {
		return nil, fmt.Errorf("oldest queued: %w", err)
	}
	return oldest, nil
}
