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

// ErrUnavailable: the store cannot serve the request now (its database is unreachable or
// restarting, it is out of disk space); nothing was written, and the same request may
// succeed later. The stores wrap their driver's error in an *UnavailableError.
var ErrUnavailable = errors.New("store unavailable")

// UnavailableError is an ErrUnavailable saying what happened.
type UnavailableError struct {
	// What is what happened, in a few words fit for a client: "disk full", "database
	// unreachable".
	What string
	Err  error // the driver's error
}

func (e *UnavailableError) Error() string {
	return "store unavailable (" + e.What + "): " + e.Err.Error()
}

// Unwrap makes errors.Is find ErrUnavailable, and the driver's error and its sentinels.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// Unavailable wraps err, from a store's driver, as an *UnavailableError saying what; an err
// that is one already is returned as it is.
func Unavailable(what string, err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return &UnavailableError{What: what, Err: err}
}
