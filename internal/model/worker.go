package model

import "time"

// Capacity is what a worker offers (or has in use).
type Capacity struct {
	CPU      float64 `json:"cpu"`
	MemoryMB int64   `json:"memory_mb"`
	GPU      int     `json:"gpu"`
	Slots    int     `json:"slots"`
}

// Worker is a process that executes attempts.
type Worker struct {
	ID       string
	Labels   map[string]string
	Capacity Capacity
	Used     Capacity
	// Session changes every time the worker process starts: a registration with a new
	// session means the previous process is gone and its attempts are lost.
	Session string
	// Handlers and Commands are what the worker runs, as its session registered them: any
	// server serves the session's leases from them.
	Handlers      []string
	Commands      bool
	State         WorkerState
	Running       int
	RegisteredAt  time.Time
	LastHeartbeat time.Time
}

// Queue is a named lane with its own priority, concurrency limit and pause switch.
type Queue struct {
	Name           string
	Priority       int
	MaxConcurrency int // 0: unlimited
	Paused         bool
	// RateLimit caps how often runs of the queue start (nil: no cap).
	RateLimit *RateLimit
	// Alerts tunes the queue_backlog alert rule for this queue (nil: the server's defaults).
	Alerts *QueueAlerts
	// Depth counts the queue's runs by status (filled by reads).
	Depth     map[RunStatus]int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// QueueAlerts are a queue's own thresholds of the queue_backlog alert rule; a zero field
// keeps the server's default.
type QueueAlerts struct {
	Off        bool          `json:"off,omitempty"`
	MaxBacklog int           `json:"max_backlog,omitempty"` // queued runs above this fire
	MaxAge     time.Duration `json:"max_age,omitempty"`     // an oldest queued run older than this fires
}
