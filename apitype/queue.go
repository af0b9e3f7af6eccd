package apitype

// Queue is a named lane of runs.
type Queue struct {
	Name           string `json:"name"`
	Priority       int    `json:"priority"`
	MaxConcurrency int    `json:"max_concurrency"`
	Paused         bool   `json:"paused"`
	// RateLimit caps how often the queue's runs start (absent: no cap).
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
	// Alerts are the queue's own thresholds of the queue_backlog rule (absent: the server's).
	Alerts *QueueAlerts   `json:"alerts,omitempty"`
	Depth  map[string]int `json:"depth"`
}

// QueueAlerts are a queue's own thresholds of the queue_backlog alert rule; an absent or
// zero field keeps the server's default.
type QueueAlerts struct {
	Off bool `json:"off,omitempty"`
	// MaxBacklog: more queued runs than this fire queue_backlog.
	MaxBacklog int `json:"max_backlog,omitempty"`
	// MaxAge: an oldest queued run older than this fires queue_backlog.
	MaxAge *Duration `json:"max_age,omitempty"`
}

// QueuePatch is the body of PATCH /v1/queues/{name}: fields that are present replace the
// queue's. State "active" or "paused" is another way to set Paused.
type QueuePatch struct {
	Paused         *bool   `json:"paused,omitempty"`
	MaxConcurrency *int    `json:"max_concurrency,omitempty"`
	Priority       *int    `json:"priority,omitempty"`
	State          *string `json:"state,omitempty"`
	// RateLimit sets the queue's rate limit; {"rate": 0} removes it.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
	// Alerts replaces the queue's alert thresholds; {} removes them.
	Alerts *QueueAlerts `json:"alerts,omitempty"`
}

// QueueList lists queues.
type QueueList struct {
	Items []*Queue `json:"items"`
}
