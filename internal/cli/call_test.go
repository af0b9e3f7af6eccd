package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCallBadServer checks that a bad --server is bad usage (exit code 2) for the commands
// built on objectCmd and listCmd, before any request.
func TestCallBadServer(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"workers", "drain", "w1"}, {"queues", "list"}, {"jobs", "enable", "j1"}} {
		res := run(t, nil, append([]string{"--server", "ftp://x"}, args...)...)
		require.Equal(t, 2, res.code, "%v: %s", args, res.stderr)
		require.Empty(t, res.stdout, "%v", args)
		require.Contains(t, res.stderr, "stint: --server: ", "%v", args)
	}
}

// TestCallErrors checks the error path that callAndPrint gives every get, list and action
// command: an API problem is printed as the problem's title and detail on stderr, exit code
// 1, and nothing goes to stdout, with or without --json.
func TestCallErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args               []string
		method, path, body string // the request, which the server answers with a 404
	}{
		{[]string{"queues", "get", "nope"}, "GET", "/v1/queues/nope", ""},
		{[]string{"queues", "pause", "nope"}, "PATCH", "/v1/queues/nope", `{"paused":true}`},
		{[]string{"workers", "get", "nope", "--json"}, "GET", "/v1/workers/nope", ""},
		{[]string{"workers", "drain", "nope"}, "POST", "/v1/workers/nope/drain", ""},
		{[]string{"jobs", "get", "nope"}, "GET", "/v1/jobs/nope", ""},
		{[]string{"jobs", "rm", "nope"}, "DELETE", "/v1/jobs/nope", ""},
		{[]string{"jobs", "cancel", "nope"}, "POST", "/v1/jobs/nope/cancel", ""},
		{[]string{"jobs", "trigger", "nope"}, "POST", "/v1/jobs/nope/trigger", `{}`},
		{[]string{"runs", "retry", "nope", "--json"}, "POST", "/v1/runs/nope/retry", ""},
		{[]string{"workers", "list"}, "GET", "/v1/workers", ""},
	}
	cases := make([]cliCase, 0, len(tests))
	for _, tt := range tests {
		cases = append(cases, cliCase{
			name: strings.Join(tt.args, " "),
			args: tt.args,
			exchanges: []exchange{{method: tt.method, path: tt.path, body: tt.body, status: 404, contentType: "application/problem+json",
				answer: `{"title":"not found","status":404,"detail":"no such thing"}`}},
			stderr: "stint: not found: no such thing\n",
			code:   ExitNotFound,
		})
	}
	runCLICases(t, cases)
}
