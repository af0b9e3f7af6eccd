package client

import (
	"context"
	"net/http"

	"github.com/stint-dev/stint/apitype"
)

// ListTokens lists the server's API tokens, revoked ones included, without their secrets
// (GET /v1/tokens; admin only).
func (c *Client) ListTokens(ctx context.Context) (*apitype.TokenList, error) {
	var out apitype.TokenList
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/tokens", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateToken creates an API token (POST /v1/tokens; admin only). The answer carries its
// secret, which the server shows only this once.
func (c *Client) CreateToken(ctx context.Context, req *apitype.CreateTokenRequest) (*apitype.CreatedToken, error) {
	var out apitype.CreatedToken
	if _, err := c.do(ctx, nil, http.MethodPost, "/v1/tokens", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokeToken revokes an API token by id (POST /v1/tokens/{id}/revoke; admin only) and
// returns it, revoked.
func (c *Client) RevokeToken(ctx context.Context, id string) (*apitype.Token, error) {
	path, err := pathOf("revoke token", "/v1/tokens/", id, "/revoke")
	if err != nil {
		return nil, err
	}
	var out apitype.Token
	if _, err := c.do(ctx, nil, http.MethodPost, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
