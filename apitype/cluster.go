package apitype

import "time"

// Cluster is the answer of GET /v1/cluster: who leads and which servers are up.
type Cluster struct {
	// Leader is absent while no server holds the leader lease (between a leader's death
	// and its successor's election).
	Leader  *ClusterLeader `json:"leader,omitempty"`
	Servers []*Server      `json:"servers"`
}

// ClusterLeader is the server that leads: it fires cron schedules and rescues lost
// attempts. Term grows by one each time leadership passes to another server.
type ClusterLeader struct {
	ID    string    `json:"id"`
	Addr  string    `json:"addr"`
	Since time.Time `json:"since"`
	Term  int64     `json:"term"`
}

// Server is one server of the cluster, as it last reported itself.
type Server struct {
	ID        string    `json:"id"`
	Addr      string    `json:"addr"`
	StartedAt time.Time `json:"started_at"`
	LastSeen  time.Time `json:"last_seen"`
}
