package client

import (
	"context"
	"net/http"

	"github.com/stint-dev/stint/apitype"
)

// Doctor returns the server's checks of its setup (GET /v1/doctor).
func (c *Client) Doctor(ctx context.Context) (*apitype.Doctor, error) {
	var out apitype.Doctor
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/doctor", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
