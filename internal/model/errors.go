package model

import "errors"

// Sentinel errors. Store engines translate their driver errors into these; the API maps them
// to HTTP statuses in one place.
var (
	// ErrNotFound: the named job, run, queue or worker does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request clashes with existing state (a duplicate job name, an
	// idempotency key reused for a different request).
	ErrConflict = errors.New("conflict")
	// ErrLeaseLost: a completion or heartbeat carried a lease token that is no longer valid
	// (fencing, invariant 3).
	ErrLeaseLost = errors.New("lease lost")
	// ErrInvalidState: the run is not in a state that allows the action (retrying a run that
	// succeeded, for example).
	ErrInvalidState = errors.New("invalid state")
)

// ErrNotLeader: a write only the leader may make carried a term that no longer leads (the
// lease passed to another server, or expired); nothing was written.
var ErrNotLeader = errors.New("not the leader")
