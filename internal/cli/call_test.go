package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCallErrors checks the error path that callAndPrint gives every get, list and action
// command: an API problem is printed as the problem's title and detail on stderr, exit code
// 1, and nothing goes to stdout, with or without --json.
func TestCallErrors(t *testing.T) {
	t.Parallel()
	notFound := func(method, path, title string) []exchange {
		return []exchange{{method: method, path: path, status: 404, contentType: "application/problem+json",
			answer: `{"title":"` + title + `","status":404,"detail":"no such thing"}`}}
	}
	runCLICases(t, []cliCase{
		{
			name:      "queue get",
			args:      []string{"queues", "get", "nope"},
			exchanges: notFound("GET", "/v1/queues/nope", "queue not found"),
			stderr:    "stint: queue not found: no such thing\n",
			code:      1,
		},
		{
			name:      "queue pause",
			args:      []string{"queues", "pause", "nope"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/queues/nope", body: `{"paused":true}`, status: 404, contentType: "application/problem+json", answer: `{"title":"queue not found","status":404}`}},
			stderr:    "stint: queue not found\n",
			code:      1,
		},
		{
			name:      "worker get, json",
			args:      []string{"workers", "get", "nope", "--json"},
			exchanges: notFound("GET", "/v1/workers/nope", "worker not found"),
			stderr:    "stint: worker not found: no such thing\n",
			code:      1,
		},
		{
			name:      "worker drain",
			args:      []string{"workers", "drain", "nope"},
			exchanges: notFound("POST", "/v1/workers/nope/drain", "worker not found"),
			stderr:    "stint: worker not found: no such thing\n",
			code:      1,
		},
		{
			name:      "job get",
			args:      []string{"jobs", "get", "nope"},
			exchanges: notFound("GET", "/v1/jobs/nope", "job not found"),
			stderr:    "stint: job not found: no such thing\n",
			code:      1,
		},
		{
			name:      "job delete",
			args:      []string{"jobs", "rm", "nope"},
			exchanges: notFound("DELETE", "/v1/jobs/nope", "job not found"),
			stderr:    "stint: job not found: no such thing\n",
			code:      1,
		},
		{
			name:      "job cancel",
			args:      []string{"jobs", "cancel", "nope"},
			exchanges: notFound("POST", "/v1/jobs/nope/cancel", "job not found"),
			stderr:    "stint: job not found: no such thing\n",
			code:      1,
		},
		{
			name:      "job trigger",
			args:      []string{"jobs", "trigger", "nope"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs/nope/trigger", body: `{}`, status: 404, contentType: "application/problem+json", answer: `{"title":"job not found","status":404}`}},
			stderr:    "stint: job not found\n",
			code:      1,
		},
		{
			name:      "run retry, json",
			args:      []string{"runs", "retry", "nope", "--json"},
			exchanges: notFound("POST", "/v1/runs/nope/retry", "run not found"),
			stderr:    "stint: run not found: no such thing\n",
			code:      1,
		},
		{
			name:      "list",
			args:      []string{"jobs", "list", "--queue", "nope"},
			exchanges: []exchange{{method: "GET", path: "/v1/jobs", query: "queue=nope", status: 404, contentType: "application/problem+json", answer: `{"title":"queue not found","status":404}`}},
			stderr:    "stint: queue not found\n",
			code:      1,
		},
	})
}

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
