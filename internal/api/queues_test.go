package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

func TestQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "w1")
	created := b.createJob(t, `{"command": ["true"], "queue": "q1", "delay": "1h"}`)

	getQueue := func() apitype.Queue {
		t.Helper()
		r := b.do(t, "GET", "/v1/queues/q1", nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		var q apitype.Queue
		r.decode(t, &q)
		return q
	}
	q := getQueue()
	require.False(t, q.Paused)
	require.Equal(t, 1, q.Depth["scheduled"])
	require.Contains(t, q.Depth, "queued")

	patch := func(body string) *response {
		t.Helper()
		return b.do(t, "PATCH", "/v1/queues/q1", body)
	}
	r := patch(`{"paused": true, "max_concurrency": 3, "priority": 10}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r.decode(t, &q)
	require.True(t, q.Paused)
	require.Equal(t, 3, q.MaxConcurrency)
	require.Equal(t, 10, q.Priority)

	// A paused queue hands out nothing.
	r = b.do(t, "POST", "/v1/jobs/"+created.Job.ID+"/trigger", nil)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Empty(t, b.lease(t, "w1", 5).Leases)

	tests := []struct {
		name, body string
		fields     []string
	}{
		{"unknown field", `{"paused": false, "bogus": 1}`, []string{"bogus"}},
		{"bad state", `{"state": "stopped"}`, []string{"state"}},
		{"contradiction", `{"state": "active", "paused": true}`, []string{"state"}},
		{"negative limit", `{"max_concurrency": -1}`, []string{"max_concurrency"}},
		{"priority out of range", `{"priority": 5000}`, []string{"priority"}},
		{"wrong type", `{"paused": "yes"}`, []string{"paused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := patch(tt.body)
			require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
			require.Equal(t, tt.fields, r.fields(t))
			require.True(t, getQueue().Paused, "unchanged")
		})
	}

	r = patch(`{"state": "active"}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.False(t, getQueue().Paused)
	require.Len(t, b.lease(t, "w1", 5).Leases, 1)

	r = b.do(t, "GET", "/v1/queues", nil)
	require.Equal(t, http.StatusOK, r.status)
	var ql apitype.QueueList
	r.decode(t, &ql)
	var names []string
	for _, q := range ql.Items {
		names = append(names, q.Name)
	}
	require.Contains(t, names, "q1")

	r = b.do(t, "GET", "/v1/queues/nope", nil)
	require.Equal(t, http.StatusNotFound, r.status)
	r.problem(t)
	r = b.do(t, "PATCH", "/v1/queues/-bad", `{"paused": true}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, []string{"name"}, r.fields(t))
}

// TestPatchUnknownQueue: a misspelled queue is a 404 and is not created (issue 12);
// ?create=true creates it, and the default queue always exists.
func TestPatchUnknownQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "PATCH", "/v1/queues/reprots", `{"paused": true}`)
	require.Equal(t, http.StatusNotFound, r.status, "body: %s", r.body)
	require.Contains(t, r.problem(t).Detail, "?create=true")
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/v1/queues/reprots", nil).status, "not created")

	r = b.do(t, "PATCH", "/v1/queues/reports?create=yes", `{"paused": true}`)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.Equal(t, []string{"create"}, r.fields(t))
	r = b.do(t, "PATCH", "/v1/queues/reports?create=true", `{"paused": true}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = b.do(t, "PATCH", "/v1/queues/reports", `{"paused": false}`)
	require.Equal(t, http.StatusOK, r.status, "an existing queue: body: %s", r.body)
	r = b.do(t, "PATCH", "/v1/queues/default", `{"priority": 3}`)
	require.Equal(t, http.StatusOK, r.status, "the default queue: body: %s", r.body)
}

func TestQueueRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "PATCH", "/v1/queues/mail?create=true", `{"rate_limit": {"rate": 100, "per": "1m"}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var q apitype.Queue
	r.decode(t, &q)
	require.Equal(t, &apitype.RateLimit{Rate: 100, Per: apitype.Duration(time.Minute)}, q.RateLimit)

	created := b.createJob(t, `{"command": ["true"], "queue": "mail"}`)
	r = b.do(t, "GET", "/v1/runs/"+created.Run.ID, nil)
	var run apitype.Run
	r.decode(t, &run)
	require.Equal(t, "rate_limited", run.PendingCode, "a queued run of a rate-limited queue says so")

	r = b.do(t, "PATCH", "/v1/queues/mail", `{"rate_limit": {"rate": 0}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	q = apitype.Queue{}
	r.decode(t, &q)
	require.Nil(t, q.RateLimit, "rate 0 removes the limit")

	r = b.do(t, "PATCH", "/v1/queues/mail", `{"rate_limit": {"rate": 5, "per": "0s"}}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, []string{"rate_limit.per"}, r.fields(t))
}
