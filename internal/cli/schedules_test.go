package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "jobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`namespace: reports
jobs:
  - name: nightly
    command: [python3, report.py]
    schedule: {cron: "0 2 * * *", timezone: Europe/Berlin}
  - name: weekly
    shell: echo weekly
    schedule:
      cron: "@weekly"
`), 0o600))
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("jobs:\n  - name: a\n    comand: [x]\n"), 0o600))
	noName := filepath.Join(dir, "noname.yaml")
	require.NoError(t, os.WriteFile(noName, []byte("jobs:\n  - command: [x]\n"), 0o600))

	runCLICases(t, []cliCase{
		{
			name:      "pause",
			args:      []string{"jobs", "pause", "nightly"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs/nightly/pause", answer: `{"id":"j1","name":"nightly"}`}},
			stdout:    "job nightly paused\n",
		},
		{
			name: "resume",
			args: []string{"jobs", "resume", "nightly"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs/nightly/resume",
				answer: `{"id":"j1","name":"nightly","next_fire_times":["2030-01-03T02:00:00Z"]}`}},
			stdout: "job nightly resumed; next fire 2030-01-03 02:00:00 (in 14h)\n",
		},
		{
			name: "webhook",
			args: []string{"jobs", "webhook", "deploy"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs/deploy/webhook", status: 201,
				answer: `{"job_id":"j1","secret":"s3cret","path":"/v1/hooks/deploy","header":"X-Stint-Signature"}`}},
			stdoutHas: []string{"s3cret", "/v1/hooks/deploy", "X-Stint-Signature: sha256="},
		},
		{
			name:      "top-level trigger",
			args:      []string{"trigger", "nightly", "--arg", "day=mon"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs/nightly/trigger", body: `{"args":{"day":"mon"}}`, status: 201, answer: `{"run":{"id":"r1","status":"queued"}}`}},
			stdoutHas: []string{"r1"},
		},
		{
			name: "backfill dry run",
			args: []string{"backfill", "hourly", "--from", "2030-01-01T00:00:00Z", "--to", "2030-01-01T01:00:00Z"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs/hourly/backfill",
				body: `{"from":"2030-01-01T00:00:00Z","to":"2030-01-01T01:00:00Z","dry_run":true}`,
				answer: `{"dry_run":true,"created":0,"instants":[
					{"at":"2030-01-01T00:00:00Z","at_local":"2030-01-01T01:00:00+01:00","existed":true},
					{"at":"2030-01-01T01:00:00Z","at_local":"2030-01-01T02:00:00+01:00","existed":false}]}`}},
			stdout: `INSTANT (UTC)         LOCAL                      STATE
2030-01-01T00:00:00Z  2030-01-01T01:00:00+01:00  has a run
2030-01-01T01:00:00Z  2030-01-01T02:00:00+01:00  missing
dry run: 1 of 2 instants have no run; run again with --yes to create them
`,
		},
		{
			name: "backfill",
			args: []string{"backfill", "hourly", "--from", "2030-01-01T00:00:00Z", "--to", "2030-01-01T00:00:00Z", "--yes"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/jobs/hourly/backfill", body: `{"from":"2030-01-01T00:00:00Z","to":"2030-01-01T00:00:00Z","dry_run":true}`,
					answer: `{"dry_run":true,"created":0,"instants":[{"at":"2030-01-01T00:00:00Z","at_local":"2030-01-01T00:00:00Z","existed":false}]}`},
				{method: "POST", path: "/v1/jobs/hourly/backfill", body: `{"from":"2030-01-01T00:00:00Z","to":"2030-01-01T00:00:00Z"}`, status: 201,
					answer: `{"dry_run":false,"created":1,"instants":[{"at":"2030-01-01T00:00:00Z","at_local":"2030-01-01T00:00:00Z","existed":false,"run_id":"r7"}]}`},
			},
			stdoutHas: []string{"created r7", "created 1 runs"},
		},
		{name: "backfill needs a range", args: []string{"backfill", "hourly"}, code: 2, stderr: "--from and --to are required"},
		{
			name: "apply with prune",
			args: []string{"apply", "-f", file, "--prune"},
			exchanges: []exchange{
				{method: "PUT", path: "/v1/jobs/nightly", query: "namespace=reports",
					body:   `{"name":"nightly","command":["python3","report.py"],"schedule":{"cron":"0 2 * * *","timezone":"Europe/Berlin"}}`,
					status: 201, answer: `{"action":"created","job":{"id":"j1","name":"nightly"}}`},
				{method: "PUT", path: "/v1/jobs/weekly", query: "namespace=reports",
					body:   `{"name":"weekly","shell":"echo weekly","schedule":{"cron":"@weekly"}}`,
					answer: `{"action":"updated","changes":["schedule","shell"],"job":{"id":"j2","name":"weekly"}}`},
				{method: "GET", path: "/v1/jobs", query: "namespace=reports&limit=1000",
					answer: `{"items":[{"id":"j1","name":"nightly"},{"id":"j2","name":"weekly"},{"id":"j3","name":"old"}]}`},
				{method: "DELETE", path: "/v1/jobs/j3", answer: `{"items":[]}`},
			},
			stdout: "job/nightly created\njob/weekly updated (schedule, shell)\njob/old deleted (pruned)\n",
		},
		{
			name:      "a job in another namespace, by name",
			args:      []string{"--namespace", "reports", "jobs", "pause", "nightly"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs/nightly/pause", query: "namespace=reports", answer: `{"id":"j1","name":"nightly"}`}},
			stdout:    "job nightly paused\n",
		},
		{
			name:      "jobs list in a namespace",
			args:      []string{"--namespace", "reports", "jobs", "list", "--json"},
			exchanges: []exchange{{method: "GET", path: "/v1/jobs", query: "namespace=reports", answer: `{"items":[]}`}},
			stdoutHas: []string{"items"},
		},
		{
			name:      "runs of a job in a namespace",
			args:      []string{"--namespace", "reports", "runs", "list", "--job", "nightly", "--json"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs", query: "job=nightly&namespace=reports", answer: `{"items":[]}`}},
			stdoutHas: []string{"items"},
		},
		{name: "apply unknown field", args: []string{"apply", "-f", bad}, code: 2, stderr: "comand"},
		{name: "apply job without name", args: []string{"apply", "-f", noName}, code: 2, stderr: "jobs[0].name"},
		{name: "apply needs a file", args: []string{"apply"}, code: 2, stderr: "-f FILE is required"},
	})
}

func TestNamespaceFromEnvironment(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t,
		exchange{method: "GET", path: "/v1/jobs", query: "namespace=team", answer: `{"items":[]}`},
		exchange{method: "POST", path: "/v1/jobs/sync/trigger", query: "namespace=team", body: `{}`, status: 201, answer: `{"run":{"id":"r1","status":"queued"}}`},
	)
	env := map[string]string{"STINT_NAMESPACE": "team"}
	res := run(t, env, "--server", api.URL, "jobs", "list", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	res = run(t, env, "--server", api.URL, "trigger", "sync")
	require.Equal(t, 0, res.code, res.stderr)
	api.check(t)
}
