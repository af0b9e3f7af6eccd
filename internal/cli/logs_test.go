package cli

import "testing"

func TestLogs(t *testing.T) {
	t.Parallel()
	runCLICases(t, []cliCase{
		{
			name:      "latest attempt",
			args:      []string{"logs", "r1"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/r1/logs", contentType: "text/plain", answer: "out\nerr\n"}},
			stdout:    "out\nerr\n",
		},
		{
			name: "follow an attempt",
			args: []string{"logs", "-f", "r1", "--attempt", "2", "--stream", "stdout"},
			exchanges: []exchange{
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"running","attempt":2}`},
				{method: "GET", path: "/v1/runs/r1/logs", query: "attempt=2&follow=true&stream=stdout", contentType: "text/plain", answer: "x"},
			},
			stdout: "x",
		},
		{
			// An attempt the run never made is not an empty log.
			name:      "attempt never made",
			args:      []string{"logs", "r1", "--attempt", "5"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"succeeded","attempt":1}`}},
			stderr:    "stint: run r1 has no attempt 5: it made 1\n",
			code:      ExitNotFound,
		},
		{
			name:      "following an attempt a finished run never made",
			args:      []string{"logs", "r1", "-f", "--attempt", "2"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"failed","attempt":1}`}},
			stderr:    "stint: run r1 has no attempt 2: it made 1\n",
			code:      ExitNotFound,
		},
		{
			name: "following a retry to come",
			args: []string{"logs", "r1", "-f", "--attempt", "2"},
			exchanges: []exchange{
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"scheduled","attempt":1}`},
				{method: "GET", path: "/v1/runs/r1/logs", query: "attempt=2&follow=true", contentType: "text/plain", answer: "again\n"},
			},
			stdout: "again\n",
		},
		{
			// The server cuts the tail: the CLI asks for it.
			name:      "tail",
			args:      []string{"logs", "r1", "--tail", "2"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/r1/logs", query: "tail=2", contentType: "text/plain", answer: "3\nno newline"}},
			stdout:    "3\nno newline",
		},
		{
			name: "tail with follow, stamped",
			args: []string{"logs", "r1", "-f", "--tail", "0", "--timestamps"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/r1/logs", query: "follow=true&tail=0&timestamps=true", contentType: "text/plain",
				answer: "2030-01-02T12:00:00.000000000Z new\n"}},
			stdout: "2030-01-02T12:00:00.000000000Z new\n",
		},
		{name: "bad tail", args: []string{"logs", "r1", "--tail", "-2"}, code: 2, stderr: "--tail: must be 0 or more (-1: all)"},
		{
			name:      "missing run",
			args:      []string{"logs", "nope"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/nope/logs", status: 404, contentType: "application/problem+json", answer: `{"title":"run not found","status":404}`}},
			stderr:    "stint: run not found\n",
			code:      ExitNotFound,
		},
	})
}
