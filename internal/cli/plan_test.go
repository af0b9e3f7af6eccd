package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/clock"
)

const (
	noFitPlan = `{"placement":{"constrained":true,"workers":3,"fits":[],"code":"no_worker_fits",
		"reason":"no worker fits: 3 registered, 3 lack gpu >= 4, 1 lacks label zone=eu","never":{"gpu >= 4":3,"label zone=eu":1}},
		"due_at":"2030-01-02T12:00:00Z","enabled":true,
		"held_by":[{"code":"queue_paused","reason":"queue \"gpu\" is paused"},
			{"code":"no_worker_fits","reason":"no worker fits: 3 registered, 3 lack gpu >= 4, 1 lacks label zone=eu"}]}`
	fitPlan = `{"placement":{"constrained":true,"workers":3,"fits":["gpu1","gpu2"],"worker":"gpu1"},
		"next_fire_times":["2030-01-03T02:00:00Z","2030-01-04T02:00:00Z"],
		"next_fire_times_local":["2030-01-03T03:00:00+01:00","2030-01-04T03:00:00+01:00"],
		"enabled":true,"held_by":[],"existing_job":"j1"}`
)

func TestPlanCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	train := write("train.yaml", "name: train\ncommand: [python3, train.py]\nqueue: gpu\nrequirements: {gpu: 4, labels: {zone: eu}}\n")
	trainJSON := write("train.json", `{"name": "train", "command": ["python3", "train.py"], "queue": "gpu", "requirements": {"gpu": 4, "labels": {"zone": "eu"}}}`)
	jobs := write("jobs.yaml", `namespace: ml
jobs:
  - name: nightly
    shell: ./nightly.sh
    requirements: {gpu: 1}
    schedule: {cron: "0 3 * * *", timezone: Europe/Paris}
  - name: other
    shell: "true"
`)
	one := write("one.yaml", "jobs:\n  - name: only\n    shell: \"true\"\n")
	bad := write("bad.yaml", "name: x\ncomand: [x]\n")
	trainBody := `{"name":"train","command":["python3","train.py"],"queue":"gpu","requirements":{"gpu":4,"labels":{"zone":"eu"}}}`

	runCLICases(t, []cliCase{
		{
			name:      "no worker fits",
			args:      []string{"plan", "-f", train},
			exchanges: []exchange{{method: "POST", path: "/v1/plan", body: trainBody, answer: noFitPlan}},
			stdout: `Placement:     no worker fits now (3 active workers)
               3 lack gpu >= 4
               1 lacks label zone=eu
Due:           2030-01-02 12:00:00 (just now)
Held back by:  queue_paused: queue "gpu" is paused
               no_worker_fits: no worker fits: 3 registered, 3 lack gpu >= 4, 1 lacks label zone=eu
`,
		},
		{
			name:      "a JSON file",
			args:      []string{"plan", "-f", trainJSON, "--json"},
			exchanges: []exchange{{method: "POST", path: "/v1/plan", body: trainBody, answer: noFitPlan}},
			stdoutHas: []string{`"code": "no_worker_fits"`, `"gpu \u003e= 4": 3`, `"held_by": [`},
		},
		{
			name: "a job of an apply file",
			args: []string{"plan", "-f", jobs, "--job", "nightly"},
			exchanges: []exchange{{method: "POST", path: "/v1/plan",
				body:   `{"name":"nightly","namespace":"ml","shell":"./nightly.sh","requirements":{"gpu":1},"schedule":{"cron":"0 3 * * *","timezone":"Europe/Paris"}}`,
				answer: fitPlan}},
			stdout: `Placement:     gpu1, the best fit (2 of 3 active workers fit: gpu1, gpu2)
Next fires:    2030-01-03 02:00:00 (in 14h)  2030-01-03T03:00:00+01:00
               2030-01-04 02:00:00 (in 38h)  2030-01-04T03:00:00+01:00
Held back by:  nothing
Note:          a job of this name exists (j1): stint apply would update it, stint submit would be refused
`,
		},
		{
			name: "the only job of an apply file",
			args: []string{"plan", "-f", one},
			exchanges: []exchange{{method: "POST", path: "/v1/plan", body: `{"name":"only","shell":"true"}`,
				answer: `{"placement":{"constrained":false,"workers":2,"fits":["a","b"]},"due_at":"2030-01-02T12:00:00Z","enabled":true,"held_by":[]}`}},
			stdoutHas: []string{"any worker: no requirements, the first of 2 active workers to ask takes it", "Held back by:  nothing"},
		},
		{
			name: "no worker at all, disabled",
			args: []string{"plan", "-f", train},
			exchanges: []exchange{{method: "POST", path: "/v1/plan", body: trainBody,
				answer: `{"placement":{"constrained":true,"workers":0,"fits":[],"code":"no_worker_fits","reason":"no worker is connected"},"enabled":false,
					"held_by":[{"code":"no_worker_fits","reason":"no worker is connected"}]}`}},
			stdout: `Placement:     no worker is connected
Runs:          none: the job is disabled
Held back by:  no_worker_fits: no worker is connected
`,
		},
		{
			name: "the server refuses the spec",
			args: []string{"plan", "-f", train},
			exchanges: []exchange{{method: "POST", path: "/v1/plan", body: trainBody, status: 400, contentType: "application/problem+json",
				answer: `{"title":"Bad Request","status":400,"detail":"the request has an invalid field","errors":[{"field":"requirements.gpu","message":"must not be negative"}]}`}},
			code:   ExitUsage,
			stderr: "requirements.gpu: must not be negative",
		},
		{name: "needs a file", args: []string{"plan"}, code: 2, stderr: "-f FILE is required"},
		{name: "missing file", args: []string{"plan", "-f", filepath.Join(dir, "nope.yaml")}, code: 2, stderr: "no such file"},
		{name: "unknown field", args: []string{"plan", "-f", bad}, code: 2, stderr: `unknown field "comand"`},
		{name: "several jobs", args: []string{"plan", "-f", jobs}, code: 2, stderr: "the file lists 2 jobs (nightly, other): pick one with --job NAME"},
		{name: "no such job", args: []string{"plan", "-f", jobs, "--job", "weekly"}, code: 2, stderr: "--job weekly: no job of that name"},
		{name: "--job of a single spec", args: []string{"plan", "-f", train, "--job", "train"}, code: 2, stderr: "holds one job spec"},
	})
}

func TestPlanFromStdin(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, exchange{method: "POST", path: "/v1/plan", body: `{"shell":"make","requirements":{"cpu":4}}`,
		answer: `{"placement":{"constrained":true,"workers":1,"fits":["w1"],"worker":"w1"},"due_at":"2030-01-02T12:00:00Z","enabled":true,"held_by":[]}`})
	cfg := &config{
		getenv:     func(string) string { return "" },
		clock:      clock.NewFake(testNow),
		loc:        time.UTC,
		clientOpts: []client.Option{client.WithPollInterval(time.Millisecond)},
	}
	root := newRoot(cfg)
	var stdout, stderr bytes.Buffer
	root.SetIn(strings.NewReader(`{"shell": "make", "requirements": {"cpu": 4}}`))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"--server", api.URL, "plan", "-f", "-"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.Equal(t, 0, Execute(ctx, root), "stderr: %s", stderr.String())
	api.check(t)
	require.Contains(t, stdout.String(), "w1, the best fit (1 of 1 active worker fits: w1)")
}
