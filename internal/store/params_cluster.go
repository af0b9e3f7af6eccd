package store

import "time"

// LeaderLease is the name of the lease row whose holder leads the cluster.
const LeaderLease = "leader"

// HeartbeatServerParams register a server or record that it is alive.
type HeartbeatServerParams struct {
	ID        string
	Addr      string
	StartedAt time.Time
	Now       time.Time // becomes LastSeen
}

// ListServersParams select the servers to list.
type ListServersParams struct {
	SeenAfter time.Time // only servers whose LastSeen is after this (zero: all)
}

// TryLeadParams ask for the leader lease on behalf of Holder.
type TryLeadParams struct {
	Holder string
	// TTL is how long the lease lasts from now: the database's now() on PostgreSQL, so
	// that the servers' clocks do not matter; Now on SQLite (one process).
	TTL time.Duration
	Now time.Time
}

// ResignLeadParams give the leader lease up.
type ResignLeadParams struct {
	Holder string
	Now    time.Time
}

// LeaderParams are the arguments of Leader.
type LeaderParams struct {
	Now time.Time // SQLite's clock; PostgreSQL uses its own
}
