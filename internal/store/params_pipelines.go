package store

import (
	"time"

	"github.com/stint-dev/stint/internal/model"
)

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
	// Term fences a cron fire (FireNext set): the leader's term, checked in the same
	// transaction against the leader lease (model.ErrNotLeader when it no longer leads;
	// nothing is written). Zero: not fenced (a caller outside leadership, such as a test).
	Term int64
	Now  time.Time
}

// Graph is what CreateGraph created: the jobs, and the runs (the jobs' first runs, then
// the runs of existing jobs), in the order given, as stored.
type Graph struct {
	Jobs []*model.Job
	Runs []*model.Run
}

// ResolvePendingParams are the arguments of ResolvePending.
type ResolvePendingParams struct {
	Now time.Time
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

// SetPipelineNextFireParams move a pipeline's next fire by compare and set.
type SetPipelineNextFireParams struct {
	ID string
	// Expect is the pipeline's NextFireAt as the caller read it; the move applies only if
	// the pipeline still has it (and is enabled).
	Expect time.Time
	// Next becomes the pipeline's NextFireAt; nil when the schedule has no further instant.
	Next *time.Time
	// Term fences the move as FireJobsParams.Term does.
	Term int64
	Now  time.Time
}

// DuePipelinesParams select the pipelines whose next fire is due.
type DuePipelinesParams struct {
	Now   time.Time
	Limit int // <= 0: 100
}
