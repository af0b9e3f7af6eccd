package api

import (
	"fmt"
	"net/http"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
)

// getCluster serves GET /v1/cluster.
func (a *API) getCluster(w http.ResponseWriter, r *http.Request) error {
	c, err := a.eng.Cluster(r.Context())
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	writeJSON(w, http.StatusOK, clusterToAPI(c))
	return nil
}

// clusterToAPI translates the cluster, finding the leader's address among the servers.
func clusterToAPI(c *model.Cluster) *apitype.Cluster {
	out := &apitype.Cluster{Servers: make([]*apitype.Server, len(c.Servers))}
	for i, s := range c.Servers {
		out.Servers[i] = &apitype.Server{ID: s.ID, Addr: s.Addr, StartedAt: s.StartedAt, LastSeen: s.LastSeen}
	}
	if l := c.Leader; l != nil {
		out.Leader = &apitype.ClusterLeader{ID: l.Holder, Since: l.Since, Term: l.Term}
		for _, s := range c.Servers {
			if s.ID == l.Holder {
				out.Leader.Addr = s.Addr
			}
		}
	}
	return out
}
