package apitype

import (
	"encoding/json"
	"time"
)

// PipelineSpec is the body of PUT /v1/pipelines/{name}: a named DAG of jobs with an
// optional schedule. Each entry of Steps is a job spec as POST /v1/jobs takes it (without
// name, schedule, concurrency limit, idempotency key, run_at or delay); its depends_on
// names other steps (Ref), with a condition (default succeeded). Each trigger (cron,
// manual) creates a pipeline run: one run per step and the edges between them.
type PipelineSpec struct {
	// Name is the name in the path, or empty (a file for `stint apply` names each pipeline).
	Name      string             `json:"name,omitempty"`
	Namespace string             `json:"namespace,omitempty"`
	Enabled   *bool              `json:"enabled,omitempty"` // default true
	Schedule  *Schedule          `json:"schedule,omitempty"`
	Args      json.RawMessage    `json:"args,omitempty"` // parameters every step's run gets, under a trigger's
	Steps     map[string]JobSpec `json:"steps"`
}

// Pipeline is a pipeline as the API returns it.
type Pipeline struct {
	ID        string          `json:"id"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Enabled   bool            `json:"enabled"`
	Schedule  *Schedule       `json:"schedule,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	// Steps are in an order where each comes after the steps it depends on.
	Steps         []PipelineStep `json:"steps"`
	NextFireAt    *time.Time     `json:"next_fire_at,omitempty"`
	NextFireTimes []time.Time    `json:"next_fire_times,omitempty"`
	CreatedAt     time.Time      `json:"created_at"`
	UpdatedAt     time.Time      `json:"updated_at"`
}

// PipelineStep is one step of a pipeline: the job that runs it (named pipeline.step) and
// the steps it waits for.
type PipelineStep struct {
	Name      string       `json:"name"`
	JobID     string       `json:"job_id"`
	JobName   string       `json:"job_name"`
	DependsOn []Dependency `json:"depends_on,omitempty"` // Ref and Condition set
}

// PipelineList is the answer of GET /v1/pipelines.
type PipelineList struct {
	Items []*Pipeline `json:"items"`
}

// PipelineTrigger is the body of POST /v1/pipelines/{name}/trigger (optional).
type PipelineTrigger struct {
	Args json.RawMessage `json:"args,omitempty"`
}

// PipelineRun is one run of a pipeline as a whole: its state and each step's run.
type PipelineRun struct {
	ID           string `json:"id"`
	PipelineID   string `json:"pipeline_id"`
	PipelineName string `json:"pipeline_name"`
	Namespace    string `json:"namespace"`
	// Status is running while a step has not ended; then failed if a step failed,
	// cancelled if one was cancelled, else succeeded.
	Status       string          `json:"status"`
	Trigger      string          `json:"trigger"`
	ScheduledFor time.Time       `json:"scheduled_for"`
	Args         json.RawMessage `json:"args,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	Steps        map[string]*Run `json:"steps"`
}

// PipelineRunList is a page of a pipeline's runs, newest first.
type PipelineRunList struct {
	Items      []*PipelineRun `json:"items"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// PipelineRetry is the body of POST /v1/pipelines/{name}/runs/{id}/retry (optional): From
// names the step to run again with everything downstream of it; without it, every step
// that failed or was cancelled runs again, with what is downstream of it.
type PipelineRetry struct {
	From string `json:"from,omitempty"`
}
