package apitype

import "time"

// DAGRequest is the body of POST /v1/dags: runs to create at once, with the dependencies
// between them, all or nothing. Each entry of Runs is a job spec as POST /v1/jobs takes
// it (the job gets that one run); the entry's name is how other entries refer to it: a
// Dependency of an entry names either another entry (Ref) or an existing run (Run).
// Entries may not have a schedule.
type DAGRequest struct {
	// Namespace is the namespace of every entry's job (default "default"); an entry that
	// names one must name this one.
	Namespace string             `json:"namespace,omitempty"`
	Runs      map[string]JobSpec `json:"runs"`
}

// DAGResponse answers POST /v1/dags: the run and the job created for each entry, by entry
// name.
type DAGResponse struct {
	Runs map[string]string `json:"runs"`
	Jobs map[string]string `json:"jobs"`
}

// DAG answers GET /v1/dags/{id}: an ad-hoc DAG as a whole. Its id is the run id of its
// first entry (by name); GET /v1/dags/{id} also takes the run id of any other entry.
type DAG struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	// Status is running while an entry has not ended; then failed if one failed,
	// cancelled if one was cancelled, else succeeded.
	Status    string     `json:"status"`
	CreatedAt time.Time  `json:"created_at"`
	Entries   []DAGEntry `json:"entries"` // by name
}

// DAGEntry is one entry of a DAG: its run (with the run's state) and its edges, each to
// another entry (Ref) or to a run from outside the DAG (Run), with its condition.
type DAGEntry struct {
	Name      string       `json:"name"`
	Run       *Run         `json:"run"`
	DependsOn []Dependency `json:"depends_on,omitempty"`
}

// DAGSummary is a DAG in GET /v1/dags.
type DAGSummary struct {
	ID        string    `json:"id"`
	Namespace string    `json:"namespace"`
	Entries   int       `json:"entries"`
	CreatedAt time.Time `json:"created_at"`
}

// DAGList is a page of DAGs. The scan that finds them reads a bounded number of jobs per
// request: a page may hold fewer than the limit (even none) and still have a NextCursor.
type DAGList struct {
	Items      []*DAGSummary `json:"items"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// DAGRef names the DAG a job belongs to and the job's entry in it.
type DAGRef struct {
	ID    string `json:"id"`
	Entry string `json:"entry"`
}
