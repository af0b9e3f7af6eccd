package store

import "time"

// PruneRunsParams say which finished runs PruneRuns deletes. A run qualifies under either
// rule; with neither set (Before zero, MaxPerJob 0) nothing qualifies.
type PruneRunsParams struct {
	// Before is the age rule: runs that finished before it go, except the KeepPerJob newest
	// finished runs of their job. Zero: no age rule.
	Before time.Time
	// KeepPerJob is how many of each job's newest finished runs the age rule spares, so a
	// job that runs rarely keeps its last runs however old they are.
	KeepPerJob int
	// MaxPerJob is the count rule: a job's finished runs beyond its MaxPerJob newest go,
	// whatever their age. 0: no count rule.
	MaxPerJob int
	// Limit caps the runs one call deletes (one transaction). <= 0 means 500.
	Limit int
}

// PruneWorkersParams say which departed workers PruneWorkers deletes.
type PruneWorkersParams struct {
	// Before: workers whose last heartbeat is before it go.
	Before time.Time
	// Limit caps the workers one call deletes. <= 0 means 500.
	Limit int
}

// PruneRateLimitsParams say which rate-limit rows PruneRateLimits deletes.
type PruneRateLimitsParams struct {
	// Before: keys whose theoretical arrival time is before it go.
	Before time.Time
	// Limit caps the rows one call deletes. <= 0 means 500.
	Limit int
}

// DefaultPruneLimit is the batch of the Prune methods when their Limit is not set.
const DefaultPruneLimit = 500
