package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/specjson"
)

// CreateJob creates a job (POST /v1/jobs). A job with no schedule gets its run at once, in the
// answer's Run. created is false when the server answered 200 because the spec's
// idempotency key was seen before: the answer is then the first one and nothing new exists.
func (c *Client) CreateJob(ctx context.Context, spec *apitype.JobSpec) (resp *apitype.CreateJobResponse, created bool, err error) {
	var out apitype.CreateJobResponse
	status, err := c.do(ctx, nil, http.MethodPost, "/v1/jobs", nil, spec, &out)
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated, nil
}

// CreateJobs creates many jobs in one transaction (POST /v1/jobs/batch). The answer has one
// entry per spec, in order.
func (c *Client) CreateJobs(ctx context.Context, req *apitype.BatchCreateJobsRequest) (*apitype.BatchCreateJobsResponse, error) {
	body, err := batchBody(req)
	if err != nil {
		return nil, err
	}
	var out apitype.BatchCreateJobsResponse
	if _, err := c.do(ctx, nil, http.MethodPost, "/v1/jobs/batch", nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateJobsMinimal is CreateJobs asking for the minimal answer ("Prefer: return=minimal"):
// the ids of each entry's job and first run (or its error) instead of the objects, which
// spares the server and the client encoding and decoding them.
func (c *Client) CreateJobsMinimal(ctx context.Context, req *apitype.BatchCreateJobsRequest) (*apitype.BatchCreateJobsMinimalResponse, error) {
	body, err := batchBody(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.sendBody(ctx, nil, http.MethodPost, "/v1/jobs/batch", nil, body, http.Header{"Prefer": {"return=minimal"}})
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	var out apitype.BatchCreateJobsMinimalResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("POST /v1/jobs/batch: decode answer: %w", err)
	}
	return &out, nil
}

// batchBody encodes the body of POST /v1/jobs/batch: the bytes of json.Marshal(req), written
// without reflection (a batch holds up to a thousand specs).
func batchBody(req *apitype.BatchCreateJobsRequest) (encodedBody, error) {
	if req == nil {
		return encodedBody("null"), nil
	}
	b, err := specjson.AppendBatchRequest(make([]byte, 0, 16+64*len(req.Jobs)), req.Jobs)
	if err != nil {
		return nil, fmt.Errorf("POST /v1/jobs/batch: encode request: %w", err)
	}
	return b, nil
}

// GetJob returns a job by id or name (GET /v1/jobs/{id}).
func (c *Client) GetJob(ctx context.Context, idOrName string) (*apitype.Job, error) {
	path, err := pathOf("get job", "/v1/jobs/", idOrName, "")
	if err != nil {
		return nil, err
	}
	var out apitype.Job
	if _, err := c.do(ctx, nil, http.MethodGet, path, c.jobQuery(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListJobsOptions filters and pages ListJobs; zero fields are left out.
type ListJobsOptions struct {
	Namespace string // empty: every namespace
	Queue     string
	Enabled   *bool
	Limit     int
	Cursor    string
}

func (o ListJobsOptions) values() url.Values {
	q := url.Values{}
	setString(q, "namespace", o.Namespace)
	setString(q, "queue", o.Queue)
	if o.Enabled != nil {
		q.Set("enabled", strconv.FormatBool(*o.Enabled))
	}
	setInt(q, "limit", o.Limit)
	setString(q, "cursor", o.Cursor)
	return q
}

// ListJobs returns a page of jobs (GET /v1/jobs). Pass the answer's NextCursor as Cursor for
// the next page; it is empty on the last one.
func (c *Client) ListJobs(ctx context.Context, opts ListJobsOptions) (*apitype.JobList, error) {
	var out apitype.JobList
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/jobs", opts.values(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateJob changes the fields of a job that the patch sets (PATCH /v1/jobs/{id}) and returns
// the job as it is now.
func (c *Client) UpdateJob(ctx context.Context, idOrName string, patch *apitype.JobPatch) (*apitype.Job, error) {
	path, err := pathOf("update job", "/v1/jobs/", idOrName, "")
	if err != nil {
		return nil, err
	}
	var out apitype.Job
	if _, err := c.do(ctx, nil, http.MethodPatch, path, c.jobQuery(), patch, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteJob deletes a job definition (DELETE /v1/jobs/{id}) and returns its active runs,
// which are cancelled (running ones are stopping: CancelRequested).
func (c *Client) DeleteJob(ctx context.Context, idOrName string) (*apitype.CancelResponse, error) {
	path, err := pathOf("delete job", "/v1/jobs/", idOrName, "")
	if err != nil {
		return nil, err
	}
	var out apitype.CancelResponse
	if _, err := c.do(ctx, nil, http.MethodDelete, path, c.jobQuery(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TriggerJob starts a run of a job now (POST /v1/jobs/{id}/trigger). req may be nil.
func (c *Client) TriggerJob(ctx context.Context, idOrName string, req *apitype.TriggerRequest) (*apitype.Run, error) {
	path, err := pathOf("trigger job", "/v1/jobs/", idOrName, "/trigger")
	if err != nil {
		return nil, err
	}
	var in any
	if req != nil {
		in = req
	}
	var out apitype.RunResponse
	if _, err := c.do(ctx, nil, http.MethodPost, path, c.jobQuery(), in, &out); err != nil {
		return nil, err
	}
	return out.Run, nil
}

// CancelJob cancels every active run of a job (POST /v1/jobs/{id}/cancel) and returns them;
// running ones are stopping (CancelRequested).
func (c *Client) CancelJob(ctx context.Context, idOrName string) (*apitype.CancelResponse, error) {
	path, err := pathOf("cancel job", "/v1/jobs/", idOrName, "/cancel")
	if err != nil {
		return nil, err
	}
	var out apitype.CancelResponse
	if _, err := c.do(ctx, nil, http.MethodPost, path, c.jobQuery(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func setString(q url.Values, key, v string) {
	if v != "" {
		q.Set(key, v)
	}
}

func setInt(q url.Values, key string, v int) {
	if v != 0 {
		q.Set(key, strconv.Itoa(v))
	}
}
