package cli

import (
	"net/http"
	"testing"
)

func TestJobs(t *testing.T) {
	t.Parallel()
	runCLICases(t, []cliCase{
		{
			name: "list",
			args: []string{"jobs", "list", "--queue", "io", "--enabled=false", "--limit", "10"},
			exchanges: []exchange{{method: "GET", path: "/v1/jobs", query: "queue=io&enabled=false&limit=10", answer: `{"items":[
				{"id":"j1","name":"nightly","queue":"io","enabled":false,"schedule":{"cron":"0 3 * * *","timezone":"Europe/Paris"},
				 "next_fire_times":["2030-01-03T02:00:00Z"],"last_run":{"id":"r9","status":"succeeded","created_at":"2030-01-02T02:00:00Z"}},
				{"id":"j2","name":"adhoc","queue":"io","enabled":false}]}`}},
			stdout: `NAME     ID  QUEUE  SCHEDULE                  ENABLED  LAST RUN           NEXT
nightly  j1  io     0 3 * * * (Europe/Paris)  no       succeeded 10h ago  in 14h
adhoc    j2  io     -                         no       -                  -
`,
		},
		{
			name:      "list enabled",
			args:      []string{"jobs", "ls", "--enabled", "--json"},
			exchanges: []exchange{{method: "GET", path: "/v1/jobs", query: "enabled=true", answer: `{"items":[],"next_cursor":"c"}`}},
			stdout:    "{\n  \"items\": [],\n  \"next_cursor\": \"c\"\n}\n",
		},
		{
			name: "get",
			args: []string{"jobs", "get", "team/nightly"},
			exchanges: []exchange{{method: "GET", path: "/v1/jobs/team%2Fnightly", answer: `{"id":"j1","namespace":"team","name":"nightly",
				"command":["./nightly","--full"],"args":{"x":1},"env":{"B":"secret","A":"1"},"dir":"/srv","queue":"io","priority":5,
				"requirements":{"cpu":1.5,"memory_mb":512,"labels":{"zone":"eu"}},"timeout":"10m","enabled":true,
				"retry":{"max_attempts":3,"initial_delay":"30s","multiplier":2,"max_delay":"10m"},
				"schedule":{"cron":"0 3 * * *"},"concurrency":{"policy":"forbid"},"tags":["a","b"],
				"created_at":"2030-01-01T12:00:00Z","updated_at":"2030-01-02T11:00:00Z",
				"next_fire_times":["2030-01-03T03:00:00Z","2030-01-04T03:00:00Z"],
				"last_run":{"id":"r9","status":"failed","created_at":"2030-01-02T03:00:00Z"}}`}},
			stdout: `Name:          nightly
ID:            j1
Namespace:     team
Command:       ./nightly --full
Args:          {"x":1}
Env:           A,B
Dir:           /srv
Queue:         io
Priority:      5
Requirements:  cpu 1.5, memory 512Mi, labels zone=eu
Timeout:       10m0s
Retry:         max 3 attempts, backoff 30s x2 up to 10m0s
Schedule:      0 3 * * *
Misfire:       run_once
Next fires:    2030-01-03 03:00:00 (in 15h)
               2030-01-04 03:00:00 (in 39h)
Concurrency:   forbid
Tags:          a,b
Enabled:       yes
Created:       2030-01-01 12:00:00 (24h ago)
Updated:       2030-01-02 11:00:00 (1h ago)
Last run:      r9 failed 9h ago
`,
		},
		{
			name:      "get shell job",
			args:      []string{"jobs", "get", "j2"},
			exchanges: []exchange{{method: "GET", path: "/v1/jobs/j2", answer: `{"id":"j2","name":"s","shell":"echo hi","queue":"default"}`}},
			stdout: `Name:          s
ID:            j2
Shell:         echo hi
Queue:         default
Priority:      0
Requirements:  -
Retry:         -
Schedule:      -
Enabled:       no
Created:       -
Updated:       -
`,
		},
		{
			name: "delete",
			args: []string{"jobs", "delete", "nightly"},
			exchanges: []exchange{{method: "DELETE", path: "/v1/jobs/nightly",
				answer: `{"items":[{"id":"r1","status":"cancelled"},{"id":"r2","status":"running","attempt":1,"cancel_requested":true}]}`}},
			stdout: "job nightly deleted\nrun r1 cancelled\nrun r2 running, cancel requested (attempt 1)\n",
		},
		{
			name:      "delete, no body",
			args:      []string{"jobs", "rm", "nightly"},
			exchanges: []exchange{{method: "DELETE", path: "/v1/jobs/nightly", status: http.StatusNoContent}},
			stdout:    "job nightly deleted\n",
		},
		{
			name:      "delete json",
			args:      []string{"jobs", "delete", "nightly", "--json"},
			exchanges: []exchange{{method: "DELETE", path: "/v1/jobs/nightly", answer: `{"items":[]}`}},
			stdout:    "{\n  \"items\": []\n}\n",
		},
		{
			name: "trigger with args",
			args: []string{"jobs", "trigger", "nightly", "--arg", "full=yes", "--idempotency-key", "k"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs/nightly/trigger", body: `{"args":{"full":"yes"},"idempotency_key":"k"}`,
				status: http.StatusCreated, answer: `{"run":{"id":"r5","status":"queued"}}`}},
			stdout: "run r5 queued\n",
		},
		{
			name: "trigger without args",
			args: []string{"jobs", "trigger", "nightly", "--json"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs/nightly/trigger", body: `{}`,
				status: http.StatusCreated, answer: `{"run":{"id":"r5","status":"queued"}}`}},
			stdoutHas: []string{"\"id\": \"r5\""},
		},
		{
			name: "cancel",
			args: []string{"jobs", "cancel", "nightly"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs/nightly/cancel", answer: `{"items":[
				{"id":"r1","status":"cancelled"},{"id":"r2","status":"running","attempt":1,"cancel_requested":true}]}`}},
			stdout: "run r1 cancelled\nrun r2 running, cancel requested (attempt 1)\n",
		},
		{
			name:      "cancel with nothing active",
			args:      []string{"jobs", "cancel", "nightly"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs/nightly/cancel", answer: `{"items":[]}`}},
			stdout:    "job nightly has no active runs\n",
		},
		{
			name:      "enable",
			args:      []string{"jobs", "enable", "nightly"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/jobs/nightly", body: `{"enabled":true}`, answer: `{"id":"j1","enabled":true}`}},
			stdout:    "job nightly enabled\n",
		},
		{
			name:      "disable",
			args:      []string{"jobs", "disable", "nightly"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/jobs/nightly", body: `{"enabled":false}`, answer: `{"id":"j1","enabled":false}`}},
			stdout:    "job nightly disabled\n",
		},
		{
			name:      "disable missing",
			args:      []string{"jobs", "disable", "nope"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/jobs/nope", body: `{"enabled":false}`, status: 404, contentType: "application/problem+json", answer: `{"title":"job not found","status":404}`}},
			stderr:    "stint: job not found\n",
			code:      ExitNotFound,
		},
	})
}
