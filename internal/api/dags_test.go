package api

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
)

// fieldError returns the problem's error on field, failing when there is none.
func fieldError(t *testing.T, p *apitype.Problem, field string) apitype.FieldError {
	t.Helper()
	for _, e := range p.Errors {
		if e.Field == field {
			return e
		}
	}
	require.Failf(t, "no error on the field", "%s; errors: %+v", field, p.Errors)
	return apitype.FieldError{}
}

func TestCreateJobDependsOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	up := b.createJob(t, `{"name": "extract", "command": ["true"]}`)

	down := b.createJob(t, `{"name": "load", "command": ["true"], "depends_on": [{"run": "`+up.Run.ID+`"}]}`)
	require.Equal(t, "waiting", down.Run.Status)
	require.Equal(t, string(model.PendingDependencies), down.Run.PendingCode)
	require.Equal(t, "waiting for 1 upstream run", down.Run.PendingReason, "the edges are in depends_on")
	want := []apitype.Dependency{{Run: up.Run.ID, Condition: "succeeded"}}
	require.Equal(t, want, down.Run.DependsOn, "the condition defaults to succeeded")
	require.Equal(t, want, b.getRun(t, down.Run.ID).DependsOn)
	require.Empty(t, b.getRun(t, up.Run.ID).DependsOn, "left out when none")

	// The upstream succeeds: the dependant is released.
	b.register(t, "w1")
	l := b.lease(t, "w1", 1)
	require.Len(t, l.Leases, 1)
	require.Equal(t, up.Run.ID, l.Leases[0].RunID)
	require.True(t, b.complete(t, apitype.Completion{RunID: up.Run.ID, Token: l.Leases[0].Token, Status: "succeeded"}).Accepted)
	require.Equal(t, "queued", b.getRun(t, down.Run.ID).Status)
	l = b.lease(t, "w1", 1)
	require.Equal(t, down.Run.ID, l.Leases[0].RunID)
	b.complete(t, apitype.Completion{RunID: down.Run.ID, Token: l.Leases[0].Token, Status: "succeeded"})

	// An upstream that failed already: the new run starts skipped, saying why.
	failed := b.createJob(t, `{"command": ["false"]}`)
	l = b.lease(t, "w1", 1)
	require.Equal(t, failed.Run.ID, l.Leases[0].RunID)
	b.complete(t, apitype.Completion{RunID: failed.Run.ID, Token: l.Leases[0].Token, Status: "failed"})
	skipped := b.createJob(t, `{"command": ["true"], "depends_on": [{"run": "`+failed.Run.ID+`", "condition": "succeeded"}]}`)
	require.Equal(t, "skipped", skipped.Run.Status)
	require.Contains(t, skipped.Run.Error, failed.Run.ID)
	onFailure := b.createJob(t, `{"command": ["true"], "depends_on": [{"run": "`+failed.Run.ID+`", "condition": "failed"}]}`)
	require.Equal(t, "queued", onFailure.Run.Status)

	jobs, runs := b.counts(t)
	bad := []struct {
		name, path, body, field, message string
	}{
		{"missing upstream", "/v1/jobs", `{"command": ["a"], "depends_on": [{"run": "` + up.Run.ID + `"}, {"run": "nope"}]}`,
			"depends_on[1].run", "no run with this id"},
		{"empty run", "/v1/jobs", `{"command": ["a"], "depends_on": [{"condition": "failed"}]}`, "depends_on[0].run", "required"},
		{"unknown condition", "/v1/jobs", `{"command": ["a"], "depends_on": [{"run": "` + up.Run.ID + `", "condition": "done"}]}`,
			"depends_on[0].condition", "succeeded, failed, finished"},
		{"ref outside a DAG", "/v1/jobs", `{"command": ["a"], "depends_on": [{"ref": "extract"}]}`, "depends_on[0].ref", "POST /v1/dags"},
		{"duplicate upstream", "/v1/jobs", `{"command": ["a"], "depends_on": [{"run": "` + up.Run.ID + `"}, {"run": "` + up.Run.ID + `", "condition": "finished"}]}`,
			"depends_on[1].run", "repeats depends_on[0]"},
		{"with a schedule", "/v1/jobs", `{"command": ["a"], "schedule": {"cron": "@daily"}, "depends_on": [{"run": "` + up.Run.ID + `"}]}`,
			"schedule", "depends_on"},
		{"with a concurrency limit", "/v1/jobs", `{"command": ["a"], "concurrency": {"policy": "queue"}, "depends_on": [{"run": "` + up.Run.ID + `"}]}`,
			"concurrency", "depends_on"},
		{"batch entry with a missing upstream", "/v1/jobs/batch", `{"jobs": [{"command": ["a"]}, {"command": ["a"], "depends_on": [{"run": "nope"}]}]}`,
			"jobs[1].depends_on[0].run", "no run with this id"},
		{"apply makes no run", "/v1/jobs/applied", `{"command": ["a"], "depends_on": [{"run": "` + up.Run.ID + `"}]}`,
			"depends_on", "POST /v1/jobs"},
	}
	for _, tt := range bad {
		method := "POST"
		if tt.path == "/v1/jobs/applied" {
			method = "PUT"
		}
		r := b.do(t, method, tt.path, tt.body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", tt.name, r.body)
		require.Contains(t, fieldError(t, r.problem(t), tt.field).Message, tt.message, tt.name)
	}
	j, n := b.counts(t)
	require.Equal(t, jobs, j, "bad input creates no job")
	require.Equal(t, runs, n, "bad input creates no run")

	// A batch may hold dependent jobs on existing runs.
	r := b.do(t, "POST", "/v1/jobs/batch", `{"jobs": [{"command": ["a"], "depends_on": [{"run": "`+up.Run.ID+`", "condition": "finished"}]}]}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var batch apitype.BatchCreateJobsResponse
	r.decode(t, &batch)
	require.Equal(t, "queued", batch.Items[0].Run.Status, "the upstream has finished")
	require.Equal(t, []apitype.Dependency{{Run: up.Run.ID, Condition: "finished"}}, batch.Items[0].Run.DependsOn)
}

// postDAG posts a DAG request and requires a 201.
func (b *testBundle) postDAG(t *testing.T, body any) apitype.DAGResponse {
	t.Helper()
	r := b.do(t, "POST", "/v1/dags", body)
	require.Equal(t, http.StatusCreated, r.status, "body: %.1000s", r.body)
	var out apitype.DAGResponse
	r.decode(t, &out)
	return out
}

func TestCreateDAG(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.createJob(t, `{"command": ["true"]}`)

	out := b.postDAG(t, `{"runs": {
		"extract":   {"name": "extract", "command": ["./extract"]},
		"transform": {"shell": "./transform", "depends_on": [{"ref": "extract"}]},
		"load":      {"handler": "load", "depends_on": [{"ref": "transform"}, {"run": "`+before.Run.ID+`", "condition": "finished"}]},
		"alert":     {"command": ["./page"], "depends_on": [{"ref": "transform", "condition": "failed"}]}
	}}`)
	require.Len(t, out.Runs, 4)
	require.Len(t, out.Jobs, 4)

	extract := b.getRun(t, out.Runs["extract"])
	require.Equal(t, "queued", extract.Status)
	require.Equal(t, "extract", extract.JobName, "the spec's name")
	require.Equal(t, out.Jobs["extract"], extract.JobID)
	transform := b.getRun(t, out.Runs["transform"])
	require.Equal(t, "waiting", transform.Status)
	require.Equal(t, transform.JobID, transform.JobName, "no name: the job's id, as POST /v1/jobs does")
	require.Equal(t, []apitype.Dependency{{Run: extract.ID, Condition: "succeeded"}}, transform.DependsOn)
	load := b.getRun(t, out.Runs["load"])
	require.Equal(t, "waiting", load.Status)
	require.ElementsMatch(t, []apitype.Dependency{
		{Run: transform.ID, Condition: "succeeded"}, {Run: before.Run.ID, Condition: "finished"},
	}, load.DependsOn)
	require.Equal(t, []apitype.Dependency{{Run: transform.ID, Condition: "failed"}}, b.getRun(t, out.Runs["alert"]).DependsOn)

	// Cancelling the upstream skips its dependants, down the chain; alert waits on a
	// failure, which a cancel is not.
	r := b.do(t, "POST", "/v1/runs/"+extract.ID+"/cancel", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	for _, name := range []string{"transform", "load", "alert"} {
		run := b.getRun(t, out.Runs[name])
		require.Equal(t, "skipped", run.Status, name)
		require.NotEmpty(t, run.Error, name)
	}

	// A namespace for every entry.
	out = b.postDAG(t, `{"namespace": "etl", "runs": {"a": {"name": "a", "command": ["true"]}, "b": {"namespace": "etl", "command": ["true"], "depends_on": [{"ref": "a"}]}}}`)
	require.Equal(t, "etl", b.getRun(t, out.Runs["b"]).Namespace)
	r = b.do(t, "GET", "/v1/jobs/a?namespace=etl", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
}

func TestCreateDAGErrorsCreateNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createJob(t, `{"name": "taken", "command": ["true"]}`)
	jobs, runs := b.counts(t)
	tests := []struct {
		name    string
		body    string
		status  int
		field   string
		message string
	}{
		{name: "ref to a missing entry", body: `{"runs": {"load": {"command": ["a"], "depends_on": [{"ref": "x"}]}}}`,
			field: "runs.load.depends_on[0].ref", message: `no entry named "x"`},
		{name: "self-edge", body: `{"runs": {"a": {"command": ["a"]}, "load": {"command": ["a"], "depends_on": [{"ref": "a"}, {"ref": "load"}]}}}`,
			field: "runs.load.depends_on[1].ref", message: "itself"},
		{name: "cycle", body: `{"runs": {
				"extract": {"command": ["a"]},
				"load": {"command": ["a"], "depends_on": [{"ref": "extract"}, {"ref": "transform"}]},
				"transform": {"command": ["a"], "depends_on": [{"ref": "load"}]},
				"report": {"command": ["a"], "depends_on": [{"ref": "transform"}]}}}`,
			field: "runs.load.depends_on[1].ref", message: "cycle: load -> transform -> load"},
		{name: "longer cycle", body: `{"runs": {"c": {"command": ["a"], "depends_on": [{"ref": "a"}]}, "a": {"command": ["a"], "depends_on": [{"ref": "b"}]}, "b": {"command": ["a"], "depends_on": [{"ref": "c"}]}}}`,
			field: "runs.a.depends_on[0].ref", message: "cycle: a -> b -> c -> a"},
		{name: "ref and run", body: `{"runs": {"a": {"command": ["a"]}, "b": {"command": ["a"], "depends_on": [{"ref": "a", "run": "r"}]}}}`,
			field: "runs.b.depends_on[0]", message: "not both"},
		{name: "neither ref nor run", body: `{"runs": {"b": {"command": ["a"], "depends_on": [{"condition": "failed"}]}}}`,
			field: "runs.b.depends_on[0]", message: "ref"},
		{name: "unknown condition", body: `{"runs": {"a": {"command": ["a"]}, "b": {"command": ["a"], "depends_on": [{"ref": "a", "condition": "maybe"}]}}}`,
			field: "runs.b.depends_on[0].condition", message: "succeeded, failed, finished"},
		{name: "duplicate ref", body: `{"runs": {"a": {"command": ["a"]}, "b": {"command": ["a"], "depends_on": [{"ref": "a"}, {"ref": "a", "condition": "finished"}]}}}`,
			field: "runs.b.depends_on[1].ref", message: "repeats depends_on[0]"},
		{name: "missing upstream run", body: `{"runs": {"b": {"command": ["a"], "depends_on": [{"run": "nope"}]}}}`,
			field: "runs.b.depends_on[0].run", message: "no run with this id"},
		{name: "schedule", body: `{"runs": {"a": {"command": ["a"], "schedule": {"cron": "@daily"}}}}`,
			field: "runs.a.schedule", message: "schedule"},
		{name: "disabled", body: `{"runs": {"a": {"command": ["a"], "enabled": false}}}`, field: "runs.a.enabled", message: "disabled"},
		{name: "concurrency with dependencies", body: `{"runs": {"a": {"command": ["a"]}, "b": {"command": ["a"], "concurrency": {"max": 1}, "depends_on": [{"ref": "a"}]}}}`,
			field: "runs.b.concurrency", message: "concurrency"},
		{name: "bad job field", body: `{"runs": {"a": {"command": ["a"], "priority": 5000}}}`, field: "runs.a.priority", message: "between"},
		{name: "nothing to run", body: `{"runs": {"a": {}}}`, field: "runs.a.command", message: "required"},
		{name: "empty", body: `{"runs": {}}`, field: "runs", message: "at least one"},
		{name: "no runs", body: `{}`, field: "runs", message: "at least one"},
		{name: "bad entry name", body: `{"runs": {"a b": {"command": ["a"]}}}`, field: `runs["a b"]`, message: "entry names"},
		{name: "other namespace", body: `{"namespace": "etl", "runs": {"a": {"namespace": "other", "command": ["a"]}}}`,
			field: "runs.a.namespace", message: "etl"},
		{name: "same name twice", body: `{"runs": {"a": {"name": "x", "command": ["a"]}, "b": {"name": "x", "command": ["a"]}}}`,
			field: "runs.b.name", message: "runs.a"},
		{name: "unknown field", body: `{"runs": {"a": {"command": ["a"], "depends_on": [{"ref": "b", "when": "now"}]}}}`,
			field: "runs.a.depends_on[0].when", message: "unknown"},
		{name: "name taken", body: `{"runs": {"a": {"command": ["a"]}, "b": {"name": "taken", "command": ["a"], "depends_on": [{"ref": "a"}]}}}`,
			status: http.StatusConflict, field: "runs.b.name", message: "already exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.do(t, "POST", "/v1/dags", tt.body)
			want := tt.status
			if want == 0 {
				want = http.StatusBadRequest
			}
			require.Equal(t, want, r.status, "body: %s", r.body)
			require.Contains(t, fieldError(t, r.problem(t), tt.field).Message, tt.message)
		})
	}
	j, n := b.counts(t)
	require.Equal(t, jobs, j, "no job created")
	require.Equal(t, runs, n, "no run created")
}

// TestCreateDAGLarge sends the DAGs the endpoint must take in one request: 10,000 runs
// fanning out from one and back into one, and a 1,000-deep chain listed downstream first.
func TestCreateDAGLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 10000
	var buf bytes.Buffer
	buf.WriteString(`{"runs": {"root": {"handler": "noop"}, "sink": {"handler": "noop", "depends_on": [`)
	for i := range n - 2 {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"ref": "m%05d"}`, i)
	}
	buf.WriteString(`]}`)
	for i := range n - 2 {
		fmt.Fprintf(&buf, `, "m%05d": {"handler": "noop", "args": {"i": %d}, "depends_on": [{"ref": "root"}]}`, i, i)
	}
	buf.WriteString(`}}`)
	start := time.Now()
	out := b.postDAG(t, buf.Bytes())
	t.Logf("fan-out/fan-in of %d runs (%d bytes) created in %s", n, buf.Len(), time.Since(start))
	require.Len(t, out.Runs, n)
	require.Equal(t, "queued", b.getRun(t, out.Runs["root"]).Status)
	sink := b.getRun(t, out.Runs["sink"])
	require.Equal(t, "waiting", sink.Status)
	require.Len(t, sink.DependsOn, n-2)
	require.Contains(t, sink.PendingReason, fmt.Sprint(n-2))

	const depth = 1000
	chain := apitype.DAGRequest{Namespace: "chain", Runs: map[string]apitype.JobSpec{}}
	for i := range depth {
		spec := apitype.JobSpec{Handler: "noop"}
		if i < depth-1 {
			spec.DependsOn = []apitype.Dependency{{Ref: fmt.Sprintf("s%04d", i+1)}} // s0000 is the last
		}
		chain.Runs[fmt.Sprintf("s%04d", i)] = spec
	}
	start = time.Now()
	out = b.postDAG(t, chain)
	t.Logf("chain of %d runs created in %s", depth, time.Since(start))
	require.Equal(t, "queued", b.getRun(t, out.Runs[fmt.Sprintf("s%04d", depth-1)]).Status)
	last := b.getRun(t, out.Runs["s0000"])
	require.Equal(t, "waiting", last.Status)
	require.Equal(t, []apitype.Dependency{{Run: out.Runs["s0001"], Condition: "succeeded"}}, last.DependsOn)
}

func TestCreateDAGIdempotencyKeyTaken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createJob(t, `{"command": ["true"], "idempotency_key": "k1"}`)
	jobs, runs := b.counts(t)
	r := b.do(t, "POST", "/v1/dags", `{"runs": {"a": {"command": ["a"]}, "b": {"command": ["a"], "idempotency_key": "k1", "depends_on": [{"ref": "a"}]}}}`)
	require.Equal(t, http.StatusConflict, r.status, "body: %s", r.body)
	require.Contains(t, r.problem(t).Detail, "k1")
	j, n := b.counts(t)
	require.Equal(t, jobs, j, "no job created")
	require.Equal(t, runs, n, "no run created")

	// A root may have a concurrency limit; only runs with dependencies may not.
	out := b.postDAG(t, `{"runs": {"a": {"command": ["a"], "concurrency": {"policy": "queue"}}, "b": {"command": ["a"], "depends_on": [{"ref": "a"}]}}}`)
	require.Equal(t, "queued", b.getRun(t, out.Runs["a"]).Status)
	require.Equal(t, "waiting", b.getRun(t, out.Runs["b"]).Status)
}
