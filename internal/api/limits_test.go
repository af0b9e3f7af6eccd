package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// smallLimits are limits small enough that a test can cross each with a short body.
func smallLimits(c *Config) {
	c.Limits = Limits{MaxShellBytes: 100, MaxCommandBytes: 100, MaxArgsBytes: 100, MaxEnvBytes: 100, MaxSpecBytes: 300,
		MaxBatchJobs: 3, MaxDAGRuns: 2, MaxPageSize: 5}
}

// TestSpecLimitsHoldOnEveryRoute: every route that takes a job spec refuses the same parts
// over the same limits, naming the field under the route's own path, and creates nothing
// (issue 12: the batch and DAG routes took a 10 MB shell that POST /v1/jobs refused).
func TestSpecLimitsHoldOnEveryRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, smallLimits)
	b.createJob(t, `{"name": "existing", "command": ["true"]}`)

	x := func(n int) string { return strings.Repeat("x", n) }
	parts := []struct {
		name  string
		spec  map[string]any // what the spec sets, besides what it runs
		field string         // the field named, "" for the whole spec
	}{
		{"shell", map[string]any{"shell": x(101)}, "shell"},
		{"command", map[string]any{"command": []string{x(50), x(50)}}, "command"}, // 51 + 51 bytes
		{"args", map[string]any{"shell": "true", "args": map[string]string{"a": x(100)}}, "args"},
		{"env", map[string]any{"shell": "true", "env": map[string]string{"A": x(98)}}, "env"}, // 1 + 98 + 2
		{"the whole spec", map[string]any{"shell": x(90), "args": map[string]string{"a": x(80)},
			"env": map[string]string{"A": x(90)}, "dir": x(90)}, ""},
	}
	routes := []struct {
		name, method, path string
		wrap               func(spec map[string]any) any
		prefix, whole      string
	}{
		{"POST /v1/jobs", "POST", "/v1/jobs", func(s map[string]any) any { return s }, "", "body"},
		{"POST /v1/jobs/batch", "POST", "/v1/jobs/batch",
			func(s map[string]any) any { return map[string]any{"jobs": []any{map[string]any{"shell": "true"}, s}} }, "jobs[1].", "jobs[1]"},
		{"POST /v1/dags", "POST", "/v1/dags",
			func(s map[string]any) any { return map[string]any{"runs": map[string]any{"a": s}} }, "runs.a.", "runs.a"},
		{"PUT /v1/jobs/{name}", "PUT", "/v1/jobs/new", func(s map[string]any) any { return s }, "", "body"},
		{"PATCH /v1/jobs/{id}", "PATCH", "/v1/jobs/existing", func(s map[string]any) any { return s }, "", "body"},
		{"PUT /v1/pipelines/{name}", "PUT", "/v1/pipelines/p",
			func(s map[string]any) any { return map[string]any{"steps": map[string]any{"s": s}} }, "steps.s.", "steps.s"},
		{"POST /v1/plan", "POST", "/v1/plan", func(s map[string]any) any { return s }, "", "body"},
	}
	jobs0, runs0 := b.counts(t)
	for _, rt := range routes {
		for _, p := range parts {
			t.Run(rt.name+"/"+p.name, func(t *testing.T) {
				r := b.do(t, rt.method, rt.path, rt.wrap(p.spec))
				require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
				want := rt.whole
				if p.field != "" {
					want = rt.prefix + p.field
				}
				require.Equal(t, []string{want}, r.fields(t))
			})
		}
	}
	jobs, runs := b.counts(t)
	require.Equal(t, [2]int{jobs0, runs0}, [2]int{jobs, runs}, "nothing was created")

	// At the limits, each part passes.
	r := b.do(t, "POST", "/v1/jobs", map[string]any{"shell": x(100), "env": map[string]string{"A": x(97)}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
}

// TestTenMegabyteShell is issue 12's case with the default limits: every route refuses a
// 10 MB shell string, as a body too large where the body limit is lower than that, else as
// the field.
func TestTenMegabyteShell(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shell := strings.Repeat("x", 10<<20)
	for _, tc := range []struct {
		path   string
		body   any
		status int
		field  string
	}{
		{"/v1/jobs", map[string]any{"shell": shell}, http.StatusRequestEntityTooLarge, ""},
		{"/v1/jobs/batch", map[string]any{"jobs": []any{map[string]any{"shell": shell}}}, http.StatusBadRequest, "jobs[0].shell"},
		{"/v1/dags", map[string]any{"runs": map[string]any{"a": map[string]any{"shell": shell}}}, http.StatusBadRequest, "runs.a.shell"},
	} {
		r := b.do(t, "POST", tc.path, tc.body)
		require.Equal(t, tc.status, r.status, "%s: %.300s", tc.path, r.body)
		if tc.field != "" {
			require.Equal(t, []string{tc.field}, r.fields(t), tc.path)
		}
	}
	jobs, runs := b.counts(t)
	require.Zero(t, jobs+runs)
}

// TestNestedKeyTemplate: issue 12's submission whose concurrency key nests loops is a 400
// naming concurrency.key on every route, and costs no more than a moment.
func TestNestedKeyTemplate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const key = "{{range 100}}{{range 100}}{{range 100}}{{range 100}}x{{end}}{{end}}{{end}}{{end}}"
	spec := map[string]any{"shell": "true", "concurrency": map[string]any{"key": key, "max": 1}}
	sched := map[string]any{"shell": "true", "concurrency": map[string]any{"key": key}, "schedule": map[string]any{"cron": "@hourly"}}
	for _, tc := range []struct {
		method, path string
		body         any
		field        string
	}{
		{"POST", "/v1/jobs", spec, "concurrency.key"},
		{"POST", "/v1/jobs/batch", map[string]any{"jobs": []any{spec}}, "jobs[0].concurrency.key"},
		{"POST", "/v1/dags", map[string]any{"runs": map[string]any{"a": spec}}, "runs.a.concurrency.key"},
		{"PUT", "/v1/jobs/cron", sched, "concurrency.key"},
		{"POST", "/v1/plan", spec, "concurrency.key"},
	} {
		r := b.do(t, tc.method, tc.path, tc.body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", tc.path, r.body)
		require.Equal(t, []string{tc.field}, r.fields(t), tc.path)
		require.Contains(t, r.problem(t).Errors[0].Message, "steps", tc.path)
	}

	// A disabled job renders its key at each trigger, with the trigger's args.
	b.createJob(t, `{"name": "off", "shell": "true", "enabled": false, "concurrency": {"key": "{{range .n}}{{range $.n}}{{end}}{{end}}x"}}`)
	r := b.do(t, "POST", "/v1/jobs/off/trigger", `{"args": {"n": [`+strings.Repeat("0,", 99)+`0]}}`)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.Equal(t, []string{"args"}, r.fields(t))
	require.Equal(t, "concurrency key: the template takes more than 500 steps to render (a step per loop iteration and per template call) (the job's concurrency key)",
		r.problem(t).Errors[0].Message)
	r = b.do(t, "POST", "/v1/jobs/off/trigger", `{"args": {"n": [1, 2]}}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
}

// TestRunArgsLimits: args over the limit are refused wherever a run gets them.
func TestRunArgsLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, smallLimits)
	b.createJob(t, `{"name": "j", "shell": "true", "enabled": false}`)
	b.putPipeline(t, "p", `{"steps": {"s": {"shell": "true"}}}`, http.StatusCreated)
	big := fmt.Sprintf(`{"args": {"a": %q}}`, strings.Repeat("x", 100))
	for _, path := range []string{"/v1/jobs/j/trigger", "/v1/pipelines/p/trigger"} {
		r := b.do(t, "POST", path, big)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", path, r.body)
		require.Equal(t, []string{"args"}, r.fields(t), path)
	}
	r := b.do(t, "PUT", "/v1/pipelines/p", `{"args": {"a": "`+strings.Repeat("x", 100)+`"}, "steps": {"s": {"shell": "true"}}}`)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.Equal(t, []string{"args"}, r.fields(t))
	_, runs := b.counts(t)
	require.Zero(t, runs)
}

// TestCountLimits: batches, DAGs and pages are capped by the configured limits.
func TestCountLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, smallLimits)
	job := map[string]any{"shell": "true"}
	r := b.do(t, "POST", "/v1/jobs/batch", map[string]any{"jobs": []any{job, job, job, job}})
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.Equal(t, []string{"jobs"}, r.fields(t))
	r = b.do(t, "POST", "/v1/dags", map[string]any{"runs": map[string]any{"a": job, "b": job, "c": job}})
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.Equal(t, []string{"runs"}, r.fields(t))

	named := func(name string) map[string]any { return map[string]any{"name": name, "shell": "true"} }
	r = b.do(t, "POST", "/v1/jobs/batch", map[string]any{"jobs": []any{named("a"), named("b"), named("c")}})
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	for _, path := range []string{"/v1/jobs", "/v1/runs"} {
		r = b.do(t, "GET", path+"?limit=6", nil)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", path, r.body)
		require.Equal(t, []string{"limit"}, r.fields(t))
		r = b.do(t, "GET", path+"?limit=5", nil)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", path, r.body)
		// Without ?limit= a page is the default 50, or the maximum when that is lower.
		r = b.do(t, "GET", path+"?limit=2", nil)
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		r.decode(t, &page)
		require.Len(t, page.Items, 2)
	}
}

// A worker's registration and heartbeat list every lease it holds: the body of a heartbeat
// with many more leases than MaxBodyBytes holds is read (a refusal would leave the worker
// unable to renew any of them), and one listing more than MaxHeldLeases is a field error.
func TestHeldLeasesBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "POST", "/v1/workers/register", `{"id": "big", "capacity": {"slots": 20000}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	refs := func(n int) []apitype.LeaseRef {
		held := make([]apitype.LeaseRef, n)
		for i := range held {
			held[i] = apitype.LeaseRef{RunID: fmt.Sprintf("%026d", i), Token: fmt.Sprintf("%036d", i)}
		}
		return held
	}
	held := refs(20000)
	body, err := json.Marshal(apitype.HeartbeatRequest{Held: held})
	require.NoError(t, err)
	require.Greater(t, int64(len(body)), DefaultLimits().MaxBodyBytes)
	r = b.do(t, "POST", "/v1/workers/big/heartbeat", string(body))
	require.Equal(t, http.StatusOK, r.status, "body: %.300s", r.body)
	var hb apitype.HeartbeatResponse
	r.decode(t, &hb)
	require.Len(t, hb.Lost, len(held), "leases the server never granted are lost")

	r = b.do(t, "POST", "/v1/workers/big/heartbeat", apitype.HeartbeatRequest{Held: refs(apitype.MaxHeldLeases + 1)})
	require.Equal(t, http.StatusBadRequest, r.status, "body: %.300s", r.body)
	require.Contains(t, string(r.body), "must list at most 100000 leases, got 100001")
}

// TestBodyLimits: the body caps are configurable and the batch routes get their own.
func TestBodyLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.Limits = Limits{MaxBodyBytes: 1000, MaxBatchBodyBytes: 5000} })
	pad := strings.Repeat(" ", 1000)
	r := b.do(t, "POST", "/v1/jobs", `{"shell": "true"}`+pad)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "body: %s", r.body)
	require.Contains(t, r.problem(t).Detail, "larger than 1000 bytes")
	r = b.do(t, "POST", "/v1/jobs/batch", `{"jobs": [{"shell": "true"}]}`+pad)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	r = b.do(t, "POST", "/v1/jobs/batch", `{"jobs": [{"shell": "true"}]}`+strings.Repeat(" ", 5000))
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "body: %s", r.body)
}
