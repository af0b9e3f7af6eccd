package cli

import "testing"

const runDetail = `{"id":"r1","job_id":"j1","job_name":"backup","status":"failed","queue":"default","priority":2,
	"trigger":"submit","args":{"a":"1"},"scheduled_for":"2030-01-02T11:50:00Z","created_at":"2030-01-02T11:50:00Z",
	"started_at":"2030-01-02T11:51:00Z","finished_at":"2030-01-02T11:55:30Z","attempt":2,"max_attempts":2,
	"error":"exit code 3","attempts":[
	{"n":1,"worker_id":"w1","status":"failed","exit_code":3,"started_at":"2030-01-02T11:51:00Z","finished_at":"2030-01-02T11:51:02.5Z"},
	{"n":2,"worker_id":"w2","status":"timed_out","error":"timeout 4m","started_at":"2030-01-02T11:51:30Z","finished_at":"2030-01-02T11:55:30Z"}]}`

func TestRuns(t *testing.T) {
	t.Parallel()
	runCLICases(t, []cliCase{
		{
			name:      "get",
			args:      []string{"runs", "get", "r1"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/r1", answer: runDetail}},
			stdout: `ID:             r1
Job:            backup (j1)
Status:         failed
Error:          exit code 3
Queue:          default
Priority:       2
Trigger:        submit
Args:           {"a":"1"}
Scheduled for:  2030-01-02 11:50:00 (10m ago)
Created:        2030-01-02 11:50:00 (10m ago)
Started:        2030-01-02 11:51:00 (9m ago)
Finished:       2030-01-02 11:55:30 (4m ago)
Duration:       4m30s
Attempt:        2/2

Attempts:
  N  WORKER  STATUS     EXIT  STARTED  DURATION  ERROR
  1  w1      failed     3     9m ago   2.5s      -
  2  w2      timed_out  -     8m ago   4m0s      timeout 4m
`,
		},
		{
			name: "get a waiting run",
			args: []string{"runs", "get", "r2"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/r2", answer: `{"id":"r2","job_id":"j1","status":"queued",
				"pending_code":"no_worker_fits","pending_reason":"no worker has 4 GPUs","queue":"gpu","trigger":"cron",
				"scheduled_for":"2030-01-02T12:00:00Z","created_at":"2030-01-02T11:59:58Z"}`}},
			stdout: `ID:             r2
Job:            j1
Status:         queued (no_worker_fits)
Waiting:        no worker has 4 GPUs
Queue:          gpu
Priority:       0
Trigger:        cron
Scheduled for:  2030-01-02 12:00:00 (just now)
Created:        2030-01-02 11:59:58 (2s ago)
Started:        -
Finished:       -
Duration:       -
Attempt:        0
`,
		},
		{
			name: "get a run waiting on dependencies",
			args: []string{"runs", "get", "r3"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/r3", answer: `{"id":"r3","job_id":"j1","status":"waiting",
				"pending_code":"waiting_on_dependencies","pending_reason":"waiting for 2 upstream runs",
				"queue":"default","trigger":"submit","scheduled_for":"2030-01-02T12:00:00Z","created_at":"2030-01-02T12:00:00Z",
				"depends_on":[{"run":"r1","condition":"succeeded"},{"run":"r2","condition":"finished"}]}`}},
			stdout: `ID:             r3
Job:            j1
Status:         waiting (waiting_on_dependencies)
Waiting:        waiting for 2 upstream runs
Queue:          default
Priority:       0
Trigger:        submit
Depends on:     r1 succeeded
                r2 finished
Scheduled for:  2030-01-02 12:00:00 (just now)
Created:        2030-01-02 12:00:00 (just now)
Started:        -
Finished:       -
Duration:       -
Attempt:        0
`,
		},
		{
			name: "get, with a disruption",
			args: []string{"runs", "get", "r1"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","job_name":"backup","status":"succeeded",
				"queue":"default","trigger":"submit","scheduled_for":"2030-01-02T11:50:00Z","created_at":"2030-01-02T11:50:00Z",
				"attempt":2,"max_attempts":1,"disruptions":1}`}},
			stdout: `ID:             r1
Job:            backup
Status:         succeeded
Queue:          default
Priority:       0
Trigger:        submit
Scheduled for:  2030-01-02 11:50:00 (10m ago)
Created:        2030-01-02 11:50:00 (10m ago)
Started:        -
Finished:       -
Duration:       -
Attempt:        2/1+1
Disruptions:    1 (attempts lost to a dead worker or server, not counted)
`,
		},
		{
			name:      "get json",
			args:      []string{"runs", "get", "r1", "--json"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"running","scheduled_for":"2030-01-02T11:50:00Z","created_at":"2030-01-02T11:50:00Z"}`}},
			stdout: `{
  "id": "r1",
  "job_id": "",
  "job_name": "",
  "namespace": "",
  "status": "running",
  "queue": "",
  "priority": 0,
  "trigger": "",
  "scheduled_for": "2030-01-02T11:50:00Z",
  "created_at": "2030-01-02T11:50:00Z",
  "attempt": 0,
  "max_attempts": 0,
  "disruptions": 0
}
`,
		},
		{
			name:      "get missing",
			args:      []string{"runs", "get", "nope"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs/nope", status: 404, contentType: "application/problem+json", answer: `{"title":"run not found","status":404,"detail":"no run \"nope\""}`}},
			stderr:    "stint: run not found: no run \"nope\"\n",
			code:      ExitNotFound,
		},
		{
			name: "list",
			args: []string{"runs", "list", "--job", "backup", "--status", "running", "--queue", "q", "--worker", "w1", "--limit", "2"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs", query: "job=backup&status=running&queue=q&worker=w1&limit=2",
				answer: `{"items":[
				{"id":"r3","job_id":"j1","job_name":"backup","status":"running","queue":"q","trigger":"manual","attempt":1,"max_attempts":3,
				 "created_at":"2030-01-02T11:58:00Z","started_at":"2030-01-02T11:59:00Z","cancel_requested":true},
				{"id":"r2","job_id":"j1","job_name":"backup","status":"running","queue":"q","trigger":"cron","attempt":2,
				 "created_at":"2030-01-01T09:00:00Z","started_at":"2030-01-02T11:59:59.75Z"}],"next_cursor":"cur2"}`}},
			stdout: `ID  JOB     STATUS                QUEUE  ATTEMPT  TRIGGER  CREATED  DURATION
r3  backup  running (cancelling)  q      1/3      manual   2m ago   1m0s
r2  backup  running               q      2        cron     27h ago  250ms
`,
			stderr: "more: --cursor cur2\n",
		},
		{
			// --namespace filters the list, not only the job it names.
			name:      "list of a namespace",
			args:      []string{"--namespace", "nonexistent", "runs", "list"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs", query: "namespace=nonexistent", answer: `{"items":[]}`}},
			stdout:    "ID  JOB  STATUS  QUEUE  ATTEMPT  TRIGGER  CREATED  DURATION\n",
		},
		{
			name:      "list empty",
			args:      []string{"runs", "ls"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs", answer: `{"items":[]}`}},
			stdout:    "ID  JOB  STATUS  QUEUE  ATTEMPT  TRIGGER  CREATED  DURATION\n",
		},
		{
			name:      "list json",
			args:      []string{"runs", "list", "--json", "--cursor", "c1"},
			exchanges: []exchange{{method: "GET", path: "/v1/runs", query: "cursor=c1", answer: `{"items":[],"next_cursor":"c2"}`}},
			stdout:    "{\n  \"items\": [],\n  \"next_cursor\": \"c2\"\n}\n",
		},
		{
			name:      "cancel",
			args:      []string{"runs", "cancel", "r1"},
			exchanges: []exchange{{method: "POST", path: "/v1/runs/r1/cancel", answer: `{"run":{"id":"r1","status":"cancelled","attempt":0}}`}},
			stdout:    "run r1 cancelled\n",
		},
		{
			name:      "cancel a running run",
			args:      []string{"cancel", "r1"},
			exchanges: []exchange{{method: "POST", path: "/v1/runs/r1/cancel", answer: `{"run":{"id":"r1","status":"running","attempt":1,"cancel_requested":true}}`}},
			stdout:    "run r1 running, cancel requested (attempt 1)\n",
		},
		{
			name:      "cancel a final run",
			args:      []string{"runs", "cancel", "r1"},
			exchanges: []exchange{{method: "POST", path: "/v1/runs/r1/cancel", status: 409, contentType: "application/problem+json", answer: `{"title":"run is final","status":409,"detail":"run r1 succeeded"}`}},
			stderr:    "stint: run is final: run r1 succeeded\n",
			code:      ExitConflict,
		},
		{
			name:      "retry",
			args:      []string{"retry", "r1"},
			exchanges: []exchange{{method: "POST", path: "/v1/runs/r1/retry", answer: `{"run":{"id":"r1","status":"queued","attempt":3,"max_attempts":2}}`}},
			stdout:    "run r1 queued (attempt 3/2)\n",
		},
		{
			name:      "retry json",
			args:      []string{"runs", "retry", "r1", "--json"},
			exchanges: []exchange{{method: "POST", path: "/v1/runs/r1/retry", answer: `{"run":{"id":"r1","status":"queued"}}`}},
			stdoutHas: []string{"\"status\": \"queued\""},
		},
	})
}
