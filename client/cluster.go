package client

import (
	"context"
	"net/http"

	"github.com/stint-dev/stint/apitype"
)

// Cluster returns who leads the cluster and its servers (GET /v1/cluster).
func (c *Client) Cluster(ctx context.Context) (*apitype.Cluster, error) {
	var out apitype.Cluster
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/cluster", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
