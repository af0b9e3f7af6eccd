package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

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

// GetDAG returns an ad-hoc DAG as a whole (GET /v1/dags/{id}): each entry's run with its
// state and its edges. id is the DAG's id (its first entry's run id) or any entry's run id.
func (c *Client) GetDAG(ctx context.Context, id string) (*apitype.DAG, error) {
	path, err := pathOf("get dag", "/v1/dags/", id, "")
	if err != nil {
		return nil, err
	}
	var out apitype.DAG
	if _, err := c.do(ctx, nil, http.MethodGet, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WaitDAG asks for a DAG every poll interval (see WithPollInterval) until done holds for
// it, and returns that DAG; id is as for GetDAG. It returns early with the error of a failed
// GetDAG, or with ctx's error.
func (c *Client) WaitDAG(ctx context.Context, id string, done func(*apitype.DAG) bool) (*apitype.DAG, error) {
	return poll(ctx, c, func(ctx context.Context) (*apitype.DAG, error) { return c.GetDAG(ctx, id) }, done)
}

// DAGFinished reports whether a DAG as a whole has ended (every entry's run is final): a
// predicate for WaitDAG.
func DAGFinished(d *apitype.DAG) bool { return d.Status != "" && d.Status != "running" }

// ListDAGs pages the ad-hoc DAGs (GET /v1/dags) of namespace ("": every namespace the
// token sees); limit <= 0 is the server's default. A page may hold fewer DAGs than limit
// and still have a NextCursor: the server bounds the jobs it scans per request.
func (c *Client) ListDAGs(ctx context.Context, namespace string, limit int, cursor string) (*apitype.DAGList, error) {
	q := url.Values{}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out apitype.DAGList
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/dags", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
