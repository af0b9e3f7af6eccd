package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/clock"
)

// testNow is the fake clock's time in every CLI test; times print in UTC.
var testNow = time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)

// exchange is one request a command must make and the answer it gets.
type exchange struct {
	method, path string
	query        string // encoded; "" for none
	body         string // JSON; "" for no body

	status      int    // default 200
	contentType string // default application/json
	answer      string
}

// fakeAPI answers requests with its exchanges in order and records what it got.
type fakeAPI struct {
	*httptest.Server
	want []exchange

	mu  sync.Mutex
	got []gotRequest
}

type gotRequest struct {
	method, path string
	query        url.Values
	body         string
	header       http.Header
}

func newFakeAPI(t testing.TB, want ...exchange) *fakeAPI {
	t.Helper()
	f := &fakeAPI{want: want}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.got)
		f.got = append(f.got, gotRequest{method: r.Method, path: r.URL.EscapedPath(), query: r.URL.Query(), body: string(body), header: r.Header.Clone()})
		f.mu.Unlock()
		if n >= len(f.want) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, `{"title":"unexpected request","status":418}`)
			return
		}
		x := f.want[n]
		ct := x.contentType
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		if x.status != 0 {
			w.WriteHeader(x.status)
		}
		_, _ = io.WriteString(w, x.answer)
	}))
	t.Cleanup(f.Close)
	return f
}

// check requires that the API got exactly the expected requests.
func (f *fakeAPI) check(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, g := range f.got {
		require.Less(t, i, len(f.want), "unexpected request %s %s", g.method, g.path)
		x := f.want[i]
		require.Equal(t, x.method+" "+x.path, g.method+" "+g.path, "request %d", i)
		q, err := url.ParseQuery(x.query)
		require.NoError(t, err)
		require.Equal(t, q, g.query, "query of %s %s", g.method, g.path)
		if x.body == "" {
			require.Empty(t, g.body, "body of %s %s", g.method, g.path)
		} else {
			require.JSONEq(t, x.body, g.body, "body of %s %s", g.method, g.path)
		}
	}
	require.Len(t, f.got, len(f.want), "requests made")
}

func (f *fakeAPI) requests() []gotRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]gotRequest(nil), f.got...)
}

// result is what a CLI invocation printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the CLI with args against server (none when empty), with env as the environment.
func run(t testing.TB, env map[string]string, args ...string) result {
	t.Helper()
	return runWith(t, env, nil, nil, args...)
}

// runIn is run with stdin (nil: the process's).
func runIn(t testing.TB, stdin io.Reader, env map[string]string, args ...string) result {
	t.Helper()
	return runWith(t, env, stdin, nil, args...)
}

// runWith is run with stdin (nil: the process's) and the config changed by mod first (when
// not nil).
func runWith(t testing.TB, env map[string]string, stdin io.Reader, mod func(*config), args ...string) result {
	t.Helper()
	cfg := &config{
		getenv:     func(k string) string { return env[k] },
		clock:      clock.NewFake(testNow),
		loc:        time.UTC,
		clientOpts: []client.Option{client.WithPollInterval(time.Millisecond)},
	}
	if mod != nil {
		mod(cfg)
	}
	root := newRoot(cfg)
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	if stdin != nil {
		root.SetIn(stdin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	root.SetArgs(args)
	code := Execute(ctx, root)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// cliCase is one command line against a fake API.
type cliCase struct {
	name      string
	args      []string
	exchanges []exchange
	stdout    string // exact, unless empty and stdoutHas is set
	stdoutHas []string
	stderr    string // substring
	code      int
}

func runCLICases(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, tt.exchanges...)
			res := run(t, nil, append([]string{"--server", api.URL}, tt.args...)...)
			require.Equal(t, tt.code, res.code, "exit code; stderr:\n%s", res.stderr)
			api.check(t)
			if tt.stdout != "" || len(tt.stdoutHas) == 0 {
				require.Equal(t, tt.stdout, res.stdout)
			}
			for _, s := range tt.stdoutHas {
				require.Contains(t, res.stdout, s)
			}
			if tt.stderr != "" {
				require.Contains(t, res.stderr, tt.stderr)
			} else if tt.code == 0 {
				require.Empty(t, res.stderr)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		stderr []string
	}{
		{name: "unknown command", args: []string{"bogus"}, stderr: []string{`stint: unknown command "bogus" for "stint"`, "Run 'stint --help' for usage."}},
		{name: "misspelt command", args: []string{"sumbit"}, stderr: []string{`did you mean "submit"?`}},
		{name: "unknown subcommand", args: []string{"runs", "frob"}, stderr: []string{`unknown command "frob" for "stint runs"`, "Run 'stint runs --help'"}},
		{name: "unknown workers subcommand", args: []string{"workers", "frob"}, stderr: []string{`unknown command "frob" for "stint workers"`}},
		{name: "unknown flag", args: []string{"runs", "list", "--frob"}, stderr: []string{"unknown flag: --frob", "Run 'stint runs list --help'"}},
		{name: "bad int", args: []string{"runs", "list", "--limit", "many"}, stderr: []string{`invalid argument "many" for "--limit" flag`}},
		{name: "negative limit", args: []string{"runs", "list", "--limit", "-1"}, stderr: []string{"--limit: must not be negative"}},
		{name: "missing argument", args: []string{"runs", "get"}, stderr: []string{"stint: missing RUN_ID", "Run 'stint runs get --help'"}},
		{name: "extra argument", args: []string{"runs", "get", "a", "b"}, stderr: []string{`unexpected argument "b"`}},
		{name: "flag without value", args: []string{"submit", "--name"}, stderr: []string{"flag needs an argument: --name"}},
		{name: "bad arg pair", args: []string{"submit", "--arg", "novalue", "--shell", "x"}, stderr: []string{`invalid argument "novalue" for "--arg" flag: want KEY=VALUE`}},
		{name: "bad time", args: []string{"submit", "--run-at", "tomorrow", "--shell", "x"}, stderr: []string{`"--run-at" flag: want an RFC 3339 time`}},
		{name: "bad memory", args: []string{"submit", "--memory", "lots", "--shell", "x"}, stderr: []string{`"--memory" flag: want an amount of memory`}},
		{name: "bad duration", args: []string{"submit", "--timeout", "5", "--shell", "x"}, stderr: []string{`invalid argument "5" for "--timeout" flag`}},
		{name: "nothing to run", args: []string{"submit", "--name", "x"}, stderr: []string{"nothing to run: give a command after --, or --shell, or --handler"}},
		{name: "two things to run", args: []string{"submit", "--shell", "x", "--", "ls"}, stderr: []string{"give only one of a command, --shell and --handler"}},
		{name: "run-at and delay", args: []string{"submit", "--shell", "x", "--run-at", "2030-01-01T00:00:00Z", "--delay", "1m"}, stderr: []string{"--run-at and --delay: give one"}},
		{name: "json and follow", args: []string{"submit", "--shell", "x", "--json", "--follow"}, stderr: []string{"--json and --follow"}},
		{name: "wait for a cron job", args: []string{"submit", "--shell", "x", "--cron", "* * * * *", "--wait"}, stderr: []string{"a scheduled job has no run to wait for"}},
		{name: "queue set with nothing", args: []string{"queues", "set", "q"}, stderr: []string{"nothing to set: give --max-concurrency, --priority, --rate or an --alert flag"}},
		{name: "bad server", args: []string{"--server", "ftp://x", "runs", "get", "r1"}, stderr: []string{"--server: ", "scheme must be http or https"}},
		{name: "bad stream", args: []string{"logs", "r1", "--stream", "both"}, stderr: []string{"--stream: must be stdout or stderr"}},
		{name: "negative attempt", args: []string{"logs", "r1", "--attempt", "-1"}, stderr: []string{"--attempt: must be 1 or more"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// No server: a usage error is found before any request.
			api := newFakeAPI(t)
			res := run(t, map[string]string{"STINT_SERVER": api.URL}, tt.args...)
			require.Equal(t, 2, res.code, "stderr:\n%s", res.stderr)
			require.Empty(t, res.stdout)
			for _, s := range tt.stderr {
				require.Contains(t, res.stderr, s)
			}
			api.check(t)
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"--help"}, {"runs"}, {"jobs", "--help"}, {"submit", "-h"}} {
		res := run(t, nil, args...)
		require.Equal(t, 0, res.code, "%v: %s", args, res.stderr)
		require.Contains(t, res.stdout, "Usage:", "%v", args)
		require.Empty(t, res.stderr, "%v", args)
	}
	res := run(t, nil, "--help")
	for _, cmd := range []string{"submit", "runs", "cancel", "retry", "logs", "jobs", "queues", "workers"} {
		require.Contains(t, res.stdout, "\n  "+cmd+" ", "root help lists %s", cmd)
	}
}

func TestExtraCommands(t *testing.T) {
	t.Parallel()
	var server, token string
	env := map[string]string{"STINT_SERVER": "http://from-env:1", "STINT_TOKEN": "env-token"}
	cfg := &config{getenv: func(k string) string { return env[k] }}
	root := newRoot(cfg,
		&cobra.Command{Use: "worker", RunE: func(cmd *cobra.Command, _ []string) error {
			// An extra command reads the connection flags, filled from the environment.
			server, _ = cmd.Flags().GetString("server")
			token, _ = cmd.Flags().GetString("token")
			return nil
		}},
		&cobra.Command{Use: "bad", RunE: func(*cobra.Command, []string) error { return Usagef("--data-dir: missing") }},
	)
	var stderr bytes.Buffer
	root.SetErr(&stderr)
	root.SetArgs([]string{"worker"})
	require.Equal(t, 0, Execute(context.Background(), root))
	require.Equal(t, "http://from-env:1", server)
	require.Equal(t, "env-token", token)

	root.SetArgs([]string{"bad"})
	require.Equal(t, 2, Execute(context.Background(), root))
	require.Equal(t, "stint: --data-dir: missing\nRun 'stint bad --help' for usage.\n", stderr.String())
}

func TestInterrupted(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t)
	root := newRoot(&config{getenv: func(string) string { return "" }, clock: clock.NewFake(testNow), loc: time.UTC})
	var stderr bytes.Buffer
	root.SetErr(&stderr)
	root.SetArgs([]string{"--server", api.URL, "runs", "get", "r1"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, 130, Execute(ctx, root))
	require.Equal(t, "stint: interrupted\n", stderr.String())
}

func TestServerAndToken(t *testing.T) {
	t.Parallel()
	const answer = `{"items":[]}`
	tests := []struct {
		name      string
		env       map[string]string
		flags     func(url string) []string
		wantAuth  string
		wantFirst bool // the request reached the fake API through env or flag
	}{
		{
			name:     "flags",
			flags:    func(u string) []string { return []string{"--server", u, "--token", "t1"} },
			wantAuth: "Bearer t1",
		},
		{
			name:     "environment",
			env:      map[string]string{"STINT_TOKEN": "t2"},
			flags:    func(string) []string { return nil },
			wantAuth: "Bearer t2",
		},
		{
			name:     "flag beats environment",
			env:      map[string]string{"STINT_SERVER": "http://127.0.0.1:1", "STINT_TOKEN": "t2"},
			flags:    func(u string) []string { return []string{"--server", u, "--token", "t3"} },
			wantAuth: "Bearer t3",
		},
		{
			name:  "no token",
			flags: func(u string) []string { return []string{"--server", u} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, exchange{method: "GET", path: "/v1/queues", answer: answer})
			env := map[string]string{}
			for k, v := range tt.env {
				env[k] = v
			}
			if _, ok := env["STINT_SERVER"]; !ok {
				env["STINT_SERVER"] = api.URL
			}
			res := run(t, env, append(tt.flags(api.URL), "queues", "list")...)
			require.Equal(t, 0, res.code, res.stderr)
			api.check(t)
			got := api.requests()[0].header
			require.Equal(t, tt.wantAuth, got.Get("Authorization"))
			require.Equal(t, "stint-cli", got.Get("User-Agent"))
		})
	}
}

func TestDefaultServer(t *testing.T) {
	t.Parallel()
	cfg := &config{getenv: func(string) string { return "" }}
	root := newRoot(cfg)
	require.NoError(t, root.ParseFlags(nil))
	c, err := cfg.client(root)
	require.NoError(t, err)
	require.Equal(t, []string{"http://127.0.0.1:8080"}, c.Servers())
}

func TestProblemOutput(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, exchange{
		method: "POST", path: "/v1/jobs", body: `{"shell":"echo hi","priority":1000000}`,
		status: 400, contentType: "application/problem+json",
		answer: `{"title":"invalid job","status":400,"detail":"1 field is wrong","errors":[{"field":"priority","message":"must be between -1000 and 1000"}]}`,
	})
	res := run(t, nil, "--server", api.URL, "submit", "--shell", "echo hi", "--priority", "1000000")
	require.Equal(t, ExitUsage, res.code, "a refused field is bad input")
	require.Empty(t, res.stdout)
	require.Equal(t, "stint: invalid job: 1 field is wrong\n  priority: must be between -1000 and 1000\n", res.stderr)
	api.check(t)
}

func TestTransportErrorOutput(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t)
	url := api.URL
	api.Close()
	res := run(t, nil, "--server", url, "runs", "get", "r1")
	require.Equal(t, ExitUnreachable, res.code)
	require.True(t, strings.HasPrefix(res.stderr, "stint: GET "+url+"/v1/runs/r1: "), res.stderr)
}
