package apitype

// Queue is a named lane of runs.
type Queue struct {
	Name           string         `json:"name"`
	Priority       int            `json:"priority"`
	MaxConcurrency int            `json:"max_concurrency"`
	Paused         bool           `json:"paused"`
	Depth          map[string]int `json:"depth"`
}

// QueuePatch is the body of PATCH /v1/queues/{name}.
type QueuePatch struct {
	Paused         *bool `json:"paused,omitempty"`
	MaxConcurrency *int  `json:"max_concurrency,omitempty"`
	Priority       *int  `json:"priority,omitempty"`
}

// QueueList lists queues.
type QueueList struct {
	Items []*Queue `json:"items"`
}
