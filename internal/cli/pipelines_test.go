package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const cliPipeline = `{"id":"p1","namespace":"default","name":"etl","enabled":true,
	"schedule":{"cron":"0 2 * * *","timezone":"Europe/Berlin"},"args":{"source":"s3"},
	"steps":[{"name":"extract","job_id":"j1","job_name":"etl.extract"},
		{"name":"load","job_id":"j2","job_name":"etl.load","depends_on":[{"ref":"extract","condition":"succeeded"},{"ref":"check","condition":"finished"}]}],
	"next_fire_at":"2030-01-03T01:00:00Z","next_fire_times":["2030-01-03T01:00:00Z"],
	"created_at":"2030-01-02T11:00:00Z","updated_at":"2030-01-02T11:00:00Z"}`

// cliPipelineRun has its steps' runs out of order in the map's text: the view prints them
// upstream first.
func cliPipelineRun(status, loadStatus string) string {
	return `{"id":"pr1","pipeline_id":"p1","pipeline_name":"etl","namespace":"default","status":"` + status + `",
	"trigger":"manual","scheduled_for":"2030-01-02T11:59:00Z","args":{"day":"mon"},"created_at":"2030-01-02T11:59:00Z",
	"steps":{
		"load":{"id":"r3","job_name":"etl.load","status":"` + loadStatus + `","attempt":1,"max_attempts":1,"depends_on":[{"run":"r2"}],"error":""},
		"extract":{"id":"r1","job_name":"etl.extract","status":"succeeded","attempt":1,"max_attempts":1,
			"started_at":"2030-01-02T11:59:00Z","finished_at":"2030-01-02T11:59:02Z"},
		"transform":{"id":"r2","job_name":"etl.transform","status":"succeeded","attempt":1,"max_attempts":1,"depends_on":[{"run":"r1"}]}}}`
}

func TestPipelineCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	etl := write("etl.yaml", `name: etl
schedule: {cron: "0 2 * * *"}
steps:
  extract: {command: [./extract.sh]}
  load:
    shell: ./load.sh
    depends_on: [{ref: extract}]
`)
	etlBody := `{"name":"etl","schedule":{"cron":"0 2 * * *"},"steps":{"extract":{"command":["./extract.sh"]},
		"load":{"shell":"./load.sh","depends_on":[{"ref":"extract"}]}}}`
	noName := write("noname.yaml", "steps: {a: {command: [x]}}\n")
	bad := write("bad.yaml", "name: etl\nsteps: {a: {comand: [x]}}\n")
	problem := `{"title":"Bad Request","status":400,"detail":"1 invalid field(s); nothing was created",
		"errors":[{"field":"steps.load.depends_on[0].ref","message":"cycle: load -> transform -> load"}]}`

	runView := `Pipeline run:   pr1
Pipeline:       etl
Status:         succeeded
Trigger:        manual
Args:           {"day":"mon"}
Scheduled for:  2030-01-02 11:59:00 (1m ago)
Created:        2030-01-02 11:59:00 (1m ago)

STEP       RUN  STATUS     ATTEMPT  STARTED  DURATION  ERROR
extract    r1   succeeded  1/1      1m ago   2s        -
transform  r2   succeeded  1/1      -        -         -
load       r3   succeeded  1/1      -        -         -
`
	runCLICases(t, []cliCase{
		{
			name: "webhook",
			args: []string{"pipelines", "webhook", "etl"},
			exchanges: []exchange{{method: "POST", path: "/v1/pipelines/etl/webhook", status: 201,
				answer: `{"pipeline_id":"p1","secret":"s3cret","path":"/v1/hooks/pipelines/etl","header":"X-Stint-Signature"}`}},
			stdoutHas: []string{"s3cret", "/v1/hooks/pipelines/etl", "X-Stint-Signature: sha256="},
		},
		{
			name:      "list",
			args:      []string{"pipelines", "list"},
			exchanges: []exchange{{method: "GET", path: "/v1/pipelines", answer: `{"items":[` + cliPipeline + `]}`}},
			stdout:    "NAME  ID  STEPS  SCHEDULE                   ENABLED  NEXT\netl   p1  2      0 2 * * * (Europe/Berlin)  yes      in 13h\n",
		},
		{
			name:      "list in a namespace, --json",
			args:      []string{"--namespace", "ml", "pipelines", "ls", "--json"},
			exchanges: []exchange{{method: "GET", path: "/v1/pipelines", query: "namespace=ml", answer: `{"items":[]}`}},
			stdout:    "{\n  \"items\": []\n}\n",
		},
		{
			name:      "get",
			args:      []string{"pipelines", "get", "etl"},
			exchanges: []exchange{{method: "GET", path: "/v1/pipelines/etl", answer: cliPipeline}},
			stdoutHas: []string{"Name:        etl", "Schedule:    0 2 * * * (Europe/Berlin)", "Misfire:     run_once",
				"Next fires:  2030-01-03 01:00:00 (in 13h)", `Args:        {"source":"s3"}`,
				"  STEP     JOB          DEPENDS ON\n  extract  etl.extract  -\n  load     etl.load     extract,check:finished\n"},
		},
		{
			name:      "put",
			args:      []string{"pipelines", "put", "-f", etl},
			exchanges: []exchange{{method: "PUT", path: "/v1/pipelines/etl", body: etlBody, status: http.StatusCreated, answer: cliPipeline}},
			stdout:    "pipeline/etl created (2 steps)\n",
		},
		{
			name:      "put replaces, in a namespace",
			args:      []string{"--namespace", "ml", "pipelines", "put", "-f", etl},
			exchanges: []exchange{{method: "PUT", path: "/v1/pipelines/etl", query: "namespace=ml", body: etlBody, answer: cliPipeline}},
			stdout:    "pipeline/etl updated (2 steps)\n",
		},
		{
			name: "put refused by the server",
			args: []string{"pipelines", "put", "-f", etl},
			exchanges: []exchange{{method: "PUT", path: "/v1/pipelines/etl", body: etlBody, status: http.StatusBadRequest,
				contentType: "application/problem+json", answer: problem}},
			code:   ExitUsage,
			stderr: "steps.load.depends_on[0].ref: cycle: load -> transform -> load",
		},
		{
			name:      "put, yaml",
			args:      []string{"pipelines", "put", "-f", etl, "-o", "yaml"},
			exchanges: []exchange{{method: "PUT", path: "/v1/pipelines/etl", body: etlBody, status: http.StatusCreated, answer: cliPipeline}},
			stdoutHas: []string{"name: etl\n", "steps:\n"},
		},
		{
			name:      "put, json",
			args:      []string{"pipelines", "put", "-f", etl, "-o", "json"},
			exchanges: []exchange{{method: "PUT", path: "/v1/pipelines/etl", body: etlBody, status: http.StatusCreated, answer: cliPipeline}},
			stdoutHas: []string{"\"name\": \"etl\",\n"},
		},
		{name: "put with a bad -o sends nothing", args: []string{"pipelines", "put", "-f", etl, "-o", "csv"}, code: 2, stderr: "--output: want table"},
		{name: "put needs a file", args: []string{"pipelines", "put"}, code: 2, stderr: "-f FILE is required"},
		{name: "put needs a name", args: []string{"pipelines", "put", "-f", noName}, code: 2, stderr: "names no pipeline"},
		{name: "put unknown field", args: []string{"pipelines", "put", "-f", bad}, code: 2, stderr: `unknown field "comand"`},
		{
			name:      "delete",
			args:      []string{"pipelines", "delete", "etl"},
			exchanges: []exchange{{method: "DELETE", path: "/v1/pipelines/etl", status: http.StatusNoContent}},
			stdout:    "pipeline etl deleted\n",
		},
		{
			name: "trigger with args",
			args: []string{"pipelines", "trigger", "etl", "--arg", "day=mon"},
			exchanges: []exchange{{method: "POST", path: "/v1/pipelines/etl/trigger", body: `{"args":{"day":"mon"}}`,
				status: http.StatusCreated, answer: cliPipelineRun("running", "waiting")}},
			stdoutHas: []string{"Status:         running", "load       r3   waiting    1/1"},
		},
		{
			name: "trigger --wait, succeeded",
			args: []string{"pipelines", "trigger", "etl", "--arg", "day=mon", "--wait"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/pipelines/etl/trigger", body: `{"args":{"day":"mon"}}`, status: http.StatusCreated, answer: cliPipelineRun("running", "waiting")},
				{method: "GET", path: "/v1/pipelines/etl/runs/pr1", answer: cliPipelineRun("running", "running")},
				{method: "GET", path: "/v1/pipelines/etl/runs/pr1", answer: cliPipelineRun("succeeded", "succeeded")},
			},
			stdout: runView,
		},
		{
			name: "trigger --wait, failed: exit 1",
			args: []string{"pipelines", "trigger", "etl", "--wait", "--json"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/pipelines/etl/trigger", body: `{}`, status: http.StatusCreated, answer: cliPipelineRun("running", "waiting")},
				{method: "GET", path: "/v1/pipelines/etl/runs/pr1", answer: cliPipelineRun("failed", "failed")},
			},
			code:      1,
			stdoutHas: []string{`"status": "failed"`},
		},
		{
			name: "trigger --wait, yaml",
			args: []string{"pipelines", "trigger", "etl", "--wait", "-o", "yaml"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/pipelines/etl/trigger", body: `{}`, status: http.StatusCreated, answer: cliPipelineRun("running", "waiting")},
				{method: "GET", path: "/v1/pipelines/etl/runs/pr1", answer: cliPipelineRun("succeeded", "succeeded")},
			},
			stdoutHas: []string{"id: pr1\n", "status: succeeded\n"},
		},
		{
			name: "runs",
			args: []string{"pipelines", "runs", "etl", "--limit", "1"},
			exchanges: []exchange{{method: "GET", path: "/v1/pipelines/etl/runs", query: "limit=1",
				answer: `{"items":[` + cliPipelineRun("running", "failed") + `],"next_cursor":"c2"}`}},
			stdout: "ID   STATUS   TRIGGER  STEPS                    CREATED\npr1  running  manual   2/3 succeeded, 1 failed  1m ago\n",
			stderr: "more: --cursor c2",
		},
		{
			name:      "run",
			args:      []string{"pipelines", "run", "etl", "pr1"},
			exchanges: []exchange{{method: "GET", path: "/v1/pipelines/etl/runs/pr1", answer: cliPipelineRun("succeeded", "succeeded")}},
			stdout:    runView,
		},
		{
			name:      "cancel",
			args:      []string{"pipelines", "cancel", "etl", "pr1"},
			exchanges: []exchange{{method: "POST", path: "/v1/pipelines/etl/runs/pr1/cancel", answer: cliPipelineRun("cancelled", "cancelled")}},
			stdoutHas: []string{"Status:         cancelled", "load       r3   cancelled"},
		},
		{
			name:      "retry from a step",
			args:      []string{"pipelines", "retry", "etl", "pr1", "--from-step", "transform"},
			exchanges: []exchange{{method: "POST", path: "/v1/pipelines/etl/runs/pr1/retry", body: `{"from":"transform"}`, answer: cliPipelineRun("running", "waiting")}},
			stdoutHas: []string{"Status:         running"},
		},
		{
			// The old spelling still works, with a warning (on stdout here only because
			// the test sets it; cobra writes it to stderr unless told otherwise).
			name:      "retry --from, the old spelling",
			args:      []string{"pipelines", "retry", "etl", "pr1", "--from", "transform"},
			exchanges: []exchange{{method: "POST", path: "/v1/pipelines/etl/runs/pr1/retry", body: `{"from":"transform"}`, answer: cliPipelineRun("running", "waiting")}},
			stdoutHas: []string{"Flag --from has been deprecated, use --from-step\n", "Status:         running"},
		},
		{
			name: "retry with nothing to retry",
			args: []string{"pipelines", "retry", "etl", "pr1"},
			exchanges: []exchange{{method: "POST", path: "/v1/pipelines/etl/runs/pr1/retry", body: `{}`, status: http.StatusConflict,
				contentType: "application/problem+json", answer: `{"title":"Conflict","status":409,"detail":"pipeline run pr1: nothing to retry"}`}},
			code:   ExitConflict,
			stderr: "nothing to retry",
		},
		{name: "run needs a run id", args: []string{"pipelines", "run", "etl"}, code: 2, stderr: "missing RUN_ID"},
		{name: "misspelt subcommand", args: []string{"pipelines", "trigegr"}, code: 2, stderr: `did you mean "trigger"`},
	})
}

func TestApplyPipelines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "all.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`namespace: etl
jobs:
  - name: cleanup
    shell: ./cleanup.sh
pipelines:
  - name: daily
    schedule: {cron: "@daily"}
    args: {source: s3}
    steps:
      extract: {command: [./extract.sh]}
      load: {command: [./load.sh], depends_on: [{ref: extract}]}
`), 0o600))
	dup := filepath.Join(dir, "dup.yaml")
	require.NoError(t, os.WriteFile(dup, []byte("pipelines:\n  - {name: a, steps: {x: {command: [x]}}}\n  - {name: a, steps: {x: {command: [x]}}}\n"), 0o600))
	otherNS := filepath.Join(dir, "ns.yaml")
	require.NoError(t, os.WriteFile(otherNS, []byte("namespace: a\npipelines:\n  - {name: a, namespace: b, steps: {x: {command: [x]}}}\n"), 0o600))
	jobBody := `{"name":"cleanup","shell":"./cleanup.sh"}`
	plBody := `{"name":"daily","schedule":{"cron":"@daily"},"args":{"source":"s3"},"steps":{"extract":{"command":["./extract.sh"]},
		"load":{"command":["./load.sh"],"depends_on":[{"ref":"extract"}]}}}`
	plAnswer := func(id string) string {
		return `{"id":"` + id + `","name":"daily","steps":[{"name":"extract","job_id":"j2","job_name":"daily.extract"},{"name":"load","job_id":"j3","job_name":"daily.load"}]}`
	}

	runCLICases(t, []cliCase{
		{
			name: "jobs and pipelines",
			args: []string{"apply", "-f", file},
			exchanges: []exchange{
				{method: "PUT", path: "/v1/jobs/cleanup", query: "namespace=etl", body: jobBody, status: 201, answer: `{"action":"created","job":{"id":"j1"}}`},
				{method: "PUT", path: "/v1/pipelines/daily", query: "namespace=etl", body: plBody, status: 201, answer: plAnswer("p1")},
			},
			stdout: "job/cleanup created\npipeline/daily created (2 steps)\n",
		},
		{
			name: "dry run",
			args: []string{"apply", "-f", file, "--dry-run"},
			exchanges: []exchange{
				{method: "PUT", path: "/v1/jobs/cleanup", query: "namespace=etl&dry_run=true", body: jobBody, answer: `{"action":"unchanged","dry_run":true,"job":{"id":"j1"}}`},
				{method: "PUT", path: "/v1/pipelines/daily", query: "namespace=etl&dry_run=true", body: plBody, answer: plAnswer("p1")},
			},
			stdout: "job/cleanup unchanged (dry run)\npipeline/daily updated (2 steps) (dry run)\n",
		},
		{
			name: "a pipeline refused: exit 1, and no prune",
			args: []string{"apply", "-f", file, "--prune"},
			exchanges: []exchange{
				{method: "PUT", path: "/v1/jobs/cleanup", query: "namespace=etl", body: jobBody, answer: `{"action":"unchanged","job":{"id":"j1"}}`},
				{method: "PUT", path: "/v1/pipelines/daily", query: "namespace=etl", body: plBody, status: http.StatusConflict,
					contentType: "application/problem+json", answer: `{"title":"Conflict","status":409,"detail":"1 job name(s) already taken"}`},
			},
			code:   1,
			stdout: "job/cleanup unchanged\npipeline/daily failed: Conflict: 1 job name(s) already taken\n",
		},
		{
			name: "prune keeps the jobs of pipelines' steps",
			args: []string{"apply", "-f", file, "--prune"},
			exchanges: []exchange{
				{method: "PUT", path: "/v1/jobs/cleanup", query: "namespace=etl", body: jobBody, answer: `{"action":"unchanged","job":{"id":"j1"}}`},
				{method: "PUT", path: "/v1/pipelines/daily", query: "namespace=etl", body: plBody, answer: plAnswer("p1")},
				{method: "GET", path: "/v1/jobs", query: "namespace=etl&limit=1000",
					answer: `{"items":[{"id":"j1","name":"cleanup"},{"id":"j2","name":"daily.extract"},{"id":"j3","name":"daily.load"},
						{"id":"j4","name":"other.step"},{"id":"j5","name":"old.job"},{"id":"j6","name":"old"}]}`},
				{method: "GET", path: "/v1/pipelines", query: "namespace=etl",
					answer: `{"items":[` + plAnswer("p1") + `,{"id":"p2","name":"other","steps":[{"name":"step","job_id":"j4","job_name":"other.step"}]}]}`},
				{method: "DELETE", path: "/v1/jobs/j6", answer: `{"items":[]}`},
				{method: "DELETE", path: "/v1/jobs/j5", answer: `{"items":[]}`},
			},
			stdout: "job/cleanup unchanged\npipeline/daily updated (2 steps)\njob/old deleted (pruned)\njob/old.job deleted (pruned)\n",
		},
		{name: "pipelines named twice", args: []string{"apply", "-f", dup}, code: 2, stderr: `pipelines[1].name: "a" is also pipelines[0]`},
		{name: "a pipeline in another namespace", args: []string{"apply", "-f", otherNS}, code: 2, stderr: "pipelines[0].namespace"},
	})
}
