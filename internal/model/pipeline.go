package model

import (
	"encoding/json"
	"time"
)

// Pipeline is a named DAG of jobs with an optional schedule: each trigger (cron, manual,
// webhook) creates a PipelineRun, one run per step and the edges between them.
type Pipeline struct {
	ID        string
	Namespace string
	Name      string
	Spec      PipelineSpec
	Enabled   bool
	// NextFireAt is the next cron instant (nil without a schedule, or when disabled).
	NextFireAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// PipelineSpec is what a pipeline runs. The store keeps it as one JSON document: add fields
// freely, never rename one.
type PipelineSpec struct {
	Schedule *Schedule `json:"schedule,omitempty"`
	// Args are the parameters every step's run gets, under those a trigger gives.
	Args json.RawMessage `json:"args,omitempty"`
	// Steps are in an order where every step comes after the steps it depends on.
	Steps []PipelineStep `json:"steps"`
}

// PipelineStep is one job of a pipeline.
type PipelineStep struct {
	Name      string           `json:"name"`
	JobID     string           `json:"job_id"` // the step's job
	DependsOn []StepDependency `json:"depends_on,omitempty"`
}

// StepDependency is an edge between two steps of a pipeline.
type StepDependency struct {
	Step      string    `json:"step"`
	Condition Condition `json:"condition"`
}

// PipelineRun is one execution of a pipeline: a run per step.
type PipelineRun struct {
	ID           string
	PipelineID   string
	PipelineName string
	Namespace    string
	Trigger      Trigger
	// ScheduledFor is the cron instant it was made for, or when it was triggered.
	ScheduledFor time.Time
	Args         json.RawMessage
	CreatedAt    time.Time
	// Steps maps step names to their runs; filled by reads.
	Steps map[string]*Run
}

// PipelineRunStatus is the state of a pipeline run as a whole.
type PipelineRunStatus string

// Pipeline run states.
const (
	PipelineRunning   PipelineRunStatus = "running"   // some step is not final
	PipelineSucceeded PipelineRunStatus = "succeeded" // every step succeeded (or was skipped by design)
	PipelineFailed    PipelineRunStatus = "failed"    // every step is final and one failed
	PipelineCancelled PipelineRunStatus = "cancelled" // every step is final, none failed, one was cancelled
)

// Status is the state of the whole, from its steps' runs (GroupStatus).
func (p *PipelineRun) Status() PipelineRunStatus { return GroupStatus(p.Steps) }

// GroupStatus is the state of runs that make a whole (a pipeline run's steps, an ad-hoc
// DAG's entries): running while any is not final; then failed if any failed, cancelled if
// any was cancelled, succeeded otherwise (a run skipped because its condition was not met,
// such as an alert on failure, does not fail the whole).
func GroupStatus(runs map[string]*Run) PipelineRunStatus {
	failed, cancelled := false, false
	for _, r := range runs {
		switch {
		case !r.Status.Final():
			return PipelineRunning
		case r.Status == RunFailed:
			failed = true
		case r.Status == RunCancelled:
			cancelled = true
		}
	}
	switch {
	case failed:
		return PipelineFailed
	case cancelled:
		return PipelineCancelled
	}
	return PipelineSucceeded
}
