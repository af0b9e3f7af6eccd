package api

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

func TestCreateJob(t *testing.T) {
	t.Parallel()
	b := setup(t)

	out := b.createJob(t, `{"name": "hello", "command": ["echo", "hi"], "args": {"who": "world"}, "priority": 5}`)
	require.NotNil(t, out.Job)
	require.NotNil(t, out.Run)
	require.Equal(t, "hello", out.Job.Name)
	require.Equal(t, "default", out.Job.Namespace)
	require.Equal(t, "default", out.Job.Queue)
	require.Equal(t, 5, out.Job.Priority)
	require.Equal(t, "queued", out.Run.Status)
	require.Equal(t, "submit", out.Run.Trigger)
	require.Equal(t, out.Job.ID, out.Run.JobID)
	require.Equal(t, time.UTC, out.Run.CreatedAt.Location())
	require.JSONEq(t, `{"who": "world"}`, string(out.Run.Args))

	for _, path := range []string{"/v1/jobs/" + out.Job.ID, "/v1/jobs/hello", "/v1/jobs/hello?namespace=default"} {
		r := b.do(t, "GET", path, nil)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", path, r.body)
		var j apitype.Job
		r.decode(t, &j)
		require.Equal(t, out.Job.ID, j.ID)
		require.NotNil(t, j.LastRun, "last_run")
		require.Equal(t, out.Run.ID, j.LastRun.ID)
	}
	r := b.do(t, "GET", "/v1/jobs/hello?namespace=other", nil)
	require.Equal(t, http.StatusNotFound, r.status)
	require.Contains(t, r.problem(t).Detail, "hello")

	// Wrong Content-Type is tolerated.
	r = b.doCtx(t, t.Context(), "POST", "/v1/jobs", `{"shell": "true"}`, http.Header{"Content-Type": {"text/plain"}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
}

func TestCreateJobRunAtFuture(t *testing.T) {
	t.Parallel()
	b := setup(t)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	out := b.createJob(t, fmt.Sprintf(`{"command": ["true"], "run_at": %q}`, at.In(time.FixedZone("X", 3600)).Format(time.RFC3339)))
	require.Equal(t, "scheduled", out.Run.Status)
	require.Equal(t, "not_due", out.Run.PendingCode)
	require.NotEmpty(t, out.Run.PendingReason)
	require.True(t, at.Equal(out.Run.ScheduledFor), "%v != %v", at, out.Run.ScheduledFor)
	require.Equal(t, time.UTC, out.Run.ScheduledFor.Location())

	out = b.createJob(t, `{"command": ["true"], "delay": "10m"}`)
	require.Equal(t, "scheduled", out.Run.Status)

	out = b.createJob(t, `{"command": ["true"], "enabled": false}`)
	require.Nil(t, out.Run)
	require.False(t, out.Job.Enabled)
}

func TestCreateJobIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.createJob(t, `{"command": ["echo"], "args": {"a": 1, "b": 2}, "idempotency_key": "k1"}`)

	// Same request, keys in another order: 200 with the first answer.
	r := b.do(t, "POST", "/v1/jobs", `{"idempotency_key": "k1", "args": {"b": 2, "a": 1}, "command": ["echo"]}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var again apitype.CreateJobResponse
	r.decode(t, &again)
	require.Equal(t, first.Job.ID, again.Job.ID)
	require.Equal(t, first.Run.ID, again.Run.ID)

	jobs, runs := b.counts(t)
	require.Equal(t, 1, jobs)
	require.Equal(t, 1, runs)

	// Same key, another request: 409 naming the key.
	r = b.do(t, "POST", "/v1/jobs", `{"command": ["echo", "other"], "idempotency_key": "k1"}`)
	require.Equal(t, http.StatusConflict, r.status, "body: %s", r.body)
	require.Equal(t, []string{"idempotency_key"}, r.fields(t))
	jobs, runs = b.counts(t)
	require.Equal(t, 1, jobs)
	require.Equal(t, 1, runs)
}

func TestCreateJobDuplicateName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createJob(t, `{"name": "dup", "command": ["true"]}`)
	r := b.do(t, "POST", "/v1/jobs", `{"name": "dup", "shell": "true"}`)
	require.Equal(t, http.StatusConflict, r.status, "body: %s", r.body)
	require.Equal(t, []string{"name"}, r.fields(t))
	// Another namespace is fine.
	b.createJob(t, `{"name": "dup", "namespace": "other", "command": ["true"]}`)
	jobs, runs := b.counts(t)
	require.Equal(t, 2, jobs)
	require.Equal(t, 2, runs)
}

// TestBadInputChangesNothing covers every class of bad input: each is a 4xx naming the field
// (or the byte offset) and leaves the jobs and runs as they were.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	existing := b.createJob(t, `{"name": "taken", "command": ["true"]}`)

	many := make([]string, DefaultLimits().MaxBatchJobs+1)
	for i := range many {
		many[i] = `{"command": ["true"]}`
	}
	batchWithBad := `{"jobs": [{"command": ["a"]}, {"command": ["b"]}, {"shell": "c"}, {"command": []}, {"command": ["e"], "priority": 9999}]}`

	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		fields []string
		detail string
	}{
		{name: "empty body", method: "POST", path: "/v1/jobs", body: "", status: 400, detail: "empty"},
		{name: "malformed", method: "POST", path: "/v1/jobs", body: `{"command": ["a"],}`, status: 400, detail: "byte offset 18"},
		{name: "trailing data", method: "POST", path: "/v1/jobs", body: `{"command": ["a"]}{}`, status: 400, detail: "byte offset 18"},
		{name: "unknown field", method: "POST", path: "/v1/jobs", body: `{"command": ["a"], "retry": {"attempts": 3}}`, status: 400, fields: []string{"retry.attempts"}},
		{name: "wrong type", method: "POST", path: "/v1/jobs", body: `{"command": "echo hi"}`, status: 400, fields: []string{"command"}},
		{name: "bad duration", method: "POST", path: "/v1/jobs", body: `{"command": ["a"], "timeout": "forever"}`, status: 400, fields: []string{"timeout"}},
		{name: "two things to run", method: "POST", path: "/v1/jobs", body: `{"command": ["a"], "handler": "h"}`, status: 400, fields: []string{"command", "handler"}},
		{name: "nothing to run", method: "POST", path: "/v1/jobs", body: `{"name": "x"}`, status: 400, fields: []string{"command"}},
		{name: "many bad fields", method: "POST", path: "/v1/jobs",
			body:   `{"command": [""], "priority": 2000, "retry": {"max_attempts": 5000, "jitter": 2}, "requirements": {"cpu": -1}, "delay": "1s", "run_at": "2030-01-01T00:00:00Z"}`,
			status: 400, fields: []string{"command[0]", "priority", "requirements.cpu", "retry.max_attempts", "retry.jitter", "run_at"}},
		{name: "bad cron", method: "POST", path: "/v1/jobs", body: `{"command": ["a"], "schedule": {"cron": "* * * *"}}`, status: 400, fields: []string{"schedule.cron"}},
		{name: "unknown time zone", method: "POST", path: "/v1/jobs", body: `{"command": ["a"], "schedule": {"cron": "@daily", "timezone": "Europe/Atlantis"}}`, status: 400, fields: []string{"schedule.timezone"}},
		{name: "bad concurrency policy", method: "POST", path: "/v1/jobs", body: `{"command": ["a"], "concurrency": {"policy": "never"}}`, status: 400, fields: []string{"concurrency.policy"}},
		{name: "oversize", method: "POST", path: "/v1/jobs", body: `{"command": ["` + strings.Repeat("a", 1<<20) + `"]}`, status: 413},
		{name: "duplicate name", method: "POST", path: "/v1/jobs", body: `{"name": "taken", "command": ["a"]}`, status: 409, fields: []string{"name"}},
		{name: "batch invalid entry", method: "POST", path: "/v1/jobs/batch", body: batchWithBad, status: 400, fields: []string{"jobs[3].command", "jobs[4].priority"}},
		{name: "batch wrong type", method: "POST", path: "/v1/jobs/batch", body: `{"jobs": [{"command": ["a"]}, {"command": "b"}]}`, status: 400, fields: []string{"jobs[1].command"}},
		{name: "batch empty", method: "POST", path: "/v1/jobs/batch", body: `{"jobs": []}`, status: 400, fields: []string{"jobs"}},
		{name: "batch too many", method: "POST", path: "/v1/jobs/batch", body: `{"jobs": [` + strings.Join(many, ",") + `]}`, status: 400, fields: []string{"jobs"}},
		{name: "batch repeated name", method: "POST", path: "/v1/jobs/batch", body: `{"jobs": [{"name": "n", "command": ["a"]}, {"name": "n", "command": ["a"]}]}`, status: 400, fields: []string{"jobs[1].name"}},
		{name: "batch repeated key", method: "POST", path: "/v1/jobs/batch", body: `{"jobs": [{"idempotency_key": "k", "command": ["a"]}, {"idempotency_key": "k", "command": ["b"]}]}`, status: 400, fields: []string{"jobs[1].idempotency_key"}},
		{name: "batch name taken", method: "POST", path: "/v1/jobs/batch", body: `{"jobs": [{"name": "new", "command": ["a"]}, {"name": "taken", "command": ["a"]}]}`, status: 409, fields: []string{"jobs[1].name"}},
		{name: "patch unknown field", method: "PATCH", path: "/v1/jobs/taken", body: `{"priorty": 3}`, status: 400, fields: []string{"priorty"}},
		{name: "patch invalid", method: "PATCH", path: "/v1/jobs/taken", body: `{"priority": 3000, "retry": {"multiplier": 0.5}}`, status: 400, fields: []string{"priority", "retry.multiplier"}},
		{name: "patch bad key", method: "PATCH", path: "/v1/jobs/taken", body: `{"concurrency": {"key": "k-{{.id"}}`, status: 400, fields: []string{"concurrency.key"}},
		{name: "patch bad cron", method: "PATCH", path: "/v1/jobs/taken", body: `{"schedule": {"cron": "@never"}}`, status: 400, fields: []string{"schedule.cron"}},
		{name: "pause without schedule", method: "POST", path: "/v1/jobs/taken/pause", status: 409},
		{name: "hook without signature", method: "POST", path: "/v1/hooks/taken", body: `{"a": 1}`, status: 401},
		{name: "trigger args not object", method: "POST", path: "/v1/jobs/taken/trigger", body: `{"args": [1]}`, status: 400, fields: []string{"args"}},
		{name: "trigger unknown job", method: "POST", path: "/v1/jobs/nope/trigger", body: ``, status: 404},
		{name: "list bad limit", method: "GET", path: "/v1/jobs?limit=0", status: 400, fields: []string{"limit"}},
		{name: "list limit too big", method: "GET", path: "/v1/jobs?limit=1001", status: 400, fields: []string{"limit"}},
		{name: "list bad enabled", method: "GET", path: "/v1/jobs?enabled=maybe", status: 400, fields: []string{"enabled"}},
		{name: "runs bad status", method: "GET", path: "/v1/runs?status=done", status: 400, fields: []string{"status"}},
		{name: "runs bad limit and status", method: "GET", path: "/v1/runs?status=x&limit=x", status: 400, fields: []string{"status", "limit"}},
		{name: "runs unknown job", method: "GET", path: "/v1/runs?job=nope", status: 404},
	}
	jobs0, runs0 := b.counts(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.body != "" {
				body = tt.body
			}
			r := b.do(t, tt.method, tt.path, body)
			require.Equal(t, tt.status, r.status, "body: %.500s", r.body)
			p := r.problem(t)
			require.NotEmpty(t, p.Title)
			if tt.fields != nil {
				require.Equal(t, tt.fields, fieldNames(p.Errors))
			}
			require.Contains(t, p.Detail, tt.detail)
			jobs, runs := b.counts(t)
			require.Equal(t, jobs0, jobs, "jobs changed")
			require.Equal(t, runs0, runs, "runs changed")
		})
	}
	r := b.do(t, "GET", "/v1/jobs/taken", nil)
	var j apitype.Job
	r.decode(t, &j)
	require.Equal(t, 0, j.Priority, "the job was not patched")
	require.Equal(t, existing.Job.UpdatedAt, j.UpdatedAt)
}

func TestCreateJobsBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "POST", "/v1/jobs/batch", `{"jobs": [
		{"name": "a", "command": ["a"]},
		{"name": "b", "shell": "b", "enabled": false},
		{"handler": "c", "idempotency_key": "kc", "delay": "1h"}
	]}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var out apitype.BatchCreateJobsResponse
	r.decode(t, &out)
	require.Len(t, out.Items, 3)
	require.Equal(t, "a", out.Items[0].Job.Name)
	require.Equal(t, "queued", out.Items[0].Run.Status)
	require.Equal(t, "b", out.Items[1].Job.Name)
	require.Nil(t, out.Items[1].Run)
	require.Equal(t, "c", out.Items[2].Job.Handler)
	require.Equal(t, "scheduled", out.Items[2].Run.Status)
	firstC := out.Items[2]

	// Replaying an entry by its key creates nothing new; keys are per namespace.
	r = b.do(t, "POST", "/v1/jobs/batch", `{"jobs": [
		{"handler": "c", "idempotency_key": "kc", "delay": "1h"},
		{"handler": "other", "idempotency_key": "kc", "namespace": "ns2"}
	]}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	out = apitype.BatchCreateJobsResponse{}
	r.decode(t, &out)
	require.Len(t, out.Items, 2)
	require.Equal(t, "c", out.Items[0].Job.Handler)
	require.Equal(t, firstC.Job.ID, out.Items[0].Job.ID)
	require.Equal(t, firstC.Run.ID, out.Items[0].Run.ID)
	require.Nil(t, out.Items[0].Error)
	require.Equal(t, "ns2", out.Items[1].Job.Namespace)

	// The same entry twice in one batch is one job.
	r = b.do(t, "POST", "/v1/jobs/batch", `{"jobs": [{"shell": "x", "idempotency_key": "kx"}, {"shell": "x", "idempotency_key": "kx"}]}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	out = apitype.BatchCreateJobsResponse{}
	r.decode(t, &out)
	require.Len(t, out.Items, 2)
	require.Equal(t, out.Items[0].Job.ID, out.Items[1].Job.ID)
	require.Equal(t, out.Items[0].Run.ID, out.Items[1].Run.ID)

	// A key reused with another request is reported on its item; the others are created.
	r = b.do(t, "POST", "/v1/jobs/batch", `{"jobs": [
		{"handler": "e"},
		{"handler": "d", "idempotency_key": "kc", "priority": 3}
	]}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	out = apitype.BatchCreateJobsResponse{}
	r.decode(t, &out)
	require.Len(t, out.Items, 2)
	require.Equal(t, "e", out.Items[0].Job.Handler)
	require.Nil(t, out.Items[1].Job)
	require.NotNil(t, out.Items[1].Error)
	require.Equal(t, http.StatusConflict, out.Items[1].Error.Status)
	require.Equal(t, []string{"jobs[1].idempotency_key"}, fieldNames(out.Items[1].Error.Errors))
	// The unnamed one-off job e is its run alone (store.Anonymous): it is read by its id,
	// and the jobs list, a list of definitions, leaves it out.
	r = b.do(t, "GET", "/v1/jobs/"+out.Items[0].Job.ID, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var e apitype.Job
	r.decode(t, &e)
	require.NotNil(t, e.LastRun)
	require.Equal(t, out.Items[0].Run.ID, e.LastRun.ID)
	e.LastRun = nil
	require.Equal(t, *out.Items[0].Job, e)
	jobs, _ := b.counts(t)
	require.Equal(t, 5, jobs)
}

func TestCreateJobsBatchLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 2500
	var buf bytes.Buffer
	buf.WriteString(`{"jobs": [`)
	for i := range n {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"name": "job-%05d", "command": ["echo", "%d"]}`, i, i)
	}
	buf.WriteString(`]}`)
	require.Greater(t, int64(buf.Len()), DefaultLimits().MaxBodyBytes/20)
	r := b.do(t, "POST", "/v1/jobs/batch", buf.Bytes())
	require.Equal(t, http.StatusCreated, r.status, "body: %.500s", r.body)
	var out apitype.BatchCreateJobsResponse
	r.decode(t, &out)
	require.Len(t, out.Items, n)
	for i, it := range out.Items {
		require.Equal(t, fmt.Sprintf("job-%05d", i), it.Job.Name)
	}
}

func TestListJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, s := range []string{
		`{"name": "a", "command": ["x"]}`,
		`{"name": "b", "command": ["x"], "queue": "q2"}`,
		`{"name": "c", "command": ["x"], "enabled": false}`,
		`{"name": "d", "command": ["x"], "queue": "q2"}`,
		`{"name": "e", "command": ["x"]}`,
	} {
		b.createJob(t, s)
	}
	sched := b.createJob(t, `{"name": "f", "command": ["x"], "schedule": {"cron": "0 3 * * *"}}`)
	list := func(query string) apitype.JobList {
		t.Helper()
		r := b.do(t, "GET", "/v1/jobs"+query, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		var out apitype.JobList
		r.decode(t, &out)
		return out
	}
	names := func(l apitype.JobList) []string {
		var out []string
		for _, j := range l.Items {
			out = append(out, j.Name)
		}
		return out
	}

	var all []string
	cursor := ""
	for range 10 {
		page := list("?limit=2&cursor=" + cursor)
		require.LessOrEqual(t, len(page.Items), 2)
		all = append(all, names(page)...)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	require.Equal(t, []string{"a", "b", "c", "d", "e", "f"}, all)
	runs := map[string]string{} // job name -> id of its one run
	for _, j := range list("").Items {
		if j.LastRun != nil {
			runs[j.Name] = j.LastRun.ID
			require.Equal(t, "queued", j.LastRun.Status, "job %s", j.Name)
			require.False(t, j.LastRun.CreatedAt.IsZero())
		}
	}
	require.Len(t, runs, 4, "each job with a run lists it; disabled c and scheduled f (%s) have none", sched.Job.ID)
	r := b.do(t, "POST", "/v1/jobs/a/trigger", ``)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var tr apitype.RunResponse
	r.decode(t, &tr)
	require.NotEqual(t, runs["a"], tr.Run.ID)
	require.Equal(t, tr.Run.ID, list("?limit=1").Items[0].LastRun.ID, "last_run is the newest run")
	require.Equal(t, []string{"b", "d"}, names(list("?queue=q2")))
	require.Equal(t, []string{"c"}, names(list("?enabled=false")))
	require.Equal(t, []string{"a", "b", "d", "e", "f"}, names(list("?enabled=true")))
	require.Empty(t, list("?namespace=nope").Items)
	require.NotNil(t, list("?namespace=nope").Items, "items is [] not null")
}

func TestPatchTriggerCancelDeleteJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	created := b.createJob(t, `{"name": "p", "command": ["true"], "delay": "1h"}`)

	r := b.do(t, "PATCH", "/v1/jobs/p", `{"priority": 9, "retry": {"max_attempts": 3}, "tags": ["x"], "enabled": false}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var j apitype.Job
	r.decode(t, &j)
	require.Equal(t, 9, j.Priority)
	require.Equal(t, 3, j.Retry.MaxAttempts)
	require.Equal(t, []string{"x"}, j.Tags)
	require.False(t, j.Enabled)
	require.Equal(t, []string{"true"}, j.Command, "fields not in the patch stay")
	require.NotNil(t, j.LastRun)

	r = b.do(t, "POST", "/v1/jobs/p/trigger", `{"args": {"n": 1}, "idempotency_key": "t1"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var tr apitype.RunResponse
	r.decode(t, &tr)
	require.Equal(t, "manual", tr.Run.Trigger)
	require.Equal(t, "queued", tr.Run.Status)
	require.Equal(t, 3, tr.Run.MaxAttempts)
	require.JSONEq(t, `{"n": 1}`, string(tr.Run.Args))
	r = b.do(t, "POST", "/v1/jobs/p/trigger", `{"args": {"n": 1}, "idempotency_key": "t1"}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var tr2 apitype.RunResponse
	r.decode(t, &tr2)
	require.Equal(t, tr.Run.ID, tr2.Run.ID)
	r = b.do(t, "POST", "/v1/jobs/p/trigger", nil)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)

	r = b.do(t, "POST", "/v1/jobs/p/cancel", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var cr apitype.CancelResponse
	r.decode(t, &cr)
	require.Len(t, cr.Items, 3)
	for _, run := range cr.Items {
		require.Equal(t, "cancelled", run.Status)
	}
	require.Equal(t, "cancelled", b.getRun(t, created.Run.ID).Status)

	r = b.do(t, "DELETE", "/v1/jobs/p", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = b.do(t, "GET", "/v1/jobs/p", nil)
	require.Equal(t, http.StatusNotFound, r.status)
	r = b.do(t, "DELETE", "/v1/jobs/p", nil)
	require.Equal(t, http.StatusNotFound, r.status)
	r.problem(t)
}
