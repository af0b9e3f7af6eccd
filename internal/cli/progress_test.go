package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
)

// onTerminal makes the error output a terminal: progress bars are drawn there.
func onTerminal(cfg *config) { cfg.terminal = func(io.Writer) bool { return true } }

// steppingClock moves a second on at each reading, so that a bar draws every update.
type steppingClock struct{ *clock.Fake }

func (c steppingClock) Now() time.Time {
	c.Advance(time.Second)
	return c.Fake.Now()
}

func stepping(cfg *config) { cfg.clock = steppingClock{clock.NewFake(testNow)} }

// progressCase is a command line against a fake API, run with a terminal or without.
type progressCase struct {
	name      string
	args      []string
	exchanges []exchange
	terminal  bool
	mod       func(*config)
	code      int
	stdoutHas []string
	// bar are what the error output holds: the bar's drawings and its last line; none
	// means that it holds no bar at all.
	bar []string
}

func runProgressCases(t *testing.T, cases []progressCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, tt.exchanges...)
			res := runWith(t, nil, nil, func(cfg *config) {
				if tt.terminal {
					onTerminal(cfg)
				}
				if tt.mod != nil {
					tt.mod(cfg)
				}
			}, append([]string{"--server", api.URL}, tt.args...)...)
			require.Equal(t, tt.code, res.code, "stderr:\n%s", res.stderr)
			api.check(t)
			for _, s := range tt.stdoutHas {
				require.Contains(t, res.stdout, s)
			}
			require.NotContains(t, res.stdout, "\r", "no bar on stdout")
			require.NotContains(t, res.stdout, "\x1b", "no escapes on stdout")
			if len(tt.bar) == 0 {
				require.NotContains(t, res.stderr, "\r", "no bar: %q", res.stderr)
			}
			for _, s := range tt.bar {
				require.Contains(t, res.stderr, s)
			}
		})
	}
}

func TestBackfillProgress(t *testing.T) {
	t.Parallel()
	args := []string{"backfill", "hourly", "--from", "2030-01-01T00:00:00Z", "--to", "2030-01-01T04:00:00Z", "--yes"}
	plan := exchange{method: "POST", path: "/v1/jobs/hourly/backfill",
		body: `{"from":"2030-01-01T00:00:00Z","to":"2030-01-01T04:00:00Z","dry_run":true}`,
		answer: `{"dry_run":true,"created":0,"instants":[
			{"at":"2030-01-01T00:00:00Z","at_local":"2030-01-01T00:00:00Z","existed":true},
			{"at":"2030-01-01T01:00:00Z","at_local":"2030-01-01T01:00:00Z","existed":false},
			{"at":"2030-01-01T02:00:00Z","at_local":"2030-01-01T02:00:00Z","existed":false},
			{"at":"2030-01-01T03:00:00Z","at_local":"2030-01-01T03:00:00Z","existed":false}]}`}
	// The missing instants, two a call: 01:00 to 02:00, then 03:00 alone.
	chunk1 := exchange{method: "POST", path: "/v1/jobs/hourly/backfill", body: `{"from":"2030-01-01T01:00:00Z","to":"2030-01-01T02:00:00Z"}`, status: 201,
		answer: `{"dry_run":false,"created":2,"instants":[
			{"at":"2030-01-01T01:00:00Z","at_local":"2030-01-01T01:00:00Z","existed":false,"run_id":"r1"},
			{"at":"2030-01-01T02:00:00Z","at_local":"2030-01-01T02:00:00Z","existed":false,"run_id":"r2"}]}`}
	chunk2 := exchange{method: "POST", path: "/v1/jobs/hourly/backfill", body: `{"from":"2030-01-01T03:00:00Z","to":"2030-01-01T03:00:00Z"}`, status: 201,
		answer: `{"dry_run":false,"created":1,"instants":[{"at":"2030-01-01T03:00:00Z","at_local":"2030-01-01T03:00:00Z","existed":false,"run_id":"r3"}]}`}
	twoACall := func(cfg *config) { cfg.backfillChunk = 2 }
	table := `INSTANT (UTC)         LOCAL                 STATE
2030-01-01T00:00:00Z  2030-01-01T00:00:00Z  has a run
2030-01-01T01:00:00Z  2030-01-01T01:00:00Z  created r1
2030-01-01T02:00:00Z  2030-01-01T02:00:00Z  created r2
2030-01-01T03:00:00Z  2030-01-01T03:00:00Z  created r3
created 3 runs
`
	runProgressCases(t, []progressCase{
		{
			name: "on a terminal: a bar on stderr", args: args, exchanges: []exchange{plan, chunk1, chunk2},
			terminal: true, mod: twoACall, stdoutHas: []string{table},
			bar: []string{"\rbackfill  0/3 [", "\rbackfill  3/3 in 0s (0.0/s)\x1b[K\n"},
		},
		{name: "piped: no bar", args: args, exchanges: []exchange{plan, chunk1, chunk2}, mod: twoACall, stdoutHas: []string{table}},
		{
			name: "-o json on a terminal: no bar, the merged answer", args: append(args, "-o", "json"),
			exchanges: []exchange{plan, chunk1, chunk2}, terminal: true, mod: twoACall,
			stdoutHas: []string{`"created": 3`, `"run_id": "r3"`, `"existed": true`},
		},
		{
			name: "a call fails: what was created is said", args: args, terminal: true, mod: twoACall, code: ExitFailed,
			exchanges: []exchange{plan, chunk1, {method: "POST", path: "/v1/jobs/hourly/backfill",
				body: `{"from":"2030-01-01T03:00:00Z","to":"2030-01-01T03:00:00Z"}`, status: 500,
				contentType: "application/problem+json", answer: `{"title":"Internal Server Error","status":500}`}},
			bar: []string{"\rbackfill  2/3 in 0s (0.0/s)\x1b[K\nbackfill stopped at 2030-01-01T03:00:00Z with 2 runs created: run it again to create the rest\n",
				"stint: Internal Server Error\n"},
		},
	})
}

func TestApplyProgress(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "jobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte("jobs:\n  - {name: a, shell: 'true'}\n  - {name: b, shell: 'true'}\n"), 0o600))
	exchanges := []exchange{
		{method: "PUT", path: "/v1/jobs/a", body: `{"name":"a","shell":"true"}`, status: 201, answer: `{"action":"created","job":{"id":"j1"}}`},
		{method: "PUT", path: "/v1/jobs/b", body: `{"name":"b","shell":"true"}`, answer: `{"action":"unchanged","job":{"id":"j2"}}`},
	}
	runProgressCases(t, []progressCase{
		{
			name: "on a terminal", args: []string{"apply", "-f", file}, exchanges: exchanges, terminal: true,
			stdoutHas: []string{"job/a created\njob/b unchanged\n"},
			bar:       []string{"\rapply  1/2 [", "\rapply  2/2 in 0s (0.0/s)\x1b[K\n"},
		},
		{name: "piped", args: []string{"apply", "-f", file}, exchanges: exchanges, stdoutHas: []string{"job/a created\njob/b unchanged\n"}},
	})
}

func TestWaitProgress(t *testing.T) {
	t.Parallel()
	dag := filepath.Join(t.TempDir(), "dag.yaml")
	require.NoError(t, os.WriteFile(dag, []byte("runs:\n  a: {shell: 'true'}\n  b: {shell: 'true', depends_on: [{ref: a}]}\n"), 0o600))
	submitted := exchange{method: "POST", path: "/v1/dags", body: `{"runs":{"a":{"shell":"true"},"b":{"shell":"true","depends_on":[{"ref":"a"}]}}}`,
		status: 201, answer: `{"runs":{"a":"r1","b":"r2"},"jobs":{"a":"j1","b":"j2"}}`}
	dagState := func(status, a, b string) exchange {
		return exchange{method: "GET", path: "/v1/dags/r1", answer: `{"id":"r1","namespace":"default","status":"` + status + `","created_at":"2030-01-02T11:00:00Z",
			"entries":[{"name":"a","run":{"id":"r1","status":"` + a + `"}},{"name":"b","run":{"id":"r2","status":"` + b + `"},"depends_on":[{"ref":"a"}]}]}`}
	}
	runProgressCases(t, []progressCase{
		{
			name: "dags submit --wait", args: []string{"dags", "submit", "-f", dag, "--wait"}, terminal: true, mod: stepping,
			exchanges: []exchange{submitted, dagState("running", "running", "waiting"), dagState("running", "succeeded", "running"),
				dagState("succeeded", "succeeded", "succeeded")},
			stdoutHas: []string{"ENTRY  RUN  JOB\na      r1   j1\nb      r2   j2\n\n", "Status:     succeeded"},
			bar:       []string{"\rdag  0/2 [", "\rdag  1/2 [==========>         ]  50%", "\rdag  2/2 [", "\rdag  2/2 in "},
		},
		{
			name: "dags submit --wait, failed, yaml", args: []string{"dags", "submit", "-f", dag, "--wait", "-o", "yaml"}, terminal: true,
			exchanges: []exchange{submitted, dagState("failed", "failed", "skipped")},
			code:      ExitFailed, stdoutHas: []string{"status: failed\n"},
		},
		{
			name: "pipelines trigger --wait", args: []string{"pipelines", "trigger", "etl", "--wait"}, terminal: true, mod: stepping,
			exchanges: []exchange{
				{method: "POST", path: "/v1/pipelines/etl/trigger", body: `{}`, status: 201, answer: cliPipelineRun("running", "waiting")},
				{method: "GET", path: "/v1/pipelines/etl/runs/pr1", answer: cliPipelineRun("running", "running")},
				{method: "GET", path: "/v1/pipelines/etl/runs/pr1", answer: cliPipelineRun("succeeded", "succeeded")},
			},
			stdoutHas: []string{"Status:         succeeded"},
			// Each poll draws (a second passes at each reading of the clock): 2 of the 3
			// steps ended at the trigger, then the last.
			bar: []string{"\rpipeline etl  0/3 [", "\rpipeline etl  2/3 [=============>      ]  66%", "\rpipeline etl  3/3 in "},
		},
	})
}

// TestNoBarForOneUnit: work of a single unit draws no bar.
func TestNoBarForOneUnit(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "jobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte("jobs:\n  - {name: a, shell: 'true'}\n"), 0o600))
	api := newFakeAPI(t, exchange{method: "PUT", path: "/v1/jobs/a", body: `{"name":"a","shell":"true"}`, status: 201, answer: `{"action":"created","job":{"id":"j1"}}`})
	res := runWith(t, nil, nil, onTerminal, "--server", api.URL, "apply", "-f", file)
	require.Equal(t, 0, res.code)
	require.Equal(t, "job/a created\n", res.stdout)
	require.False(t, strings.Contains(res.stderr, "apply"), res.stderr)
}
