package client

import (
	"context"
	"net/http"

	"github.com/stint-dev/stint/apitype"
)

// ServerVersion returns the build of the server answering (GET /v1/version).
func (c *Client) ServerVersion(ctx context.Context) (*apitype.Version, error) {
	var out apitype.Version
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/version", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
