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
			name:      "follow an attempt",
			args:      []string{"logs", "-f", "r1", "--attempt", "2", "--stream", "stdout"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/r1/logs", query: "attempt=2&follow=true&stream=stdout", contentType: "text/plain", answer: "x"}},
			stdout:    "x",
		},
		{
			name:      "missing run",
			args:      []string{"logs", "nope"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/nope/logs", status: 404, contentType: "application/problem+json", answer: `{"title":"run not found","status":404}`}},
			stderr:    "stint: run not found\n",
			code:      ExitNotFound,
		},
	})
}
