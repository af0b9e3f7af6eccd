package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

func TestListRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createJob(t, `{"name": "a", "command": ["x"]}`)
	b.createJob(t, `{"name": "b", "command": ["x"], "queue": "other"}`)
	r := b.do(t, "POST", "/v1/jobs/a/trigger", nil)
	require.Equal(t, http.StatusCreated, r.status)
	var trig apitype.RunResponse
	r.decode(t, &trig)
	r = b.do(t, "POST", "/v1/runs/"+a.Run.ID+"/cancel", nil)
	require.Equal(t, http.StatusOK, r.status)

	list := func(query string) []string {
		t.Helper()
		r := b.do(t, "GET", "/v1/runs"+query, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		var out apitype.RunList
		r.decode(t, &out)
		var ids []string
		for _, run := range out.Items {
			ids = append(ids, run.ID)
		}
		return ids
	}
	require.Equal(t, []string{trig.Run.ID, a.Run.ID}, list("?job=a"), "newest first")
	require.Equal(t, []string{trig.Run.ID, a.Run.ID}, list("?job="+a.Job.ID))
	require.Equal(t, []string{a.Run.ID}, list("?job=a&status=cancelled"))
	require.Equal(t, []string{trig.Run.ID}, list("?job=a&status=queued"))
	require.Len(t, list("?queue=other"), 1)
	require.Len(t, list(""), 3)

	// Paging.
	var all []string
	cursor := ""
	for range 5 {
		r := b.do(t, "GET", "/v1/runs?limit=1&cursor="+cursor, nil)
		var page apitype.RunList
		r.decode(t, &page)
		require.LessOrEqual(t, len(page.Items), 1)
		for _, run := range page.Items {
			all = append(all, run.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	require.Equal(t, list(""), all)
}

func TestCancelAndRetryRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	created := b.createJob(t, `{"command": ["x"]}`)

	r := b.do(t, "POST", "/v1/runs/"+created.Run.ID+"/cancel", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var rr apitype.RunResponse
	r.decode(t, &rr)
	require.Equal(t, "cancelled", rr.Run.Status)
	require.NotNil(t, rr.Run.FinishedAt)

	// Again: a no-op.
	r = b.do(t, "POST", "/v1/runs/"+created.Run.ID+"/cancel", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)

	r = b.do(t, "POST", "/v1/runs/"+created.Run.ID+"/retry", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	rr = apitype.RunResponse{}
	r.decode(t, &rr)
	require.Equal(t, "queued", rr.Run.Status)
	require.Nil(t, rr.Run.FinishedAt)

	// A queued run cannot be retried.
	r = b.do(t, "POST", "/v1/runs/"+created.Run.ID+"/retry", nil)
	require.Equal(t, http.StatusConflict, r.status, "body: %s", r.body)
	require.Contains(t, r.problem(t).Detail, "queued")

	for _, path := range []string{"/v1/runs/nope", "/v1/runs/nope/logs"} {
		r = b.do(t, "GET", path, nil)
		require.Equal(t, http.StatusNotFound, r.status, path)
		r.problem(t)
	}
	for _, path := range []string{"/v1/runs/nope/cancel", "/v1/runs/nope/retry"} {
		r = b.do(t, "POST", path, nil)
		require.Equal(t, http.StatusNotFound, r.status, path)
		r.problem(t)
	}
}
