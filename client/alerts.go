package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/stint-dev/stint/apitype"
)

// ListAlertsOptions filter ListAlerts; zero fields filter nothing.
type ListAlertsOptions struct {
	State  string // firing or resolved
	Before string // an alert id: only older alerts
	Limit  int
}

// ListAlerts lists alerts, newest first (GET /v1/alerts).
func (c *Client) ListAlerts(ctx context.Context, opts ListAlertsOptions) (*apitype.AlertList, error) {
	q := url.Values{}
	setString(q, "state", opts.State)
	setString(q, "before", opts.Before)
	setInt(q, "limit", opts.Limit)
	var out apitype.AlertList
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/alerts", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListAuditOptions filter ListAudit; zero fields filter nothing.
type ListAuditOptions struct {
	Target string // "job:<id>", "queue:<name>", ...
	Actor  string
	Before string // an entry id: only older entries
	Limit  int
}

// ListAudit reads the audit log, newest first (GET /v1/audit).
func (c *Client) ListAudit(ctx context.Context, opts ListAuditOptions) (*apitype.AuditList, error) {
	q := url.Values{}
	setString(q, "target", opts.Target)
	setString(q, "actor", opts.Actor)
	setString(q, "before", opts.Before)
	setInt(q, "limit", opts.Limit)
	var out apitype.AuditList
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/audit", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
