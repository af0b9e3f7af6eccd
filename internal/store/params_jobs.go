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

// GetJobParams find one job: by id, or by name within Namespace.
type GetJobParams struct {
	Namespace string
	IDOrName  string
}

// ListJobsParams filter and page ListJobs.
type ListJobsParams struct {
	Namespace string // empty: all namespaces
	// Namespaces, when not empty, keeps only jobs of these namespaces (an API token's
	// scope), on top of Namespace.
	Namespaces []string
	Queue      string
	Enabled    *bool
	Limit      int
	Cursor     string // name of the last job of the previous page
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
	// Namespaces, when not empty, keeps only runs of these namespaces (an API token's
	// scope).
	Namespaces []string
	Limit      int
	Cursor     string // id of the last run of the previous page
}

// LastRunsParams name the jobs whose newest runs LastRuns returns.
type LastRunsParams struct {
	JobIDs []string
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
