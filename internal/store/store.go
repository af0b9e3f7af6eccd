package store

import (
	"context"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/model"
)

// Store is stint's durable state. See the package doc for the rules engines keep.
//
// Signatures follow one style: a method that takes arguments besides ctx takes exactly one
// *XxxParams named after it (GetRun takes *GetRunParams), declared by area in
// params_jobs.go (jobs and runs), params_cron.go (cron, webhooks, limits),
// params_pipelines.go (pipelines and graphs), params_dispatch.go (dispatch, logs,
// queues, workers), params_cluster.go (servers, leadership), params_tokens.go (API
// tokens) and params_retention.go (deleting history); a params field that carries the
// current time is named Now. Methods that need nothing but ctx (Ping, ListQueues,
// OldestQueued, ListWorkers, ListTokens, NextDue, NextLeaseExpiry,
// NextRelease) take ctx alone, and Close takes nothing.
type Store interface {
	// Jobs

	// CreateJobs inserts jobs, each with an optional first run, in one transaction. An entry
	// whose Job.IdempotencyKey matches an existing job of its namespace creates nothing: its
	// result carries the existing job and that job's first run with Existing set (and
	// Conflict set when the stored RequestHash differs). A duplicate name in a namespace
	// fails that entry alone with model.ErrConflict in its result's Err; the other entries
	// still commit. Queues named by new runs are created with defaults if missing.
	//
	// First runs with Concurrency set are admitted as CreateRuns admits them.
	//
	// Details: "that job's first run" is its run with the smallest id (nil when it has
	// none). Keys also match earlier entries of the same batch. An entry whose Run carries
	// an IdempotencyKey already taken fails with model.ErrConflict in its Err, and nothing
	// of it is written.
	CreateJobs(ctx context.Context, p *CreateJobsParams) ([]CreateJobResult, error)
	// GetJob finds a job by id, or by name within the namespace. An id matches in any
	// namespace and is tried first; a name is looked up in Namespace (empty: the default
	// namespace).
	GetJob(ctx context.Context, p *GetJobParams) (*model.Job, error)
	// ListJobs lists jobs by name order (ascending), paging after Cursor. Across all
	// namespaces (Namespace empty) jobs sort by name, then namespace. Cursor is opaque: pass
	// back the NextCursor of the previous page. NextCursor is empty exactly when no job
	// follows. Limit <= 0 means 100.
	ListJobs(ctx context.Context, p *ListJobsParams) (*JobPage, error)
	// UpdateJob replaces a job's spec and enabled flag (and NextFireAt), sets UpdatedAt =
	// Now and returns it. Existing runs keep their queue and priority; leases always carry
	// the spec as it is at lease time. With Reschedule, the job's cron runs created ahead of
	// their instant (never attempted, still scheduled with PendingCode not_due, ScheduledFor
	// after Now) are deleted in the same transaction: the new NextFireAt decides again.
	UpdateJob(ctx context.Context, p *UpdateJobParams) (*model.Job, error)
	// DeleteJob deletes a job and cancels its active runs (running ones get
	// CancelRequested), in one transaction; it returns the runs it cancelled (those
	// cancelled at once and those that got CancelRequested), with Error "job deleted". The
	// runs themselves stay (history): GetRun and ListRuns still find them.
	DeleteJob(ctx context.Context, p *DeleteJobParams) ([]*model.Run, error)

	// Runs

	// CreateRuns inserts runs of existing jobs (manual trigger, cron, event) in one
	// transaction. Runs with Concurrency set are admitted under their limit (see the
	// package doc's "Concurrency limits"). A run whose IdempotencyKey already exists creates nothing and returns
	// the existing run with Existing set. So does a cron run (Trigger cron) whose
	// (JobID, ScheduledFor) already exists: a cron instant fires at most once (invariant 4).
	// A run whose JobID names no job fails alone with model.ErrNotFound in its Err, one whose
	// ID is taken with model.ErrConflict. Queues named by new runs are created with defaults
	// if missing.
	CreateRuns(ctx context.Context, p *CreateRunsParams) ([]CreateRunResult, error)
	// GetRun returns a run with its Attempts filled (finished attempts in order, then the
	// running one if any).
	GetRun(ctx context.Context, p *GetRunParams) (*model.Run, error)
	// ListRuns lists runs newest first (by id descending), filtered, paging after Cursor.
	// NextCursor is empty exactly when no run follows. Limit <= 0 means 100. WorkerID
	// matches running runs only: a run's lease fields are cleared when it leaves running.
	ListRuns(ctx context.Context, p *ListRunsParams) (*RunPage, error)
	// LastRuns returns the newest run (by id) of each of the jobs JobIDs names that has
	// one, keyed by job id; jobs with no run are absent. It reads one index entry per job.
	LastRuns(ctx context.Context, p *LastRunsParams) (map[string]*model.Run, error)
	// CancelRuns cancels the given runs, or every active run of JobID. Runs that are not
	// yet running become cancelled at once (FinishedAt = Now). Running ones get
	// CancelRequested and stay running until their worker completes them, which then ends
	// them cancelled. Final runs are left alone. It returns the runs it changed, as they are
	// after the change. Reason becomes the run's Error. A running run that already has
	// CancelRequested is not changed (nor returned). A RunID that names no run fails the
	// whole call with model.ErrNotFound, changing nothing; a JobID is not checked.
	CancelRuns(ctx context.Context, p *CancelRunsParams) ([]*model.Run, error)
	// RetryRun reopens a failed or cancelled run: it becomes queued (due Now) with its
	// attempt budget extended by one, FinishedAt and Error cleared; its earlier attempts stay
	// in the history. Any other state is model.ErrInvalidState. Precisely: MaxAttempts
	// grows by one, ScheduledFor = Now, and CancelRequested and PendingCode are cleared;
	// StartedAt (the first attempt's start), Trigger and a cron run's Instant stay. A run whose job was deleted is
	// model.ErrInvalidState too: nothing could run it.
	RetryRun(ctx context.Context, p *RetryRunParams) (*model.Run, error)
	// ReopenRuns runs final runs (in any final state) again, in one transaction, given
	// upstream first: a failed pipeline step and what depends on it. Each gets a fresh
	// attempt budget (MaxAttempts = Attempt + its job's retry max_attempts), ScheduledFor =
	// Now, FinishedAt and Error cleared, and starts as a new run with its dependencies
	// would (PrepareDependencies over its upstream runs' states now; a run reopened before
	// it in the call is unmet): waiting, queued, or skipped again. A run that is not final,
	// or whose job was deleted, is model.ErrInvalidState, an unknown id model.ErrNotFound,
	// and then nothing changes.
	ReopenRuns(ctx context.Context, p *ReopenRunsParams) ([]*model.Run, error)

	// Cron

	// NextFire returns the earliest NextFireAt after After (zero: any) among enabled jobs
	// and pipelines; ok is false when none has one.
	NextFire(ctx context.Context, p *NextFireParams) (t time.Time, ok bool, err error)
	// DueJobs returns the enabled jobs whose NextFireAt <= Now, earliest first, at most
	// Limit (<= 0: 100).
	DueJobs(ctx context.Context, p *DueJobsParams) ([]*model.Job, error)
	// FireJobs records cron fires, all in one transaction. A fire applies only when its job
	// is enabled and its NextFireAt still equals Expect (compare and set); it then sets
	// NextFireAt = Next and creates the fire's runs as CreateRuns would (a cron instant that
	// has its run already is answered with that run, Existing set: invariant 4). A fire that
	// does not apply is Stale and writes nothing. With Term, the call is refused whole
	// (model.ErrNotLeader) unless the leader lease still has that term and is live.
	FireJobs(ctx context.Context, p *FireJobsParams) ([]FireResult, error)

	// AdmitHeld admits the held runs (PendingCode concurrency_limit) of every key that has
	// a free slot and returns them as they are after. The engine calls it at start, to
	// repair an admission that a crash interrupted.
	AdmitHeld(ctx context.Context, p *AdmitHeldParams) ([]*model.Run, error)
	// ReleaseDue admits the held runs whose turn under a rate limit has come (and those held
	// behind them that now fit), returning them as they are after.
	ReleaseDue(ctx context.Context, p *ReleaseDueParams) ([]*model.Run, error)
	// NextRelease returns the earliest turn a run held by a rate limit waits for.
	NextRelease(ctx context.Context) (t time.Time, ok bool, err error)
	// NextQueueTurn returns the earliest instant after After at which a rate-limited queue
	// that has queued runs, or scheduled runs due at Now, gets its next turn (LeaseRuns takes
	// no more runs of such a queue than its limit allows at the time of the lease). The
	// instant is at or before Now when that turn came since After and is still untaken.
	NextQueueTurn(ctx context.Context, p *NextQueueTurnParams) (t time.Time, ok bool, err error)

	// FiredInstants returns the Instant of a job's cron runs in [From, To], ascending: the
	// instants fired, whatever retries did to the runs' ScheduledFor.
	FiredInstants(ctx context.Context, p *FiredInstantsParams) ([]time.Time, error)
	// SetWebhookSecret creates or replaces the webhook secret of a job or a pipeline (JobID
	// names either; model.ErrNotFound when neither exists). DeleteJob and DeletePipeline
	// delete it with the job or pipeline.
	SetWebhookSecret(ctx context.Context, p *SetWebhookSecretParams) error
	// WebhookSecret returns the webhook secret of a job or a pipeline (JobID names either);
	// model.ErrNotFound when it has none.
	WebhookSecret(ctx context.Context, p *WebhookSecretParams) (string, error)

	// Dispatch

	// PromoteDue moves scheduled runs whose ScheduledFor <= Now to queued, at most Limit,
	// and returns how many it moved, earliest first. It clears PendingCode and
	// PendingReason and keeps ScheduledFor. Limit <= 0 means no limit.
	PromoteDue(ctx context.Context, p *PromoteDueParams) (int, error)
	// NextDue returns the earliest ScheduledFor after After among scheduled runs (the zero
	// After: of them all); ok is false when there is none.
	NextDue(ctx context.Context, after time.Time) (t time.Time, ok bool, err error)

	// Pipelines

	// PutPipeline creates the pipeline, or replaces the spec, enabled flag and next fire of
	// the one with its namespace and name, keeping that one's id and creation time. It
	// returns the pipeline as stored and whether it was created.
	PutPipeline(ctx context.Context, p *PutPipelineParams) (*model.Pipeline, bool, error)
	// GetPipeline finds a pipeline by id, then by name within Namespace.
	GetPipeline(ctx context.Context, p *GetPipelineParams) (*model.Pipeline, error)
	// ListPipelines lists the pipelines of Namespace (all when empty) by name.
	ListPipelines(ctx context.Context, p *ListPipelinesParams) ([]*model.Pipeline, error)
	// DeletePipeline deletes a pipeline; its runs stay, as history.
	DeletePipeline(ctx context.Context, p *DeletePipelineParams) error
	// GetPipelineRun returns a pipeline run with its steps' runs.
	GetPipelineRun(ctx context.Context, p *GetPipelineRunParams) (*model.PipelineRun, error)
	// ListPipelineRuns pages a pipeline's runs, newest first, with their steps' runs.
	ListPipelineRuns(ctx context.Context, p *ListPipelineRunsParams) (*PipelineRunPage, error)
	// SetPipelineNextFire moves an enabled pipeline's next fire to Next (nil: none) if it is
	// still Expect (compare and set), and reports whether it was; with Term, fenced as
	// FireJobs is.
	SetPipelineNextFire(ctx context.Context, p *SetPipelineNextFireParams) (bool, error)
	// DuePipelines returns enabled pipelines whose NextFireAt is at or before Now, earliest
	// first, at most Limit (<= 0: 100).
	DuePipelines(ctx context.Context, p *DuePipelinesParams) ([]*model.Pipeline, error)

	// ResolvePending resolves the dependants of runs whose end was recorded but whose
	// dependants were not resolved with it (a store that resolves them in a transaction of
	// their own, after a crash or an error in between); servers call it at start and in
	// their rescue loop. It returns the runs it changed.
	ResolvePending(ctx context.Context, p *ResolvePendingParams) ([]*model.Run, error)
	// CreateGraph creates jobs with their first runs and runs of existing jobs, with the
	// dependencies between them, in one transaction: all or nothing. Runs are created in the
	// order given (the jobs' runs first, then Runs), so a run may depend on any run created
	// before it or already stored; a run with DependsOn starts as PrepareDependencies says.
	// Any entry that cannot be created (a name, id or idempotency key taken, a job or an
	// upstream run missing) fails the whole with an error naming it (model.ErrConflict,
	// model.ErrNotFound), and nothing is written. Runs with dependencies may have no
	// concurrency limit.
	CreateGraph(ctx context.Context, p *CreateGraphParams) (*Graph, error)
	// LeaseRuns hands up to Max queued runs to a worker. It takes queues in order of queue
	// priority (highest first), skipping paused queues, queues at their MaxConcurrency and
	// rate-limited queues with no turn left at Now (a lease takes a turn per run), and within a queue runs by run priority (highest first), then
	// ScheduledFor, then id. Each leased run becomes running with Attempt+1, WorkerID, a new
	// random LeaseToken, LeaseExpiresAt = Now+LeaseTTL, StartedAt set if it was nil, and
	// PendingCode cleared. Two concurrent callers never lease the same run.
	//
	// Details: queues of equal priority go by name. Max <= 0 leases nothing. Handlers and
	// Commands filter by the job's kind: with Handlers empty, Commands true means command
	// and shell jobs only and Commands false means no filter at all. Only queued runs are
	// leased (scheduled ones wait for PromoteDue).
	//
	// Placement: a run is leased only when the worker has its requirement labels and the
	// worker's free capacity (declared, less the Requirements of its running runs) still
	// fits it after the runs taken before it in the same call; a run that does not fit is
	// skipped, not waited for. An unregistered worker has no capacity and no labels. With
	// BestFitHold, a young constrained run that another live worker fits better is left
	// for it (see placement.Pack and Leased.HeldUntil).
	LeaseRuns(ctx context.Context, p *LeaseRunsParams) (*Leased, error)
	// CompleteAttempts records the ends of attempts, all in one transaction. A completion
	// whose run is not running with that LeaseToken is refused: its result has
	// Err = model.ErrLeaseLost and nothing of it is written. An accepted one writes the
	// attempt to the history and moves the run (see Completion for the rules). A
	// completion of a run that does not exist is refused the same way, and so is a second
	// completion of one run in the same batch (the first spent the lease).
	CompleteAttempts(ctx context.Context, p *CompleteAttemptsParams) ([]CompletionResult, error)
	// Heartbeat records heartbeats of workers, all in one transaction, and returns one
	// result per Beat, in order. Each beat records that its worker is alive and extends the
	// lease of every run it holds (LeaseExpiresAt = Now+LeaseTTL). Of the leases the worker
	// says it holds, its result names those no longer valid (Lost: kill them) and those
	// whose run was asked to cancel. Precisely: only the Held leases that are still valid
	// (run running, same token, same worker) are extended; a lease the store has for the
	// worker but the worker does not list is left to expire and be rescued. It sets
	// LastHeartbeat = Now and leaves State alone. An unknown worker, or one whose session
	// is not the beat's Session (when set), gets Err = model.ErrNotFound and changes
	// nothing; the other beats are recorded. Beats of one worker may repeat in a batch.
	//
	// A held lease that is not valid is Ended, not Lost, when the latest attempt of its run
	// by this worker is recorded with a status other than lost: the worker's completion
	// was accepted (a heartbeat sent before its answer arrived). Draining reports State.
	Heartbeat(ctx context.Context, p *HeartbeatParams) ([]HeartbeatResult, error)
	// RescueExpired ends every attempt whose lease expired before Now (at most Limit) as
	// lost, applying the retry rules of Completion, and returns the runs as they are after,
	// each with Attempts holding the attempt that ended (its worker, to tell it), followed by
	// held runs admitted into the concurrency slots they freed (without Attempts). A lease
	// expiring exactly at Now is still valid. Limit <= 0 means no limit.
	RescueExpired(ctx context.Context, p *RescueExpiredParams) ([]*model.Run, error)
	// NextLeaseExpiry returns the earliest LeaseExpiresAt among running runs.
	NextLeaseExpiry(ctx context.Context) (t time.Time, ok bool, err error)

	// Logs

	// AppendLogs stores log chunks (one transaction for the batch) and returns an error per
	// chunk, in order. Only the writer of the attempt may append: a chunk is stored only
	// while its run is running with Attempt under the lease Token (and leased to WorkerID,
	// when set); another chunk is refused alone with model.ErrLeaseLost (model.ErrNotFound
	// for a run that does not exist) and the others are stored. A chunk whose (RunID,
	// Attempt, Seq) is already stored is ignored (a worker may resend), so the first write
	// stands. With MaxAttemptBytes, a stored chunk that would take its attempt past the cap
	// is dropped instead, and so are the attempt's later chunks of the batch: they are not
	// refused (their error is nil), so the writer does not send them again.
	AppendLogs(ctx context.Context, p *AppendLogsParams) ([]error, error)
	// ReadLogs returns chunks of one attempt with Seq > AfterSeq, in Seq order, at most Limit
	// (Limit <= 0: no limit). An unknown run is model.ErrNotFound.
	ReadLogs(ctx context.Context, p *ReadLogsParams) ([]model.LogChunk, error)

	// Queues

	// ListQueues returns every queue by name, with Depth filled. Depth counts the active
	// states only (waiting, scheduled, queued, running), each present even when zero;
	// finished runs are history and are not counted.
	ListQueues(ctx context.Context) ([]*model.Queue, error)
	// GetQueue returns one queue with Depth filled.
	GetQueue(ctx context.Context, p *GetQueueParams) (*model.Queue, error)
	// OldestQueued returns, for each queue that holds queued runs, the earliest
	// ScheduledFor among them: how long its longest waiting due run has waited is Now
	// minus that. Queues with no queued run are absent. Each queue is read through the
	// index of queued runs (a range of it, like the queued depth), never the whole table.
	OldestQueued(ctx context.Context) (map[string]time.Time, error)
	// UpdateQueue changes the fields that are set, creating the queue if it does not exist,
	// and returns it with Depth filled.
	UpdateQueue(ctx context.Context, p *UpdateQueueParams) (*model.Queue, error)

	// Workers

	// RegisterWorker creates or updates a worker (state active, LastHeartbeat = Now, its
	// labels, capacity, handlers and commands flag as given). When the worker existed with
	// another session, the attempts it held are ended as lost at once (applying the retry
	// rules), since that process is gone; those runs are returned. RegisteredAt is Now when
	// the worker is new or its session changed.
	//
	// Re-attach: when Resume is the stored session, the session stays (the returned
	// worker's Session is Resume, and a draining worker stays draining) and none of its
	// attempts ends: those it lists in Held are its own (the engine renews them as a
	// heartbeat does), and the others are left to expire as a heartbeat leaves them, since
	// a lease answer may still be on its way to the worker: ending them at once would let
	// their runs start elsewhere while it runs them. Otherwise the session becomes Session.
	//
	// A live session is kept from a caller that cannot prove it is the worker: see
	// RegisterWorkerParams.LiveSince (model.ErrConflict, nothing changed).
	RegisterWorker(ctx context.Context, p *RegisterWorkerParams) (*model.Worker, []*model.Run, error)
	// GetWorker returns one worker with Running and Used filled: Running counts its running
	// runs, Used sums their jobs' Requirements (as they were when each run was created) with
	// Slots = Running.
	GetWorker(ctx context.Context, p *GetWorkerParams) (*model.Worker, error)
	// ListWorkers returns every worker by id, with Running and Used filled.
	ListWorkers(ctx context.Context) ([]*model.Worker, error)
	// SetWorkerState sets a worker's State (draining, drained), only while its session is
	// Session when that is set; model.ErrNotFound when no worker matches.
	SetWorkerState(ctx context.Context, p *SetWorkerStateParams) error

	// Cluster

	// HeartbeatServer creates or updates a server's row (LastSeen = Now).
	HeartbeatServer(ctx context.Context, p *HeartbeatServerParams) error
	// ListServers returns the servers seen after SeenAfter, by id.
	ListServers(ctx context.Context, p *ListServersParams) ([]*model.Server, error)
	// TryLead acquires or renews the leader lease for Holder, for TTL, and returns the
	// lease as it is after: Holder leads exactly when the answer's Holder is Holder. It
	// takes the lease when it is free, expired or already Holder's; the term stays while
	// the holder stays (a renewal) and grows by one when the lease changes holder. Two
	// concurrent callers never both get it. Expiry is judged on the database's clock
	// (PostgreSQL: now(); SQLite, one process: Now).
	TryLead(ctx context.Context, p *TryLeadParams) (*model.Leadership, error)
	// ResignLead gives the lease up at once if Holder has it (a clean shutdown), so that
	// another server takes it at its next try; the next holder gets the next term.
	ResignLead(ctx context.Context, p *ResignLeadParams) error
	// Leader returns the live lease (not expired), or model.ErrNotFound when none is.
	Leader(ctx context.Context, p *LeaderParams) (*model.Leadership, error)

	// Tokens

	// CreateToken stores an API token (only its hash). A token whose ID or Hash is taken is
	// model.ErrConflict. With OnlyIfNone, a store that holds any token already creates
	// nothing and reports false.
	CreateToken(ctx context.Context, p *CreateTokenParams) (bool, error)
	// FindToken returns the token with that Hash, revoked or not; model.ErrNotFound when
	// none has it.
	FindToken(ctx context.Context, p *FindTokenParams) (*model.Token, error)
	// ListTokens returns every token, revoked ones included, by id (oldest first).
	ListTokens(ctx context.Context) ([]*model.Token, error)
	// RevokeToken sets a token's RevokedAt to Now, unless it was revoked before (the first
	// revocation stands), and returns it as it is after; model.ErrNotFound for an unknown id.
	RevokeToken(ctx context.Context, p *RevokeTokenParams) (*model.Token, error)
	// TouchToken sets LastUsedAt = Now when it is unset or before Stale. An unknown id
	// changes nothing and is no error.
	TouchToken(ctx context.Context, p *TouchTokenParams) error

	// Retention

	// PruneRuns deletes, in one transaction, at most Limit final runs that PruneRunsParams'
	// rules select, oldest finish first, with what belongs to them: attempts, log chunks,
	// slot rows (a retry of the run would take its slot again), dependency edges in either
	// direction and the pipeline-run step rows, and the pipeline run whose last step went.
	// It returns how many runs it deleted. A run that is not final is never deleted, and
	// neither is one whose end is still to be resolved (dep_outbox), one with a dependant
	// that is not final, or a step of a pipeline run with a step that is not final (or, for
	// the age rule, that finished at or after Before): a pipeline run goes whole. A cron
	// run's fired instant goes with it, so a backfill over deleted history fires it again.
	PruneRuns(ctx context.Context, p *PruneRunsParams) (int, error)
	// PruneWorkers deletes at most Limit workers (their rows: session, labels, capacity)
	// whose LastHeartbeat is before Before (lost or drained long ago, whatever State says)
	// and that hold no running run, and returns how many it deleted. A worker that comes
	// back registers anew.
	PruneWorkers(ctx context.Context, p *PruneWorkersParams) (int, error)
	// PruneRateLimits deletes at most Limit rate-limit rows whose theoretical arrival time
	// is before Before (a key with a past one admits as a key never used does) and returns
	// how many it deleted.
	PruneRateLimits(ctx context.Context, p *PruneRateLimitsParams) (int, error)

	// Alerts and audit

	// AlertFacts reads what the alert rules decide on (see alerting.Facts and
	// AlertFactsParams): the failure streaks of the jobs asked for, every enabled cron job
	// with its next fire and its CronLatest latest cron runs whose instant is at or before
	// Now, every queue with its queued runs and the due time of its oldest, every worker's
	// state, and the running runs whose attempt started at or before RunningBefore (runs
	// of deleted jobs left out).
	AlertFacts(ctx context.Context, p *AlertFactsParams) (*alerting.Facts, error)
	// ApplyAlerts writes new, resolved and updated alerts in one transaction. At most one
	// alert per (rule, subject) fires at a time: a new one for a pair that has one firing is
	// model.ErrConflict and nothing is written; a resolve or update of an alert that is not
	// firing changes nothing.
	ApplyAlerts(ctx context.Context, p *ApplyAlertsParams) error
	// ListAlerts lists alerts newest first (by id).
	ListAlerts(ctx context.Context, p *ListAlertsParams) ([]alerting.Alert, error)
	// AppendAudit adds entries to the audit log, in one transaction (an id taken is
	// model.ErrConflict, and nothing is written).
	AppendAudit(ctx context.Context, p *AppendAuditParams) error
	// ListAudit lists audit entries newest first (by id).
	ListAudit(ctx context.Context, p *ListAuditParams) ([]*model.AuditEntry, error)

	// Ping checks the store is reachable.
	Ping(ctx context.Context) error
	// Close releases the store's connections.
	Close() error
}

// WriteProber is a Store that can tell whether it takes writes now, at the cost of one
// small write that changes no data; readiness (GET /readyz) calls it at most every few
// seconds. A store that cannot take writes answers an error that wraps
// model.ErrUnavailable. Both engines implement it; it is its own interface so that a
// wrapper of Store need not.
type WriteProber interface {
	ProbeWrite(ctx context.Context) error
}

// GraphJobErr is what one new job of CreateGraph means for the whole graph, given what
// creating it returned: nil when it was created; otherwise the error that fails the graph,
// naming the job (an idempotency key already taken is a conflict there, since a graph is
// all or nothing and does not answer with an earlier job).
func GraphJobErr(nj NewJob, res CreateJobResult, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("job %q: %w", nj.Job.Name, err)
	case res.Err != nil:
		return res.Err
	case res.Existing:
		return fmt.Errorf("job %q: idempotency key %q taken: %w", nj.Job.Name, nj.Job.IdempotencyKey, model.ErrConflict)
	}
	return nil
}
