package cli

import "testing"

func TestQueues(t *testing.T) {
	t.Parallel()
	runCLICases(t, []cliCase{
		{
			name: "list",
			args: []string{"queues", "list"},
			exchanges: []exchange{{method: "GET", path: "/v1/queues", answer: `{"items":[
				{"name":"default","priority":0,"max_concurrency":0,"paused":false,"depth":{"queued":12,"running":3,"succeeded":100}},
				{"name":"gpu","priority":10,"max_concurrency":2,"paused":true,"rate_limit":{"rate":100,"per":"1m0s"},"depth":{"waiting":1,"scheduled":4}}]}`}},
			// The rate limit shows without --json.
			stdout: `NAME     PAUSED  PRIORITY  MAX CONCURRENCY  RATE      WAITING  SCHEDULED  QUEUED  RUNNING
default  no      0         -                -         0        0          12      3
gpu      yes     10        2                100/1m0s  1        4          0       0
`,
		},
		{
			name:      "list json",
			args:      []string{"queues", "list", "--json"},
			exchanges: []exchange{{method: "GET", path: "/v1/queues", answer: `{"items":[{"name":"q","priority":1,"max_concurrency":0,"paused":false,"depth":{}}]}`}},
			stdout: `{
  "items": [
    {
      "name": "q",
      "priority": 1,
      "max_concurrency": 0,
      "paused": false,
      "depth": {}
    }
  ]
}
`,
		},
		{
			name:      "get",
			args:      []string{"queues", "get", "gpu"},
			exchanges: []exchange{{method: "GET", path: "/v1/queues/gpu", answer: `{"name":"gpu","priority":10,"max_concurrency":2,"paused":true,"depth":{"running":2}}`}},
			stdout: `NAME  PAUSED  PRIORITY  MAX CONCURRENCY  RATE  WAITING  SCHEDULED  QUEUED  RUNNING
gpu   yes     10        2                -     0        0          0       2
`,
		},
		{
			name:      "pause",
			args:      []string{"queues", "pause", "gpu"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/queues/gpu", body: `{"paused":true}`, answer: `{"name":"gpu","paused":true}`}},
			stdout:    "queue gpu paused\n",
		},
		{
			name:      "resume",
			args:      []string{"queues", "resume", "gpu"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/queues/gpu", body: `{"paused":false}`, answer: `{"name":"gpu","paused":false}`}},
			stdout:    "queue gpu resumed\n",
		},
		{
			name:      "set both",
			args:      []string{"queues", "set", "gpu", "--max-concurrency", "0", "--priority", "-1"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/queues/gpu", body: `{"max_concurrency":0,"priority":-1}`, answer: `{"name":"gpu"}`}},
			stdout:    "queue gpu updated\n",
		},
		{
			name:      "set one, json",
			args:      []string{"queues", "set", "gpu", "--priority", "7", "--json"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/queues/gpu", body: `{"priority":7}`, answer: `{"name":"gpu","priority":7}`}},
			stdoutHas: []string{"\"priority\": 7"},
		},
		{
			name:      "set a rate limit",
			args:      []string{"queues", "set", "mail", "--rate", "100/1m"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/queues/mail", body: `{"rate_limit":{"rate":100,"per":"1m0s"}}`, answer: `{"name":"mail"}`}},
			stdout:    "queue mail updated\n",
		},
		{
			name:      "create a queue with a rate limit",
			args:      []string{"queues", "set", "mail", "--rate", "100/1m", "--create"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/queues/mail", query: "create=true", body: `{"rate_limit":{"rate":100,"per":"1m0s"}}`, answer: `{"name":"mail"}`}},
			stdout:    "queue mail updated\n",
		},
		{
			name:      "remove a rate limit",
			args:      []string{"queues", "set", "mail", "--rate", "0"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/queues/mail", body: `{"rate_limit":{"rate":0,"per":"0s"}}`, answer: `{"name":"mail"}`}},
			stdout:    "queue mail updated\n",
		},
		{name: "bad rate", args: []string{"queues", "set", "mail", "--rate", "lots"}, code: 2, stderr: "--rate: want N/DURATION"},
	})
}
