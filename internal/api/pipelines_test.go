package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// etlPipeline is a fan-out, fan-in pipeline: extract -> [clean-a, clean-b] -> load, and an
// alert when load fails.
const etlPipeline = `{
	"schedule": {"cron": "0 2 * * *", "timezone": "Europe/Berlin"},
	"args": {"source": "s3", "day": "pipeline"},
	"steps": {
		"load":    {"command": ["./load"], "depends_on": [{"ref": "clean-a"}, {"ref": "clean-b"}]},
		"clean-b": {"shell": "./clean b", "depends_on": [{"ref": "extract"}]},
		"extract": {"command": ["./extract"], "retry": {"max_attempts": 1}},
		"clean-a": {"shell": "./clean a", "depends_on": [{"ref": "extract"}]},
		"alert":   {"handler": "page", "depends_on": [{"ref": "load", "condition": "failed"}]}
	}
}`

// putPipeline sends PUT /v1/pipelines/{name} and requires status.
func (b *testBundle) putPipeline(t *testing.T, name, body string, status int) apitype.Pipeline {
	t.Helper()
	r := b.do(t, "PUT", "/v1/pipelines/"+name, body)
	require.Equal(t, status, r.status, "body: %s", r.body)
	var out apitype.Pipeline
	r.decode(t, &out)
	return out
}

// pipelineRun sends a call answered by a pipeline run and requires status.
func (b *testBundle) pipelineRun(t *testing.T, method, path string, body any, status int) apitype.PipelineRun {
	t.Helper()
	r := b.do(t, method, path, body)
	require.Equal(t, status, r.status, "body: %s", r.body)
	var out apitype.PipelineRun
	r.decode(t, &out)
	return out
}

// finish leases the queued runs (at most max) and completes each of them with the status
// that outcome gives its run (succeeded by default); it returns the run ids it completed.
func (b *testBundle) finish(t *testing.T, max int, outcome map[string]string) []string {
	t.Helper()
	var done []string
	for _, l := range b.lease(t, "w1", max).Leases {
		st := outcome[l.RunID]
		if st == "" {
			st = "succeeded"
		}
		require.True(t, b.complete(t, apitype.Completion{RunID: l.RunID, Token: l.Token, Status: st}).Accepted)
		done = append(done, l.RunID)
	}
	return done
}

// getPipeline reads a pipeline, requiring a 200.
func (b *testBundle) getPipeline(t *testing.T, name string) apitype.Pipeline {
	t.Helper()
	r := b.do(t, "GET", "/v1/pipelines/"+name, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var out apitype.Pipeline
	r.decode(t, &out)
	return out
}

func stepStatuses(pr apitype.PipelineRun) map[string]string {
	out := map[string]string{}
	for name, r := range pr.Steps {
		out[name] = r.Status
	}
	return out
}

func TestPutPipeline(t *testing.T) {
	t.Parallel()
	b := setup(t)

	pl := b.putPipeline(t, "etl", etlPipeline, http.StatusCreated)
	require.NotEmpty(t, pl.ID)
	require.Equal(t, "default", pl.Namespace)
	require.True(t, pl.Enabled)
	require.JSONEq(t, `{"source": "s3", "day": "pipeline"}`, string(pl.Args))
	require.Equal(t, "0 2 * * *", pl.Schedule.Cron)
	require.NotNil(t, pl.NextFireAt)
	require.Len(t, pl.NextFireTimes, 5)
	names := make([]string, len(pl.Steps))
	for i, s := range pl.Steps {
		names[i] = s.Name
		require.Equal(t, "etl."+s.Name, s.JobName)
		require.NotEmpty(t, s.JobID)
	}
	require.Equal(t, []string{"extract", "clean-a", "clean-b", "load", "alert"}, names, "upstream first, else by name")
	require.Equal(t, []apitype.Dependency{{Ref: "clean-a", Condition: "succeeded"}, {Ref: "clean-b", Condition: "succeeded"}}, pl.Steps[3].DependsOn)
	require.Equal(t, []apitype.Dependency{{Ref: "load", Condition: "failed"}}, pl.Steps[4].DependsOn)

	// The steps' jobs exist, named pipeline.step, and have no run of their own.
	r := b.do(t, "GET", "/v1/jobs/etl.load", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var job apitype.Job
	r.decode(t, &job)
	require.Equal(t, pl.Steps[3].JobID, job.ID)
	require.Equal(t, []string{"./load"}, job.Command)
	jobs, runs := b.counts(t)
	require.Equal(t, 5, jobs)
	require.Zero(t, runs)

	// Replaced: same id and step jobs, the new definition.
	replaced := strings.Replace(etlPipeline, `"schedule": {"cron": "0 2 * * *", "timezone": "Europe/Berlin"},`, `"name": "etl", "enabled": false,`, 1)
	replaced = strings.Replace(replaced, `"command": ["./extract"]`, `"command": ["./extract", "--fast"]`, 1)
	again := b.putPipeline(t, "etl", replaced, http.StatusOK)
	require.Equal(t, pl.ID, again.ID)
	require.False(t, again.Enabled)
	require.Nil(t, again.Schedule)
	require.Nil(t, again.NextFireAt)
	require.Equal(t, pl.Steps, again.Steps)
	r = b.do(t, "GET", "/v1/jobs/etl.extract", nil)
	r.decode(t, &job)
	require.Equal(t, []string{"./extract", "--fast"}, job.Command)

	// Dry run: checked, nothing written.
	dry := b.putPipeline(t, "etl?dry_run=true", etlPipeline, http.StatusOK)
	require.Equal(t, pl.ID, dry.ID)
	require.Equal(t, pl.Steps, dry.Steps)
	require.False(t, b.getPipeline(t, "etl").Enabled, "unchanged by the dry run")
	dry = b.putPipeline(t, "fresh?dry_run=true", etlPipeline, http.StatusOK)
	require.Empty(t, dry.ID, "would be created")
	require.Empty(t, dry.Steps[0].JobID)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/v1/pipelines/fresh", nil).status)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/v1/jobs/fresh.load", nil).status)

	// A step dropped from the definition keeps its job (and history); that job is no longer
	// the pipeline's, so the step cannot come back while the job exists.
	less := b.putPipeline(t, "etl", `{"steps": {"extract": {"command": ["./extract"]},
		"load": {"command": ["./load"], "depends_on": [{"ref": "extract", "condition": "finished"}]}}}`, http.StatusOK)
	require.Equal(t, []apitype.Dependency{{Ref: "extract", Condition: "finished"}}, less.Steps[1].DependsOn)
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/v1/jobs/etl.alert", nil).status)
	r = b.do(t, "PUT", "/v1/pipelines/etl", etlPipeline)
	require.Equal(t, http.StatusConflict, r.status, "body: %s", r.body)
	require.Contains(t, fieldError(t, r.problem(t), "steps.alert").Message, "delete it")
	for _, name := range []string{"alert", "clean-a", "clean-b"} {
		require.Equal(t, http.StatusOK, b.do(t, "DELETE", "/v1/jobs/etl."+name, nil).status)
	}
	got := b.putPipeline(t, "etl", etlPipeline, http.StatusOK)
	require.Len(t, got.Steps, 5)

	// Read, list, namespaces.
	require.Equal(t, pl.ID, b.getPipeline(t, "etl").ID)
	b.putPipeline(t, "etl?namespace=ml", `{"namespace": "ml", "steps": {"train": {"handler": "train"}}}`, http.StatusCreated)
	var list apitype.PipelineList
	r = b.do(t, "GET", "/v1/pipelines?namespace=ml", nil)
	require.Equal(t, http.StatusOK, r.status)
	r.decode(t, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, "ml", list.Items[0].Namespace)
	r = b.do(t, "GET", "/v1/pipelines", nil)
	r.decode(t, &list)
	require.Len(t, list.Items, 2, "every namespace's without ?namespace=")

	// Deleted with its steps' jobs: the name can be used again.
	r = b.do(t, "DELETE", "/v1/pipelines/etl", nil)
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	require.Empty(t, r.body)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/v1/pipelines/etl", nil).status)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/v1/jobs/etl.load", nil).status)
	require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", "/v1/pipelines/etl", nil).status)
	b.putPipeline(t, "etl", etlPipeline, http.StatusCreated)
}

func TestPutPipelineErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createJob(t, `{"name": "etl.extract", "command": ["true"]}`)
	b.putPipeline(t, "owned", `{"steps": {"a": {"command": ["true"]}}}`, http.StatusCreated)
	jobs, runs := b.counts(t)

	tests := []struct {
		name, path, body string
		field, message   string
	}{
		{"ref to a missing step", "p", `{"steps": {"load": {"command": ["a"], "depends_on": [{"ref": "x"}]}}}`,
			"steps.load.depends_on[0].ref", `no step named "x"`},
		{"self-edge", "p", `{"steps": {"a": {"command": ["a"]}, "load": {"command": ["a"], "depends_on": [{"ref": "a"}, {"ref": "load"}]}}}`,
			"steps.load.depends_on[1].ref", "self-edge"},
		{"cycle", "p", `{"steps": {
				"extract": {"command": ["a"]},
				"load": {"command": ["a"], "depends_on": [{"ref": "extract"}, {"ref": "transform"}]},
				"transform": {"command": ["a"], "depends_on": [{"ref": "load"}]}}}`,
			"steps.load.depends_on[1].ref", "cycle: load -> transform -> load"},
		{"run instead of ref", "p", `{"steps": {"a": {"command": ["a"], "depends_on": [{"run": "r1"}]}}}`,
			"steps.a.depends_on[0].run", "ref"},
		{"no ref", "p", `{"steps": {"a": {"command": ["a"], "depends_on": [{"condition": "failed"}]}}}`,
			"steps.a.depends_on[0].ref", "required"},
		{"unknown condition", "p", `{"steps": {"a": {"command": ["a"]}, "b": {"command": ["a"], "depends_on": [{"ref": "a", "condition": "maybe"}]}}}`,
			"steps.b.depends_on[0].condition", "succeeded, failed, finished"},
		{"a step's schedule", "p", `{"steps": {"a": {"command": ["a"], "schedule": {"cron": "@daily"}}}}`, "steps.a.schedule", "pipeline"},
		{"a step's concurrency", "p", `{"steps": {"a": {"command": ["a"], "concurrency": {"policy": "forbid"}}}}`, "steps.a.concurrency", "concurrency"},
		{"a disabled step", "p", `{"steps": {"a": {"command": ["a"], "enabled": false}}}`, "steps.a.enabled", "disabled"},
		{"a step's name", "p", `{"steps": {"a": {"name": "x", "command": ["a"]}}}`, "steps.a.name", `"p.a"`},
		{"a step's idempotency key", "p", `{"steps": {"a": {"idempotency_key": "k", "command": ["a"]}}}`, "steps.a.idempotency_key", "idempotency_key"},
		{"a step's run_at", "p", `{"steps": {"a": {"delay": "1m", "command": ["a"]}}}`, "steps.a.run_at", "delay"},
		{"a bad step spec", "p", `{"steps": {"a": {"retry": {"max_attempts": -1}}}}`, "steps.a.command", "required"},
		{"a bad step name", "p", `{"steps": {"a b": {"command": ["a"]}}}`, `steps["a b"]`, "step names"},
		{"a step job name too long", "p", `{"steps": {"` + string(make127('s')) + `": {"command": ["a"]}}}`,
			"steps." + string(make127('s')), "would be named"},
		{"bad pipeline name", "-bad", `{"steps": {"a": {"command": ["a"]}}}`, "name", "letters"},
		{"name not the path's", "p", `{"name": "q", "steps": {"a": {"command": ["a"]}}}`, "name", "path"},
		{"bad schedule", "p", `{"schedule": {"cron": "61 * * * *"}, "steps": {"a": {"command": ["a"]}}}`, "schedule.cron", ""},
		{"bad misfire", "p", `{"schedule": {"cron": "@daily", "misfire": "later"}, "steps": {"a": {"command": ["a"]}}}`, "schedule.misfire", "run_once"},
		{"args not an object", "p", `{"args": [1], "steps": {"a": {"command": ["a"]}}}`, "args", "object"},
		{"no steps", "p", `{"steps": {}}`, "steps", "at least one"},
		{"unknown field", "p", `{"stepz": {}}`, "stepz", "unknown"},
		{"namespace not the call's", "p", `{"namespace": "other", "steps": {"a": {"command": ["a"]}}}`, "namespace", "?namespace="},
	}
	for _, tt := range tests {
		r := b.do(t, "PUT", "/v1/pipelines/"+tt.path, tt.body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", tt.name, r.body)
		require.Contains(t, fieldError(t, r.problem(t), tt.field).Message, tt.message, tt.name)
	}

	// A step's job name taken by a job the pipeline does not own.
	r := b.do(t, "PUT", "/v1/pipelines/etl", `{"steps": {"extract": {"command": ["a"]}, "load": {"command": ["a"], "depends_on": [{"ref": "extract"}]}}}`)
	require.Equal(t, http.StatusConflict, r.status, "body: %s", r.body)
	require.Contains(t, fieldError(t, r.problem(t), "steps.extract").Message, `"etl.extract"`)
	// Also when another pipeline owns it: "owned.a" as a step of a pipeline "owned" ... is
	// its own; a pipeline "owned.a"'s step would be "owned.a.x", so clash through a job.
	b.createJob(t, `{"name": "x.a", "command": ["true"]}`)
	r = b.do(t, "PUT", "/v1/pipelines/x?dry_run=true", `{"steps": {"a": {"command": ["a"]}}}`)
	require.Equal(t, http.StatusConflict, r.status, "a dry run checks names too: %s", r.body)

	j, n := b.counts(t)
	require.Equal(t, jobs+1, j, "bad input creates no job (one made by the test)")
	require.Equal(t, runs+1, n, "bad input creates no run (one made by the test)")
	r = b.do(t, "GET", "/v1/pipelines", nil)
	var list apitype.PipelineList
	r.decode(t, &list)
	require.Len(t, list.Items, 1)
}

func make127(c byte) []byte {
	b := make([]byte, 127)
	for i := range b {
		b[i] = c
	}
	return b
}

func TestPipelineRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "w1")
	b.putPipeline(t, "etl", etlPipeline, http.StatusCreated)
	base := "/v1/pipelines/etl/runs/"

	// A trigger: a run per step, extract queued, the rest waiting; args merged.
	pr := b.pipelineRun(t, "POST", "/v1/pipelines/etl/trigger", `{"args": {"day": "2026-11-22"}}`, http.StatusCreated)
	require.Equal(t, "running", pr.Status)
	require.Equal(t, "manual", pr.Trigger)
	require.Equal(t, "etl", pr.PipelineName)
	require.JSONEq(t, `{"source": "s3", "day": "2026-11-22"}`, string(pr.Args))
	require.Equal(t, map[string]string{"extract": "queued", "clean-a": "waiting", "clean-b": "waiting", "load": "waiting", "alert": "waiting"},
		stepStatuses(pr))
	for name, r := range pr.Steps {
		require.Equal(t, "etl."+name, r.JobName)
		require.Equal(t, "pipeline", r.Trigger)
		require.JSONEq(t, `{"source": "s3", "day": "2026-11-22"}`, string(r.Args), name)
	}
	require.Equal(t, "waiting_on_dependencies", pr.Steps["load"].PendingCode)
	require.Len(t, pr.Steps["load"].DependsOn, 2)

	// Retry of a run that has not ended is refused.
	r := b.do(t, "POST", base+pr.ID+"/retry", nil)
	require.Equal(t, http.StatusConflict, r.status, "body: %s", r.body)

	// Through the worker protocol: extract, then both cleans, then load; alert is skipped
	// (load did not fail) and the whole succeeds.
	require.Equal(t, []string{pr.Steps["extract"].ID}, b.finish(t, 10, nil))
	require.ElementsMatch(t, []string{pr.Steps["clean-a"].ID, pr.Steps["clean-b"].ID}, b.finish(t, 10, nil))
	require.Equal(t, "running", b.pipelineRun(t, "GET", base+pr.ID, nil, http.StatusOK).Status)
	require.Equal(t, []string{pr.Steps["load"].ID}, b.finish(t, 10, nil))
	done := b.pipelineRun(t, "GET", base+pr.ID, nil, http.StatusOK)
	require.Equal(t, "succeeded", done.Status, "a skipped alert does not fail the whole")
	require.Equal(t, map[string]string{"extract": "succeeded", "clean-a": "succeeded", "clean-b": "succeeded", "load": "succeeded", "alert": "skipped"},
		stepStatuses(done))
	r = b.do(t, "POST", base+pr.ID+"/retry", `{}`)
	require.Equal(t, http.StatusConflict, r.status, "nothing to retry: %s", r.body)

	// A failing step: clean-b fails, load is skipped, alert too (load did not fail): failed.
	pr2 := b.pipelineRun(t, "POST", "/v1/pipelines/etl/trigger", nil, http.StatusCreated)
	require.JSONEq(t, `{"source": "s3", "day": "pipeline"}`, string(pr2.Args), "the pipeline's own args")
	b.finish(t, 10, nil)
	b.finish(t, 10, map[string]string{pr2.Steps["clean-b"].ID: "failed"})
	failed := b.pipelineRun(t, "GET", base+pr2.ID, nil, http.StatusOK)
	require.Equal(t, "failed", failed.Status)
	require.Equal(t, map[string]string{"extract": "succeeded", "clean-a": "succeeded", "clean-b": "failed", "load": "skipped", "alert": "skipped"},
		stepStatuses(failed))

	// Retry from an unknown step: 404; from clean-b: clean-b and what is downstream run again.
	r = b.do(t, "POST", base+pr2.ID+"/retry", `{"from": "nope"}`)
	require.Equal(t, http.StatusNotFound, r.status, "body: %s", r.body)
	again := b.pipelineRun(t, "POST", base+pr2.ID+"/retry", `{"from": "clean-b"}`, http.StatusOK)
	require.Equal(t, "running", again.Status)
	require.Equal(t, "succeeded", again.Steps["clean-a"].Status, "upstream of the retried step: kept")
	require.Equal(t, "queued", again.Steps["clean-b"].Status)
	require.Equal(t, "waiting", again.Steps["load"].Status)
	require.Equal(t, []string{pr2.Steps["clean-b"].ID}, b.finish(t, 10, nil))
	require.Equal(t, []string{pr2.Steps["load"].ID}, b.finish(t, 10, nil))
	require.Equal(t, "succeeded", b.pipelineRun(t, "GET", base+pr2.ID, nil, http.StatusOK).Status)

	// Cancel: every step that has not ended.
	pr3 := b.pipelineRun(t, "POST", "/v1/pipelines/etl/trigger", `{}`, http.StatusCreated)
	cancelled := b.pipelineRun(t, "POST", base+pr3.ID+"/cancel", nil, http.StatusOK)
	require.Equal(t, "cancelled", cancelled.Status)
	require.Equal(t, "cancelled", cancelled.Steps["extract"].Status)
	for name, st := range stepStatuses(cancelled) {
		require.Contains(t, []string{"cancelled", "skipped"}, st, name)
	}
	// A whole retry runs the cancelled steps again.
	retried := b.pipelineRun(t, "POST", base+pr3.ID+"/retry", nil, http.StatusOK)
	require.Equal(t, "running", retried.Status)
	require.Equal(t, "queued", retried.Steps["extract"].Status)
	b.pipelineRun(t, "POST", base+pr3.ID+"/cancel", nil, http.StatusOK)

	// The list, newest first, paged.
	var list apitype.PipelineRunList
	r = b.do(t, "GET", "/v1/pipelines/etl/runs?limit=2", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r.decode(t, &list)
	require.Len(t, list.Items, 2)
	require.Equal(t, pr3.ID, list.Items[0].ID)
	require.NotEmpty(t, list.NextCursor)
	r = b.do(t, "GET", "/v1/pipelines/etl/runs?limit=2&cursor="+list.NextCursor, nil)
	r.decode(t, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, pr.ID, list.Items[0].ID)
	require.Equal(t, "succeeded", list.Items[0].Status)
	require.Equal(t, http.StatusBadRequest, b.do(t, "GET", "/v1/pipelines/etl/runs?limit=0", nil).status)

	// A run of another pipeline, an unknown run or pipeline: 404.
	b.putPipeline(t, "other", `{"steps": {"a": {"command": ["a"]}}}`, http.StatusCreated)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/v1/pipelines/other/runs/"+pr.ID, nil).status)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", "/v1/pipelines/other/runs/"+pr.ID+"/cancel", nil).status)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", base+"nope", nil).status)
	require.Equal(t, http.StatusNotFound, b.do(t, "POST", "/v1/pipelines/nope/trigger", nil).status)

	// Trigger args must be an object.
	r = b.do(t, "POST", "/v1/pipelines/etl/trigger", `{"args": "day"}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, []string{"args"}, r.fields(t))
}

func TestPipelineWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.putPipeline(t, "etl", etlPipeline, http.StatusCreated)
	r := b.do(t, "POST", "/v1/pipelines/etl/webhook", nil)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var sec apitype.WebhookSecret
	r.decode(t, &sec)
	require.NotEmpty(t, sec.Secret)
	require.NotEmpty(t, sec.PipelineID)
	require.Empty(t, sec.JobID)
	require.Equal(t, "/v1/hooks/pipelines/etl", sec.Path)

	body := []byte(`{"day": "from-hook"}`)
	hook := func(sig string, body []byte) *response {
		h := http.Header{}
		if sig != "" {
			h.Set(apitype.WebhookSignatureHeader, sig)
		}
		return b.doCtx(t, t.Context(), "POST", sec.Path, body, h)
	}
	_, runs0 := b.counts(t)
	for _, bad := range []string{"", apitype.WebhookSignature("wrong", body), apitype.WebhookSignature(sec.Secret, []byte(`{}`))} {
		r = hook(bad, body)
		require.Equal(t, http.StatusUnauthorized, r.status, "signature %q: %s", bad, r.body)
	}
	_, runs := b.counts(t)
	require.Equal(t, runs0, runs, "refused calls start nothing")

	r = hook(apitype.WebhookSignature(sec.Secret, body), body)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var pr apitype.PipelineRun
	r.decode(t, &pr)
	require.Equal(t, "event", pr.Trigger)
	require.JSONEq(t, `{"source": "s3", "day": "from-hook"}`, string(pr.Args), "the body over the pipeline's args")
	require.Len(t, pr.Steps, 5)
	r = hook(apitype.WebhookSignature(sec.Secret, []byte(`[1]`)), []byte(`[1]`))
	require.Equal(t, http.StatusBadRequest, r.status, "args must be an object")
}
