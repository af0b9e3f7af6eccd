package client

import (
	"context"
	"net/http"

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
// and returns the queue as it is now.
func (c *Client) UpdateQueue(ctx context.Context, name string, patch *apitype.QueuePatch) (*apitype.Queue, error) {
	path, err := pathOf("update queue", "/v1/queues/", name, "")
	if err != nil {
		return nil, err
	}
	var out apitype.Queue
	if _, err := c.do(ctx, nil, http.MethodPatch, path, nil, patch, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
