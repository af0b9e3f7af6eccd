package model

import "time"

// Role is what an API token may do. internal/auth holds the table of which role may take
// which action.
type Role string

// Roles, from the most to the least powerful.
const (
	// RoleAdmin may do everything, tokens included.
	RoleAdmin Role = "admin"
	// RoleOperator submits, triggers, cancels, retries, pauses and resumes, drains workers
	// and applies job files, and reads everything a viewer reads.
	RoleOperator Role = "operator"
	// RoleViewer reads: jobs, runs, logs, pipelines, queues, workers, the cluster.
	RoleViewer Role = "viewer"
	// RoleWorker speaks the worker protocol only, as its WorkerID when it has one.
	RoleWorker Role = "worker"
)

// Valid reports whether r is one of the roles.
func (r Role) Valid() bool {
	switch r {
	case RoleAdmin, RoleOperator, RoleViewer, RoleWorker:
		return true
	}
	return false
}

// Token is an API token as the store keeps it: never the secret itself, only its SHA-256
// (Hash, lowercase hex).
type Token struct {
	ID   string
	Name string
	Role Role
	// Namespaces, when not empty, are the only namespaces the token sees and acts in.
	Namespaces []string
	// WorkerID, for a worker token, is the one worker id it may act as (empty: any).
	WorkerID   string
	Hash       string
	CreatedAt  time.Time
	LastUsedAt *time.Time // updated at most once a minute
	RevokedAt  *time.Time
}
