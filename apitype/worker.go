package apitype

import (
	"encoding/json"
	"time"
)

// Capacity is what a worker offers or uses.
type Capacity struct {
	CPU      float64 `json:"cpu"`
	MemoryMB int64   `json:"memory_mb"`
	GPU      int     `json:"gpu"`
	Slots    int     `json:"slots"`
}

// Worker is a worker as the API shows it.
type Worker struct {
	ID            string            `json:"id"`
	Labels        map[string]string `json:"labels,omitempty"`
	Capacity      Capacity          `json:"capacity"`
	Used          Capacity          `json:"used"`
	Running       int               `json:"running"`
	State         string            `json:"state"`
	RegisteredAt  time.Time         `json:"registered_at"`
	LastHeartbeat time.Time         `json:"last_heartbeat"`
}

// WorkerList lists workers.
type WorkerList struct {
	Items []*Worker `json:"items"`
}

// RegisterRequest is the body of POST /v1/workers/register.
type RegisterRequest struct {
	ID       string            `json:"id"`
	Labels   map[string]string `json:"labels,omitempty"`
	Capacity Capacity          `json:"capacity"`
	// Handlers are the handler kinds this worker serves; Commands says it runs command and
	// shell jobs.
	Handlers []string `json:"handlers,omitempty"`
	Commands bool     `json:"commands"`
	// Session, when the worker re-attaches without having restarted, is the session it had,
	// and Held the leases it holds. When Session is still the worker's session in the
	// store, the worker keeps it and the attempts of Held whose leases are still its own
	// (same run, token and worker); the answer lists the others in Lost. A worker process
	// that starts sends neither, and loses whatever its previous process held.
	Session string     `json:"session,omitempty"`
	Held    []LeaseRef `json:"held,omitempty"`
}

// RegisterResponse tells a worker its session and the protocol's timings. Resumed says the
// worker kept the session it asked to resume; Lost, Ended and Cancel then answer its Held
// leases as a heartbeat would.
type RegisterResponse struct {
	Worker            *Worker  `json:"worker"`
	Session           string   `json:"session"`
	HeartbeatInterval Duration `json:"heartbeat_interval"`
	LeaseTTL          Duration `json:"lease_ttl"`
	Resumed           bool     `json:"resumed,omitempty"`
	Lost              []string `json:"lost,omitempty"`
	Ended             []string `json:"ended,omitempty"`
	Cancel            []string `json:"cancel,omitempty"`
}

// MaxHeldLeases caps the leases a registration or a heartbeat lists (Held): a worker holds
// no more than this many at once.
const MaxHeldLeases = 100000

// MaxLeaseBatch caps LeaseRequest.Max: a worker with more free slots than this asks for
// this many and polls again for the rest.
const MaxLeaseBatch = 1000

// LeaseRequest is the body of POST /v1/workers/{id}/lease: a long poll for up to Max runs.
// Session is the worker's session: with it, any server of the cluster serves the poll.
type LeaseRequest struct {
	Session string    `json:"session,omitempty"`
	Max     int       `json:"max"`
	Wait    *Duration `json:"wait,omitempty"` // how long to hold the request when nothing is due
}

// Lease is one run handed to a worker.
type Lease struct {
	RunID     string            `json:"run_id"`
	JobID     string            `json:"job_id"`
	JobName   string            `json:"job_name"`
	Attempt   int               `json:"attempt"`
	Token     string            `json:"token"`
	ExpiresAt time.Time         `json:"expires_at"`
	Command   []string          `json:"command,omitempty"`
	Shell     string            `json:"shell,omitempty"`
	Handler   string            `json:"handler,omitempty"`
	Args      json.RawMessage   `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	// SecretEnv are the job's secret variables in clear, for this attempt only: the worker
	// sets them like Env (a name is in one of the two) and should not log them.
	SecretEnv map[string]string `json:"secret_env,omitempty"`
	Dir       string            `json:"dir,omitempty"`
	Timeout   *Duration         `json:"timeout,omitempty"`
	// Requirements are what the server booked on the worker for this attempt (the run's,
	// as they were when it was created); a worker gives a run that needs GPUs that many of
	// its devices (CUDA_VISIBLE_DEVICES).
	Requirements *Requirements `json:"requirements,omitempty"`
}

// LeaseResponse carries the leases granted, and anything else the server pushes to the
// worker: the long poll returns early when one of the worker's runs is asked to cancel, so a
// worker keeps one lease request outstanding at all times (with Max 0 when it is full).
type LeaseResponse struct {
	Leases []Lease  `json:"leases"`
	Cancel []string `json:"cancel,omitempty"` // run ids to stop and complete as cancelled
	Lost   []string `json:"lost,omitempty"`   // run ids whose lease is gone: kill, don't complete
	Drain  bool     `json:"drain,omitempty"`  // stop taking work, finish what runs, exit
}

// LeaseRef names a held lease.
type LeaseRef struct {
	RunID string `json:"run_id"`
	Token string `json:"token"`
}

// HeartbeatRequest is the body of POST /v1/workers/{id}/heartbeat.
// Session is the worker's session: with it, any server of the cluster serves the heartbeat.
type HeartbeatRequest struct {
	Session string     `json:"session,omitempty"`
	Held    []LeaseRef `json:"held"`
}

// LeaveRequest is the body of POST /v1/workers/{id}/leave: the session that leaves.
type LeaveRequest struct {
	Session string `json:"session"`
}

// HeartbeatResponse tells a worker what to stop: Lost leases are gone (another holder, or
// expired: kill the attempt, report nothing), Ended ones had their completion recorded
// (forget the lease, nothing to kill), Cancel runs were asked to cancel.
type HeartbeatResponse struct {
	Lost   []string `json:"lost,omitempty"`
	Ended  []string `json:"ended,omitempty"`
	Cancel []string `json:"cancel,omitempty"`
	Drain  bool     `json:"drain,omitempty"`
}

// LogChunk is a piece of an attempt's output. Token is the attempt's lease token (the
// Lease's): the server stores a chunk only while that lease is the attempt's.
type LogChunk struct {
	RunID   string `json:"run_id"`
	Attempt int    `json:"attempt"`
	Token   string `json:"token"`
	Seq     int64  `json:"seq"`
	Stream  string `json:"stream"`
	Data    string `json:"data"`
}

// LogChunksRequest is the body of POST /v1/attempts/logs.
type LogChunksRequest struct {
	Chunks []LogChunk `json:"chunks"`
}

// Completion is the end of one attempt.
type Completion struct {
	RunID    string `json:"run_id"`
	Token    string `json:"token"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Error    string `json:"error,omitempty"`
}

// CompleteRequest is the body of POST /v1/attempts/complete.
type CompleteRequest struct {
	Completions []Completion `json:"completions"`
}

// CompletionResult is the answer for one completion: accepted, or refused as stale.
type CompletionResult struct {
	RunID    string `json:"run_id"`
	Accepted bool   `json:"accepted"`
	Error    string `json:"error,omitempty"`
}

// CompleteResponse answers POST /v1/attempts/complete.
type CompleteResponse struct {
	Results []CompletionResult `json:"results"`
}
