package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// GetRun returns one run with its attempts (GET /v1/runs/{id}).
func (c *Client) GetRun(ctx context.Context, id string) (*apitype.Run, error) {
	path, err := pathOf("get run", "/v1/runs/", id, "")
	if err != nil {
		return nil, err
	}
	var out apitype.Run
	if _, err := c.do(ctx, nil, http.MethodGet, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListRunsOptions filters and pages ListRuns; zero fields are left out. Job is a job id or
// name. Namespace keeps only the runs of that namespace; empty: the client's namespace
// (WithNamespace), else every namespace.
type ListRunsOptions struct {
	Namespace string
	Job       string
	Status    string
	Queue     string
	Worker    string
	Limit     int
	Cursor    string
}

func (o ListRunsOptions) values() url.Values {
	q := url.Values{}
	setString(q, "job", o.Job)
	setString(q, "status", o.Status)
	setString(q, "queue", o.Queue)
	setString(q, "worker", o.Worker)
	setInt(q, "limit", o.Limit)
	setString(q, "cursor", o.Cursor)
	return q
}

// ListRuns returns a page of runs, newest first (GET /v1/runs).
func (c *Client) ListRuns(ctx context.Context, opts ListRunsOptions) (*apitype.RunList, error) {
	q := opts.values()
	switch {
	case opts.Namespace != "":
		q.Set("namespace", opts.Namespace)
	case c.namespace != "":
		q.Set("namespace", c.namespace)
	}
	var out apitype.RunList
	if _, err := c.do(ctx, nil, http.MethodGet, "/v1/runs", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelRun cancels a run (POST /v1/runs/{id}/cancel); a running attempt's process is
// stopped, and until it has stopped the run shows CancelRequested.
func (c *Client) CancelRun(ctx context.Context, id string) (*apitype.Run, error) {
	return c.runAction(ctx, "cancel run", id, "/cancel")
}

// RetryRun reopens a failed or cancelled run as a new attempt (POST /v1/runs/{id}/retry).
func (c *Client) RetryRun(ctx context.Context, id string) (*apitype.Run, error) {
	return c.runAction(ctx, "retry run", id, "/retry")
}

// runAction POSTs an action on a run, answered with {"run": {...}}.
func (c *Client) runAction(ctx context.Context, what, id, suffix string) (*apitype.Run, error) {
	path, err := pathOf(what, "/v1/runs/", id, suffix)
	if err != nil {
		return nil, err
	}
	var out apitype.RunResponse
	if _, err := c.do(ctx, nil, http.MethodPost, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Run, nil
}

// LogsOptions selects the log of Logs.
type LogsOptions struct {
	// Attempt is the attempt number; 0 lets the server choose (the latest).
	Attempt int
	// Follow keeps the stream open until the attempt ends.
	Follow bool
	// Stream is "stdout" or "stderr" for only that one; empty for both, interleaved.
	Stream string
	// Tail, when not nil, starts the text with only the last *Tail lines of what is stored
	// (0: none of it); with Follow, what comes follows them.
	Tail *int
	// Timestamps leads each line with the time the server received it: RFC 3339 in UTC
	// with nine fraction digits, then a space.
	Timestamps bool
}

// Logs streams a run's stdout and stderr as text (GET /v1/runs/{id}/logs). The caller must
// close the reader. With Follow the stream lasts until the attempt ends or ctx is done, and
// a Timeout on the client's HTTP client does not cut it short.
func (c *Client) Logs(ctx context.Context, runID string, opts LogsOptions) (io.ReadCloser, error) {
	path, err := pathOf("logs", "/v1/runs/", runID, "/logs")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	setInt(q, "attempt", opts.Attempt)
	setString(q, "stream", opts.Stream)
	if opts.Tail != nil {
		q.Set("tail", strconv.Itoa(*opts.Tail))
	}
	if opts.Timestamps {
		q.Set("timestamps", "true")
	}
	hc := c.hc
	if opts.Follow {
		q.Set("follow", "true")
		hc = c.noTimeout()
	}
	resp, err := c.send(ctx, hc, http.MethodGet, path, q, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// WaitRun asks for the run every poll interval (see WithPollInterval) until done holds for
// it, and returns that run. It returns early with the error of a failed GetRun, or with
// ctx's error.
func (c *Client) WaitRun(ctx context.Context, id string, done func(*apitype.Run) bool) (*apitype.Run, error) {
	return poll(ctx, c, func(ctx context.Context) (*apitype.Run, error) { return c.GetRun(ctx, id) }, done)
}

// poll calls get at once, then every poll interval, until done holds for what it returned,
// and returns that. It returns early with get's error, or with ctx's.
func poll[T any](ctx context.Context, c *Client, get func(context.Context) (T, error), done func(T) bool) (T, error) {
	var zero T
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return zero, ctx.Err()
		case <-t.C:
		}
		v, err := get(ctx)
		if err != nil {
			return zero, err
		}
		if done(v) {
			return v, nil
		}
		t.Reset(c.pollInterval)
	}
}

// Finished reports whether a run is in a final state (succeeded, failed, cancelled,
// skipped): a predicate for WaitRun.
func Finished(run *apitype.Run) bool {
	switch run.Status {
	case "succeeded", "failed", "cancelled", "skipped":
		return true
	}
	return false
}
