package client

import (
	"context"
	"net/http"

	"github.com/stint-dev/stint/apitype"
)

// SubmitDAG creates runs with the dependencies between them (POST /v1/dags), all or
// nothing: each entry of req.Runs is a job spec whose depends_on may name other entries
// (Ref) or existing runs (Run). The answer maps entry names to the runs and jobs created.
// A bad entry, a ref to a missing entry, a self-edge or a cycle is an *apitype.Problem
// naming the field (runs.<entry>.depends_on[i].ref), and nothing is created.
func (c *Client) SubmitDAG(ctx context.Context, req *apitype.DAGRequest) (*apitype.DAGResponse, error) {
	var out apitype.DAGResponse
	if _, err := c.do(ctx, nil, http.MethodPost, "/v1/dags", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
