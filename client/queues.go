package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/stint-dev/stint/apitype"
)

// ListQueues lists the queues with their settings and depth by run status (GET /v1/queues).
func (c *Client) ListQueues(ctx context.Context) (*apitype.QueueList, error) {
	var out apitype.QueueList
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/queues", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetQueue returns one queue (GET /v1/queues/{name}).
func (c *Client) GetQueue(ctx context.Context, name string) (*apitype.Queue, error) {
	path, err := pathOf("get queue", "/v1/queues/", name, "")
	if err != nil {
		return nil, err
	}
	var out apitype.Queue
	if _, err := c.do(ctx, nil, http.MethodGet, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateQueue changes the settings of a queue that the patch sets (PATCH /v1/queues/{name})
// and returns the queue as it is now. A queue that does not exist is an *apitype.Problem
// with status 404 (a queue exists once a job uses it); CreateQueue makes one.
func (c *Client) UpdateQueue(ctx context.Context, name string, patch *apitype.QueuePatch) (*apitype.Queue, error) {
	return c.patchQueue(ctx, name, patch, nil)
}

// CreateQueue is UpdateQueue that creates the queue when it does not exist
// (PATCH /v1/queues/{name}?create=true), to set a queue up before its first job.
func (c *Client) CreateQueue(ctx context.Context, name string, patch *apitype.QueuePatch) (*apitype.Queue, error) {
	return c.patchQueue(ctx, name, patch, url.Values{"create": {"true"}})
}

func (c *Client) patchQueue(ctx context.Context, name string, patch *apitype.QueuePatch, query url.Values) (*apitype.Queue, error) {
	path, err := pathOf("update queue", "/v1/queues/", name, "")
	if err != nil {
		return nil, err
	}
	var out apitype.Queue
	if _, err := c.do(ctx, nil, http.MethodPatch, path, query, patch, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
