package apitype

import (
	"encoding/json"
	"time"
)

// Alert is an alert as the API shows it and the JSON webhook posts it.
type Alert struct {
	ID string `json:"id"`
	// Rule is job_failing, cron_late, queue_backlog, worker_lost or run_too_long.
	Rule string `json:"rule"`
	// State is firing or resolved.
	State string `json:"state"`
	// Subject is what it is about: "job:<id>", "queue:<name>", "worker:<id>" or "run:<id>".
	Subject string `json:"subject"`
	// Summary says what holds and why.
	Summary string `json:"summary"`
	// Link is the subject's page of the web UI (a path, or a URL when the server knows its
	// public address).
	Link       string     `json:"link"`
	StartedAt  time.Time  `json:"started_at"`
	ResolvedAt *time.Time `json:"resolved_at,omitempty"`
}

// AlertList is the answer of GET /v1/alerts, newest first.
type AlertList struct {
	Alerts []*Alert `json:"alerts"`
}

// AuditEntry is one change made through the API.
type AuditEntry struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
	// Actor is the token's name and id ("ci (01H...)"), "static" for a token of the
	// server's config, or "dev" when the API is open.
	Actor string `json:"actor"`
	Role  string `json:"role,omitempty"`
	// Action is what was done: "job.create", "job.update", "queue.update", ...
	Action string `json:"action"`
	// Target is what it was done to: "job:<id>", "run:<id>", "queue:<name>", ...
	Target string `json:"target"`
	// Before and After are the object as the API shows it (secret values masked); absent
	// when there is none (a creation has no Before, a deletion no After).
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// AuditList is the answer of GET /v1/audit, newest first.
type AuditList struct {
	Entries []*AuditEntry `json:"entries"`
}
