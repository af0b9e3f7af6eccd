package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/stint-dev/stint/apitype"
)

// postJob posts in (nil: no body) to /v1/jobs/{idOrName}{suffix} and decodes the answer.
func postJob[T any](ctx context.Context, c *Client, what, idOrName, suffix string, in any) (*T, error) {
	path, err := pathOf(what, "/v1/jobs/", idOrName, suffix)
	if err != nil {
		return nil, err
	}
	var out T
	if _, err := c.do(ctx, nil, http.MethodPost, path, c.jobQuery(), in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PauseJob stops a job's schedule firing (POST /v1/jobs/{id}/pause); manual triggers still
// run it.
func (c *Client) PauseJob(ctx context.Context, idOrName string) (*apitype.Job, error) {
	return postJob[apitype.Job](ctx, c, "pause job", idOrName, "/pause", nil)
}

// ResumeJob makes a paused schedule fire again from now on (POST /v1/jobs/{id}/resume).
func (c *Client) ResumeJob(ctx context.Context, idOrName string) (*apitype.Job, error) {
	return postJob[apitype.Job](ctx, c, "resume job", idOrName, "/resume", nil)
}

// RotateWebhookSecret gives a job a new webhook secret (POST /v1/jobs/{id}/webhook); the
// answer is the only place it is shown.
func (c *Client) RotateWebhookSecret(ctx context.Context, idOrName string) (*apitype.WebhookSecret, error) {
	return postJob[apitype.WebhookSecret](ctx, c, "rotate webhook secret", idOrName, "/webhook", nil)
}

// Backfill creates (or, with DryRun, lists) the cron runs of a job's instants in a range
// that have none yet (POST /v1/jobs/{id}/backfill).
func (c *Client) Backfill(ctx context.Context, idOrName string, req *apitype.BackfillRequest) (*apitype.BackfillResponse, error) {
	return postJob[apitype.BackfillResponse](ctx, c, "backfill", idOrName, "/backfill", req)
}

// ApplyJob makes the job named spec.Name in namespace ("": the default) match spec,
// creating it if missing (PUT /v1/jobs/{name}); with dryRun it only says what it would do.
func (c *Client) ApplyJob(ctx context.Context, namespace string, spec *apitype.JobSpec, dryRun bool) (*apitype.ApplyResponse, error) {
	path, err := pathOf("apply job", "/v1/jobs/", spec.Name, "")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	setString(q, "namespace", namespace)
	if dryRun {
		q.Set("dry_run", "true")
	}
	var out apitype.ApplyResponse
	if _, err := c.do(ctx, nil, http.MethodPut, path, q, spec, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SendWebhook calls a job's webhook as an outside system would: it posts body (a JSON
// object, the run's args, or nil) to path (the Path of the job's apitype.WebhookSecret,
// e.g. /v1/hooks/deploy) signed with secret. A non-empty deliveryKey is sent as
// Idempotency-Key.
func (c *Client) SendWebhook(ctx context.Context, path, secret string, body []byte, deliveryKey string) (*apitype.Run, error) {
	u, err := url.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("webhook path %q: %w", path, err)
	}
	h := http.Header{}
	h.Set(apitype.WebhookSignatureHeader, apitype.WebhookSignature(secret, body))
	if len(body) > 0 {
		h.Set("Content-Type", "application/json")
	}
	if deliveryKey != "" {
		h.Set("Idempotency-Key", deliveryKey)
	}
	resp, err := c.sendBody(ctx, nil, http.MethodPost, u.Path, u.Query(), body, h)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	var out apitype.RunResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("POST %s: decode answer: %w", u.Path, err)
	}
	return out.Run, nil
}
