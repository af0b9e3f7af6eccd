package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const dagAnswer = `{"runs":{"extract":"r1","load":"r3","transform":"r2"},"jobs":{"extract":"j1","load":"j3","transform":"j2"}}`

func TestDAGSubmit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	etl := write("etl.yaml", `namespace: etl
runs:
  extract:
    command: [./extract.sh]
  transform:
    shell: ./transform.sh
    depends_on: [{ref: extract}]
  load:
    handler: load
    depends_on:
      - ref: transform
      - {run: r0, condition: finished}
`)
	etlBody := `{"namespace":"etl","runs":{"extract":{"command":["./extract.sh"]},
		"transform":{"shell":"./transform.sh","depends_on":[{"ref":"extract"}]},
		"load":{"handler":"load","depends_on":[{"ref":"transform"},{"run":"r0","condition":"finished"}]}}}`
	plain := write("plain.json", `{"runs": {"a": {"handler": "noop"}}}`)
	bad := write("bad.yaml", "runs:\n  a: {handler: noop, dependson: [{ref: b}]}\n")
	empty := write("empty.yaml", "namespace: etl\n")

	runCLICases(t, []cliCase{
		{
			name:      "a YAML file",
			args:      []string{"dags", "submit", "-f", etl},
			exchanges: []exchange{{method: "POST", path: "/v1/dags", body: etlBody, status: http.StatusCreated, answer: dagAnswer}},
			stdout:    "ENTRY      RUN  JOB\nextract    r1   j1\nload       r3   j3\ntransform  r2   j2\n",
		},
		{
			name:      "--json",
			args:      []string{"dags", "submit", "-f", etl, "--json"},
			exchanges: []exchange{{method: "POST", path: "/v1/dags", body: etlBody, status: http.StatusCreated, answer: dagAnswer}},
			stdoutHas: []string{`"runs": {`, `"extract": "r1"`, `"jobs": {`},
		},
		{
			name: "a JSON file takes --namespace",
			args: []string{"--namespace", "ml", "dags", "submit", "-f", plain},
			exchanges: []exchange{{method: "POST", path: "/v1/dags", body: `{"namespace":"ml","runs":{"a":{"handler":"noop"}}}`,
				status: http.StatusCreated, answer: `{"runs":{"a":"r1"},"jobs":{"a":"j1"}}`}},
			stdout: "ENTRY  RUN  JOB\na      r1   j1\n",
		},
		{
			name: "the server finds a cycle",
			args: []string{"dags", "submit", "-f", etl},
			exchanges: []exchange{{method: "POST", path: "/v1/dags", body: etlBody, status: http.StatusBadRequest, contentType: "application/problem+json",
				answer: `{"title":"Bad Request","status":400,"detail":"1 invalid field(s); nothing was created",
					"errors":[{"field":"runs.load.depends_on[0].ref","message":"cycle: load -> transform -> load"}]}`}},
			code:   ExitUsage,
			stderr: "runs.load.depends_on[0].ref: cycle: load -> transform -> load",
		},
		{name: "needs a file", args: []string{"dags", "submit"}, code: 2, stderr: "-f FILE is required"},
		{name: "unknown field", args: []string{"dags", "submit", "-f", bad}, code: 2, stderr: `unknown field "dependson"`},
		{name: "no runs", args: []string{"dags", "submit", "-f", empty}, code: 2, stderr: "the file lists no run"},
		{name: "misspelt subcommand", args: []string{"dags", "sumbit"}, code: 2, stderr: `did you mean "submit"`},
	})
}

func TestSubmitAfter(t *testing.T) {
	t.Parallel()
	runCLICases(t, []cliCase{
		{
			name: "--after, repeated, with conditions",
			args: []string{"submit", "--after", "r1", "--after", "r2:failed", "--after", "r3:finished", "--", "./load"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs",
				body: `{"command":["./load"],"depends_on":[{"run":"r1","condition":"succeeded"},{"run":"r2","condition":"failed"},
					{"run":"r3","condition":"finished"}]}`,
				status: http.StatusCreated,
				answer: `{"job":{"id":"j1","name":"j1"},"run":{"id":"r4","job_id":"j1","status":"waiting"}}`}},
			stdout: "run r4 waiting\njob j1\n",
		},
		{
			name: "the server knows no such run",
			args: []string{"submit", "--after", "nope", "--handler", "noop"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"handler":"noop","depends_on":[{"run":"nope","condition":"succeeded"}]}`,
				status: http.StatusBadRequest, contentType: "application/problem+json",
				answer: `{"title":"Bad Request","status":400,"errors":[{"field":"depends_on[0].run","message":"no run with this id"}]}`}},
			code:   ExitUsage,
			stderr: "depends_on[0].run: no run with this id",
		},
		{name: "unknown condition", args: []string{"submit", "--after", "r1:done", "--handler", "noop"}, code: 2, stderr: `--after`},
		{name: "no run id", args: []string{"submit", "--after", ":failed", "--handler", "noop"}, code: 2, stderr: "RUN_ID"},
		{name: "with --cron", args: []string{"submit", "--after", "r1", "--cron", "@daily", "--handler", "noop"}, code: 2, stderr: "--after with --cron"},
	})
}

func TestDAGGetAndList(t *testing.T) {
	t.Parallel()
	dag := `{"id":"r1","namespace":"etl","status":"failed","created_at":"2026-05-01T10:00:00Z","entries":[
		{"name":"alert","run":{"id":"r4","status":"queued","depends_on":[{"run":"r2","condition":"failed"}]},"depends_on":[{"ref":"transform","condition":"failed"}]},
		{"name":"extract","run":{"id":"r1","status":"succeeded"}},
		{"name":"load","run":{"id":"r3","status":"skipped","depends_on":[{"run":"r2","condition":"succeeded"}]},"depends_on":[{"ref":"transform","condition":"succeeded"},{"run":"r0","condition":"finished"}]},
		{"name":"transform","run":{"id":"r2","status":"failed","error":"exit 1","depends_on":[{"run":"r1","condition":"succeeded"}]},"depends_on":[{"ref":"extract","condition":"succeeded"}]}]}`
	runCLICases(t, []cliCase{
		{
			name:      "get: upstream first, edges by entry",
			args:      []string{"dags", "get", "r3"},
			exchanges: []exchange{{method: "GET", path: "/v1/dags/r3", answer: dag}},
			stdoutHas: []string{"DAG:        r1", "Status:     failed",
				"ENTRY      RUN  STATUS     DEPENDS ON                 STARTED",
				"extract    r1   succeeded  -",
				"transform  r2   failed     extract                    -        -         exit 1\n" +
					"alert      r4   queued     transform:failed ",
				"load       r3   skipped    transform,run r0:finished"},
		},
		{
			name: "list with a namespace and a next page",
			args: []string{"--namespace", "etl", "dags", "list", "--limit", "1"},
			exchanges: []exchange{{method: "GET", path: "/v1/dags", query: "limit=1&namespace=etl",
				answer: `{"items":[{"id":"r1","namespace":"etl","entries":4,"created_at":"2026-05-01T10:00:00Z"}],"next_cursor":"1.x"}`}},
			stdoutHas: []string{"ID  NAMESPACE  ENTRIES  CREATED", "r1  etl        4"},
			stderr:    "1.x",
		},
	})
}
