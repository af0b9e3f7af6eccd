package cli

import "testing"

const workerList = `{"items":[
	{"id":"host-1","labels":{"zone":"eu","gpu":"a100"},"capacity":{"cpu":8,"memory_mb":16384,"gpu":1,"slots":4},
	 "used":{"cpu":1.5,"memory_mb":512,"gpu":0,"slots":1},"running":1,"state":"active","last_heartbeat":"2030-01-02T11:59:57Z"},
	{"id":"host-2","capacity":{"cpu":2,"memory_mb":2048,"gpu":0,"slots":2},"used":{"cpu":0,"memory_mb":0,"gpu":0,"slots":0},
	 "running":0,"state":"lost","last_heartbeat":"2030-01-02T10:00:00Z"}]}`

func TestWorkers(t *testing.T) {
	t.Parallel()
	const table = `ID      STATE   RUNNING  SLOTS  CPU    MEMORY       GPU  LABELS            HEARTBEAT
host-1  active  1        1/4    1.5/8  512/16384Mi  0/1  gpu=a100,zone=eu  3s ago
host-2  lost    0        0/2    0/2    0/2048Mi     0/0  -                 2h ago
`
	runCLICases(t, []cliCase{
		{
			name:      "workers alone lists",
			args:      []string{"workers"},
			exchanges: []exchange{{method: "GET", path: "/v1/workers", answer: workerList}},
			stdout:    table,
		},
		{
			name:      "list",
			args:      []string{"workers", "list"},
			exchanges: []exchange{{method: "GET", path: "/v1/workers", answer: workerList}},
			stdout:    table,
		},
		{
			name:      "list json",
			args:      []string{"workers", "--json"},
			exchanges: []exchange{{method: "GET", path: "/v1/workers", answer: `{"items":[]}`}},
			stdout:    "{\n  \"items\": []\n}\n",
		},
		{
			name: "get",
			args: []string{"workers", "get", "host-1"},
			exchanges: []exchange{{method: "GET", path: "/v1/workers/host-1", answer: `{"id":"host-1","labels":{"zone":"eu"},
				"capacity":{"cpu":8,"memory_mb":16384,"gpu":1,"slots":4},"used":{"cpu":1.5,"memory_mb":512,"gpu":0,"slots":1},
				"running":1,"state":"draining","registered_at":"2030-01-02T08:00:00Z","last_heartbeat":"2030-01-02T11:59:57Z"}`}},
			stdout: `ID:              host-1
State:           draining
Labels:          zone=eu
Running:         1
Slots:           1 of 4 in use
CPU:             1.5 of 8 in use
Memory:          512Mi of 16384Mi in use
GPU:             0 of 1 in use
Registered:      2030-01-02 08:00:00 (4h ago)
Last heartbeat:  2030-01-02 11:59:57 (3s ago)
`,
		},
		{
			name:      "drain",
			args:      []string{"workers", "drain", "host-1"},
			exchanges: []exchange{{method: "POST", path: "/v1/workers/host-1/drain", answer: `{"id":"host-1","state":"draining"}`}},
			stdout:    "worker host-1 draining\n",
		},
	})
}
