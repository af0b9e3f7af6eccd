package store

import (
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// NewJob is one entry of CreateJobs: a job and, optionally, its first run. The caller fills
// every field, ids and times included (Run.JobID, JobName, Namespace equal the job's).
type NewJob struct {
	Job *model.Job
	Run *model.Run // nil: no run (a cron job, or a disabled one)
}

// CreateJobsParams are the arguments of CreateJobs.
type CreateJobsParams struct {
	Jobs []NewJob
	Now  time.Time
}

// CreateJobResult is the outcome of one NewJob.
type CreateJobResult struct {
	Job *model.Job
	Run *model.Run
	// Existing: the idempotency key matched an earlier job; Job and Run are that job's.
	Existing bool
	// Conflict: Existing, but the earlier request hash differs from this one.
	Conflict bool
	// Err is this entry's own failure (model.ErrConflict for a duplicate name); the other
	// entries are unaffected.
	Err error
	// Replaced lists the runs that concurrency policy replace cancelled for Run.
	Replaced []*model.Run
}

// CreateGraphParams are the arguments of CreateGraph: new jobs with their first runs, and
// runs of existing jobs, any of whose runs may have DependsOn.
type CreateGraphParams struct {
	Jobs []NewJob
	Runs []*model.Run
	// PipelineRun, when set, is written with the runs, which are its steps: Steps[i] names
	// the step of Runs[i]. For a cron fire (Trigger cron), FireNext is where the
	// pipeline's next fire moves (the zero time: nowhere): the fire happens only if the
	// pipeline's NextFireAt is still PipelineRun.ScheduledFor (else ErrStale), and a
	// pipeline fires once per instant.
	PipelineRun *model.PipelineRun
	Steps       []string
	FireNext    *time.Time
	Now         time.Time
}

// PutPipelineParams are the arguments of PutPipeline.
type PutPipelineParams struct {
	Pipeline *model.Pipeline
	Now      time.Time
}

// GetPipelineParams find one pipeline: by id, or by name within Namespace.
type GetPipelineParams struct {
	Namespace string
	IDOrName  string
}

// ListPipelinesParams select the pipelines to list.
type ListPipelinesParams struct {
	Namespace string // empty: all namespaces
}

// DeletePipelineParams name the pipeline to delete.
type DeletePipelineParams struct {
	ID string
}

// GetPipelineRunParams name the pipeline run to read.
type GetPipelineRunParams struct {
	ID string
}

// SetPipelineNextFireParams move a pipeline's next fire by compare and set.
type SetPipelineNextFireParams struct {
	ID string
	// Expect is the pipeline's NextFireAt as the caller read it; the move applies only if
	// the pipeline still has it (and is enabled).
	Expect time.Time
	// Next becomes the pipeline's NextFireAt; nil when the schedule has no further instant.
	Next *time.Time
}

// DuePipelinesParams select the pipelines whose next fire is due.
type DuePipelinesParams struct {
	Now   time.Time
	Limit int // <= 0: 100
}

// ResolvePendingParams are the arguments of ResolvePending.
type ResolvePendingParams struct {
	Now time.Time
}

// ListPipelineRunsParams page a pipeline's runs, newest first.
type ListPipelineRunsParams struct {
	PipelineID string
	Limit      int    // <= 0: 20
	Cursor     string // the id of the last pipeline run of the previous page
}

// PipelineRunPage is one page of pipeline runs, each with its steps' runs.
type PipelineRunPage struct {
	Runs       []*model.PipelineRun
	NextCursor string
}

// Graph is what CreateGraph created: the jobs, and the runs (the jobs' first runs, then
// the runs of existing jobs), in the order given, as stored.
type Graph struct {
	Jobs []*model.Job
	Runs []*model.Run
}

// GetJobParams find one job: by id, or by name within Namespace.
type GetJobParams struct {
	Namespace string
	IDOrName  string
}

// ListJobsParams filter and page ListJobs.
type ListJobsParams struct {
	Namespace string // empty: all namespaces
	Queue     string
	Enabled   *bool
	Limit     int
	Cursor    string // name of the last job of the previous page
}

// JobPage is one page of jobs.
type JobPage struct {
	Jobs       []*model.Job
	NextCursor string // empty on the last page
}

// UpdateJobParams replace a job's mutable parts.
type UpdateJobParams struct {
	ID         string
	Spec       model.JobSpec
	Enabled    bool
	NextFireAt *time.Time
	// Reschedule: the schedule (or enabled flag) changed; see Store.UpdateJob.
	Reschedule bool
	Now        time.Time
}

// DeleteJobParams name the job to delete.
type DeleteJobParams struct {
	ID  string
	Now time.Time
}

// CreateRunsParams are the arguments of CreateRuns.
type CreateRunsParams struct {
	Runs []*model.Run
	Now  time.Time
}

// CreateRunResult is the outcome of one run of CreateRuns.
type CreateRunResult struct {
	Run      *model.Run
	Existing bool
	Err      error
	// Replaced lists the runs that concurrency policy replace cancelled to make room for
	// Run, as they are after (running ones have CancelRequested).
	Replaced []*model.Run
}

// ListRunsParams filter and page ListRuns. Empty fields do not filter.
type ListRunsParams struct {
	JobID    string
	Status   model.RunStatus
	Queue    string
	WorkerID string
	Limit    int
	Cursor   string // id of the last run of the previous page
}

// RunPage is one page of runs.
type RunPage struct {
	Runs       []*model.Run
	NextCursor string
}

// GetRunParams name the run to read.
type GetRunParams struct {
	ID string
}

// CancelRunsParams name runs to cancel: RunIDs, or every active run of JobID.
type CancelRunsParams struct {
	RunIDs []string
	JobID  string
	Reason string // recorded as the run's Error
	Now    time.Time
}

// ReopenRunsParams name the runs to run again, upstream ones first.
type ReopenRunsParams struct {
	RunIDs []string
	Now    time.Time
}

// RetryRunParams name the run to reopen.
type RetryRunParams struct {
	ID  string
	Now time.Time
}

// PromoteDueParams bound one promotion pass.
type PromoteDueParams struct {
	Now   time.Time
	Limit int
}

// LeaseRunsParams describe a worker's request for work.
type LeaseRunsParams struct {
	WorkerID string
	Max      int
	LeaseTTL time.Duration
	// Handlers, when not empty, restricts leasing to handler jobs of these kinds plus, if
	// Commands is true, command and shell jobs.
	Handlers []string
	Commands bool
	Now      time.Time
	// BestFitHold, when positive, leaves a constrained run that another live worker fits
	// better to that worker while the run has been due for less than this (see
	// placement.Pack). A worker is live when it is active and its last heartbeat is not
	// before LiveSince.
	BestFitHold time.Duration
	LiveSince   time.Time
}

// Leased is LeaseRuns' answer.
type Leased struct {
	Leases []*model.Lease
	// HeldUntil, when not zero, is when the earliest run left for a better-fitting worker
	// is offered to any worker it fits: a worker that got nothing should ask again then.
	HeldUntil time.Time
}

// Completion is the end of one attempt, as its worker reports it. What becomes of the run
// is scheduler.Decide's to say (succeeded wins over CancelRequested; cancelled or
// CancelRequested ends it cancelled; a failure is retried, queued at once or scheduled
// with retry_backoff, while attempts remain and the exit code is not final, else the run
// ends failed); the store writes that outcome. A retried run keeps its Attempt count, and
// loses its lease fields (WorkerID, LeaseToken, LeaseExpiresAt), as does every run that
// leaves running. A status that is not a valid AttemptStatus is recorded as failed
// (scheduler.RecordedStatus).
type Completion struct {
	RunID    string
	Token    string
	Status   model.AttemptStatus
	ExitCode *int
	Error    string
}

// CompleteAttemptsParams are the arguments of CompleteAttempts.
type CompleteAttemptsParams struct {
	Completions []Completion
	Now         time.Time
	// Rand returns uniform numbers in [0, 1) that spread retry backoffs by their policy's
	// jitter; it is drawn once for each attempt whose outcome the retry rules decide (those
	// not succeeded or cancelled). nil means 0.5 (no spread).
	Rand func() float64
}

// CompletionResult is the outcome of one Completion.
type CompletionResult struct {
	Run *model.Run // the run after the change; nil when Err is set
	Err error      // model.ErrLeaseLost when the token was stale
	// Admitted lists the runs this end changed in turn: held runs that took the concurrency
	// slot it freed, and dependants it released or skipped.
	Admitted []*model.Run
}

// LeaseRef names a lease a worker holds.
type LeaseRef struct {
	RunID string
	Token string
}

// HeartbeatParams are the arguments of Heartbeat.
type HeartbeatParams struct {
	WorkerID string
	Held     []LeaseRef
	LeaseTTL time.Duration
	Now      time.Time
}

// HeartbeatResult tells a worker what to stop.
type HeartbeatResult struct {
	Lost   []string // run ids whose lease is no longer the worker's: kill them
	Cancel []string // run ids asked to cancel: stop them and complete as cancelled
}

// RescueExpiredParams bound one rescue pass.
type RescueExpiredParams struct {
	Now   time.Time
	Limit int
	// Rand: as CompleteAttemptsParams.Rand.
	Rand func() float64
}

// ReadLogsParams select log chunks.
type ReadLogsParams struct {
	RunID    string
	Attempt  int
	AfterSeq int64
	Limit    int
}

// AppendLogsParams are the arguments of AppendLogs.
type AppendLogsParams struct {
	Chunks []model.LogChunk
}

// GetQueueParams name the queue to read.
type GetQueueParams struct {
	Name string
}

// UpdateQueueParams change a queue; nil fields are left as they are.
type UpdateQueueParams struct {
	Name           string
	Priority       *int
	MaxConcurrency *int
	Paused         *bool
	// RateLimit sets the queue's rate limit; one with Rate 0 removes it.
	RateLimit *model.RateLimit
	Now       time.Time
	// Committed, when set, is called once the change is committed, before the queue's
	// depth is counted for the answer (a count of its active runs: tens of milliseconds for
	// 100,000): the engine wakes workers there.
	Committed func()
}

// RegisterWorkerParams describe a worker at start.
type RegisterWorkerParams struct {
	ID       string
	Session  string
	Labels   map[string]string
	Capacity model.Capacity
	Now      time.Time
	// Rand: as CompleteAttemptsParams.Rand, for the attempts a new session loses.
	Rand func() float64
}

// GetWorkerParams name the worker to read.
type GetWorkerParams struct {
	ID string
}

// SetWorkerStateParams set a worker's state.
type SetWorkerStateParams struct {
	ID    string
	State model.WorkerState
}

// DueJobsParams select the jobs whose next cron fire is due.
type DueJobsParams struct {
	Now   time.Time
	Limit int
}

// NextFireParams bound NextFire's search.
type NextFireParams struct {
	// After: only fires later than this count (zero: any). It is a bound, not the
	// current time: the cron loop passes the end of its lead.
	After time.Time
}

// Fire is one due job's cron fire: the runs it creates and where its schedule goes next.
type Fire struct {
	JobID string
	// Expect is the job's NextFireAt as the caller read it. The fire applies only if the
	// job still has it (and is enabled): otherwise another server fired it, or the schedule
	// changed, and the fire is stale.
	Expect time.Time
	// Next becomes the job's NextFireAt; nil when the schedule has no further instant.
	Next *time.Time
	// Runs are the cron runs to create (Trigger cron, ScheduledFor the instant each fires
	// for). A run whose (JobID, ScheduledFor) exists already is not created again.
	Runs []*model.Run
}

// FireJobsParams are the arguments of FireJobs.
type FireJobsParams struct {
	Fires []Fire
	Now   time.Time
}

// FireResult is the outcome of one Fire.
type FireResult struct {
	// Stale: the job's NextFireAt was no longer Expect, or it was disabled or deleted;
	// nothing was written.
	Stale bool
	// Runs holds one result per Fire.Runs entry (nil when Stale).
	Runs []CreateRunResult
}

// SetWebhookSecretParams set a job's webhook secret.
type SetWebhookSecretParams struct {
	JobID  string
	Secret string
	Now    time.Time
}

// FiredInstantsParams select a job's cron instants that have runs.
type FiredInstantsParams struct {
	JobID    string
	From, To time.Time
}

// WebhookSecretParams name the job or pipeline whose webhook secret to read.
type WebhookSecretParams struct {
	JobID string // a job's or a pipeline's id
}

// AdmitHeldParams are the arguments of AdmitHeld.
type AdmitHeldParams struct {
	Now time.Time
}

// ReleaseDueParams are the arguments of ReleaseDue.
type ReleaseDueParams struct {
	Now time.Time
}

// NextQueueTurnParams are the arguments of NextQueueTurn.
type NextQueueTurnParams struct {
	Now time.Time
}

// Uniform draws a number in [0, 1) from rand, the Rand of a params struct: 0.5 when rand
// is nil.
func Uniform(rand func() float64) float64 {
	if rand == nil {
		return 0.5
	}
	return rand()
}
