package client

import (
	"context"
	"net/http"

	"github.com/stint-dev/stint/apitype"
)

// ListWorkers lists the workers the cluster knows (GET /v1/workers).
func (c *Client) ListWorkers(ctx context.Context) (*apitype.WorkerList, error) {
	var out apitype.WorkerList
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/workers", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetWorker returns one worker (GET /v1/workers/{id}).
func (c *Client) GetWorker(ctx context.Context, id string) (*apitype.Worker, error) {
	return c.workerCall(ctx, "get worker", http.MethodGet, id, "")
}

// DrainWorker asks a worker to stop taking work, finish what it runs and exit
// (POST /v1/workers/{id}/drain), and returns the worker.
func (c *Client) DrainWorker(ctx context.Context, id string) (*apitype.Worker, error) {
	return c.workerCall(ctx, "drain worker", http.MethodPost, id, "/drain")
}

func (c *Client) workerCall(ctx context.Context, what, method, id, suffix string) (*apitype.Worker, error) {
	path, err := pathOf(what, "/v1/workers/", id, suffix)
	if err != nil {
		return nil, err
	}
	var out apitype.Worker
	if _, err := c.do(ctx, nil, method, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Register registers a worker process (POST /v1/workers/register) and returns its session and
// the protocol's timings.
func (c *Client) Register(ctx context.Context, req *apitype.RegisterRequest) (*apitype.RegisterResponse, error) {
	var out apitype.RegisterResponse
	if _, err := c.do(withIdempotent(ctx), nil, http.MethodPost, "/v1/workers/register", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Lease long-polls for up to req.Max runs (POST /v1/workers/{id}/lease). The server holds the
// request for up to req.Wait when nothing is due; ctx bounds it, and a Timeout on the
// client's HTTP client does not apply.
func (c *Client) Lease(ctx context.Context, workerID string, req *apitype.LeaseRequest) (*apitype.LeaseResponse, error) {
	path, err := pathOf("lease", "/v1/workers/", workerID, "/lease")
	if err != nil {
		return nil, err
	}
	var out apitype.LeaseResponse
	if _, err := c.do(withIdempotent(ctx), c.noTimeout(), http.MethodPost, path, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Heartbeat reports the leases a worker holds (POST /v1/workers/{id}/heartbeat) and returns
// what it must stop.
func (c *Client) Heartbeat(ctx context.Context, workerID string, req *apitype.HeartbeatRequest) (*apitype.HeartbeatResponse, error) {
	path, err := pathOf("heartbeat", "/v1/workers/", workerID, "/heartbeat")
	if err != nil {
		return nil, err
	}
	var out apitype.HeartbeatResponse
	if _, err := c.do(withIdempotent(ctx), nil, http.MethodPost, path, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Leave ends the worker's session at its clean exit (POST /v1/workers/{id}/leave).
func (c *Client) Leave(ctx context.Context, workerID string, req *apitype.LeaveRequest) error {
	path, err := pathOf("leave", "/v1/workers/", workerID, "/leave")
	if err != nil {
		return err
	}
	_, err = c.do(withIdempotent(ctx), nil, http.MethodPost, path, nil, req, nil)
	return err
}

// AppendLogs sends chunks of attempts' output (POST /v1/attempts/logs).
func (c *Client) AppendLogs(ctx context.Context, req *apitype.LogChunksRequest) error {
	_, err := c.do(withIdempotent(ctx), nil, http.MethodPost, "/v1/attempts/logs", nil, req, nil)
	return err
}

// Complete reports the end of attempts (POST /v1/attempts/complete); each result says whether
// the completion was accepted or refused as stale.
func (c *Client) Complete(ctx context.Context, req *apitype.CompleteRequest) (*apitype.CompleteResponse, error) {
	var out apitype.CompleteResponse
	if _, err := c.do(withIdempotent(ctx), nil, http.MethodPost, "/v1/attempts/complete", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
