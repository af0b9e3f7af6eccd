package model

import "time"

// Server is one server process of a cluster, as it last reported itself.
type Server struct {
	ID        string
	Addr      string // where clients and workers reach it
	StartedAt time.Time
	LastSeen  time.Time
}

// Leadership is the leader lease: Holder (a server's ID) leads until ExpiresAt unless it
// renews. Term grows by one each time the lease changes holder; Since is when Holder took it.
type Leadership struct {
	Holder    string
	Term      int64
	Since     time.Time
	ExpiresAt time.Time
}

// Cluster is who leads and which servers are up.
type Cluster struct {
	Leader  *Leadership // nil: no live leader
	Servers []*Server
}
