package apitype

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
