package cli

import (
	"net/http"
	"testing"
)

const (
	createdAnswer = `{"job":{"id":"j1","name":"backup","queue":"default"},"run":{"id":"r1","job_id":"j1","status":"queued"}}`
	succeededRun  = `{"id":"r1","job_id":"j1","status":"succeeded","attempt":1,"max_attempts":1}`
)

func TestSubmit(t *testing.T) {
	t.Parallel()
	runCLICases(t, []cliCase{
		{
			name: "command after --",
			args: []string{"submit", "--name", "backup", "--", "tar", "-c", "-f", "x.tar", "/data"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"name":"backup","command":["tar","-c","-f","x.tar","/data"]}`,
				status: http.StatusCreated, answer: createdAnswer}},
			stdout: "run r1 queued\njob j1 backup\n",
		},
		{
			name: "command without --: its flags are its own",
			args: []string{"submit", "ls", "-la", "--json"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"command":["ls","-la","--json"]}`,
				status: http.StatusCreated, answer: createdAnswer}},
			stdout: "run r1 queued\njob j1 backup\n",
		},
		{
			name: "every flag",
			args: []string{"submit", "--shell", "echo $X", "--name", "n", "--queue", "q", "--priority", "-3", "--timeout", "10m",
				"--retries", "3", "--backoff", "30s", "--run-at", "2030-01-02T15:04:05+01:00", "--arg", "a=1", "--arg", "b=x=y",
				"--env", "X=1", "--env", "Y=", "--dir", "/tmp", "--idempotency-key", "k1", "--cpu", "0.5", "--memory", "2G",
				"--gpu", "1", "--label", "zone=eu", "--tag", "t1", "--tag", "t2"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"name":"n","shell":"echo $X","queue":"q","priority":-3,
				"timeout":"10m0s","retry":{"max_attempts":4,"initial_delay":"30s"},"run_at":"2030-01-02T15:04:05+01:00",
				"args":{"a":"1","b":"x=y"},"env":{"X":"1","Y":""},"dir":"/tmp","idempotency_key":"k1",
				"requirements":{"cpu":0.5,"memory_mb":2048,"gpu":1,"labels":{"zone":"eu"}},"tags":["t1","t2"]}`,
				status: http.StatusCreated, answer: createdAnswer}},
			stdout: "run r1 queued\njob j1 backup\n",
		},
		{
			// --retries counts retries: --retries 1 is two attempts in all.
			name: "one retry",
			args: []string{"submit", "--retries", "1", "--shell", "x"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"shell":"x","retry":{"max_attempts":2}}`,
				status: http.StatusCreated, answer: createdAnswer}},
			stdout: "run r1 queued\njob j1 backup\n",
		},
		{
			name: "no retry",
			args: []string{"submit", "--retries", "0", "--shell", "x"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"shell":"x","retry":{"max_attempts":1}}`,
				status: http.StatusCreated, answer: createdAnswer}},
			stdout: "run r1 queued\njob j1 backup\n",
		},
		{
			name: "max attempts",
			args: []string{"submit", "--max-attempts", "3", "--shell", "x"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"shell":"x","retry":{"max_attempts":3}}`,
				status: http.StatusCreated, answer: createdAnswer}},
			stdout: "run r1 queued\njob j1 backup\n",
		},
		{name: "retries and max attempts", args: []string{"submit", "--retries", "1", "--max-attempts", "2", "--shell", "x"},
			stderr: "--retries and --max-attempts: give one", code: ExitUsage},
		{name: "negative retries", args: []string{"submit", "--retries", "-1", "--shell", "x"}, stderr: "--retries: must not be negative", code: ExitUsage},
		{name: "zero max attempts", args: []string{"submit", "--max-attempts", "0", "--shell", "x"}, stderr: "--max-attempts: must be 1 or more", code: ExitUsage},
		{
			name: "zero priority is sent when given",
			args: []string{"submit", "--handler", "email", "--priority", "0", "--delay", "90s"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"handler":"email","priority":0,"delay":"1m30s"}`,
				status: http.StatusCreated, answer: createdAnswer}},
			stdout: "run r1 queued\njob j1 backup\n",
		},
		{
			name: "cron job",
			args: []string{"submit", "--name", "nightly", "--cron", "0 3 * * *", "--timezone", "Europe/Paris", "--", "./nightly"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs",
				body:   `{"name":"nightly","command":["./nightly"],"schedule":{"cron":"0 3 * * *","timezone":"Europe/Paris"}}`,
				status: http.StatusCreated, answer: `{"job":{"id":"j2","name":"nightly","next_fire_times":["2030-01-03T02:00:00Z"]},"run":null}`}},
			stdout: "job j2 nightly\nnext 2030-01-03 02:00:00 (in 14h)\n",
		},
		{
			name: "cron job with policies",
			args: []string{"submit", "--name", "sync", "--cron", "@hourly", "--misfire", "skip", "--concurrency", "forbid",
				"--max-concurrent", "2", "--concurrency-key", "c-{{.id}}", "--arg", "id=7", "--", "./sync"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs",
				body: `{"name":"sync","command":["./sync"],"args":{"id":"7"},"schedule":{"cron":"@hourly","misfire":"skip"},` +
					`"concurrency":{"policy":"forbid","max":2,"key":"c-{{.id}}"}}`,
				status: http.StatusCreated, answer: `{"job":{"id":"j4","name":"sync"},"run":null}`}},
			stdoutHas: []string{"job j4 sync"},
		},
		{
			name: "rate limit",
			args: []string{"submit", "--rate", "100/1m", "--handler", "mail"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"handler":"mail","concurrency":{"rate":{"rate":100,"per":"1m0s"}}}`,
				status: http.StatusCreated, answer: `{"job":{"id":"j5","name":"j5"},"run":{"id":"r5","status":"queued"}}`}},
			stdoutHas: []string{"r5"},
		},
		{name: "bad rate", args: []string{"submit", "--rate", "fast", "--handler", "mail"}, code: 2, stderr: "--rate: want N/DURATION"},
		{
			name: "unnamed job: its name is its id",
			args: []string{"submit", "--shell", "x"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`,
				status: http.StatusCreated, answer: `{"job":{"id":"j3","name":"j3"},"run":{"id":"r3","status":"queued"}}`}},
			stdout: "run r3 queued\njob j3\n",
		},
		{
			name: "idempotent replay",
			args: []string{"submit", "--shell", "x", "--idempotency-key", "k"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"shell":"x","idempotency_key":"k"}`,
				status: http.StatusOK, answer: createdAnswer}},
			stdout: "run r1 queued\njob j1 backup\n",
			stderr: "note: an earlier submission had this idempotency key; nothing new was created",
		},
		{
			name: "quiet",
			args: []string{"submit", "-q", "--shell", "x"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`,
				status: http.StatusCreated, answer: createdAnswer}},
			stdout: "r1\n",
		},
		{
			name: "json",
			args: []string{"submit", "--json", "--shell", "x"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`,
				status: http.StatusCreated, answer: `{"job":{"id":"j1","name":"n","queue":"default","created_at":"2030-01-02T12:00:00Z"},"run":{"id":"r1","status":"queued"}}`}},
			stdoutHas: []string{"{\n  \"job\": {\n    \"id\": \"j1\",\n", "\n  \"run\": {\n    \"id\": \"r1\",\n", "\"status\": \"queued\""},
		},
		{
			name: "yaml",
			args: []string{"submit", "-o", "yaml", "--shell", "x"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`,
				status: http.StatusCreated, answer: `{"job":{"id":"j1","name":"n","queue":"default","created_at":"2030-01-02T12:00:00Z"},"run":{"id":"r1","status":"queued"}}`}},
			stdoutHas: []string{"job:\n", "  id: j1\n", "run:\n", "  status: queued\n"},
		},
		{
			// -o wide is the table: submit's lines have no wide columns.
			name: "wide",
			args: []string{"submit", "-o", "wide", "--shell", "x"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`,
				status: http.StatusCreated, answer: createdAnswer}},
			stdout: "run r1 queued\njob j1 backup\n",
		},
		{name: "yaml and quiet", args: []string{"submit", "-o", "yaml", "-q", "--shell", "x"}, code: 2, stderr: "-o yaml and --quiet: give one"},
		{name: "wide and quiet", args: []string{"submit", "-o", "wide", "-q", "--shell", "x"}, code: 2, stderr: "-o wide and --quiet: give one"},
		{name: "json and quiet", args: []string{"submit", "--json", "-q", "--shell", "x"}, code: 2, stderr: "--json and --quiet: give one"},
		{name: "yaml and follow", args: []string{"submit", "-o", "yaml", "--follow", "--shell", "x"}, code: 2,
			stderr: "-o yaml and --follow: --follow prints logs, not the API object"},
		{name: "unknown output", args: []string{"submit", "-o", "xml", "--shell", "x"}, code: 2, stderr: `--output: want table, wide, json or yaml, got "xml"`},
		{name: "json and yaml", args: []string{"submit", "--json", "-o", "yaml", "--shell", "x"}, code: 2, stderr: "--json and -o yaml: give one"},
		{
			name: "wait, yaml: the run as it ended",
			args: []string{"submit", "--wait", "-o", "yaml", "--shell", "x"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`, status: http.StatusCreated, answer: createdAnswer},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"running"}`},
				{method: "GET", path: "/v1/runs/r1", answer: succeededRun},
			},
			stdoutHas: []string{"id: r1\n", "status: succeeded\n"},
		},
		{
			name: "wait until it succeeds",
			args: []string{"submit", "--wait", "--shell", "x"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`, status: http.StatusCreated, answer: createdAnswer},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"queued","pending_code":"no_worker_fits","pending_reason":"no worker is connected"}`},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"queued","pending_code":"no_worker_fits","pending_reason":"no worker is connected"}`},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"running","attempt":1,"max_attempts":1}`},
				{method: "GET", path: "/v1/runs/r1", answer: succeededRun},
				{method: "GET", path: "/v1/runs/r1/logs", query: "attempt=1&stream=stdout", contentType: "text/plain", answer: "HI\n"},
				{method: "GET", path: "/v1/runs/r1/logs", query: "attempt=1&stream=stderr", contentType: "text/plain", answer: "note\n"},
			},
			stdout: "HI\n",
			stderr: "run r1 queued\njob j1 backup\nrun r1 queued: no worker is connected\nrun r1 running (attempt 1/1)\n" +
				"note\nrun r1 succeeded (attempt 1/1)\n",
		},
		{
			name: "wait until it fails",
			args: []string{"submit", "--wait", "--shell", "exit 3"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/jobs", body: `{"shell":"exit 3"}`, status: http.StatusCreated, answer: createdAnswer},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"failed","attempt":2,"max_attempts":2,"error":"exit code 3"}`},
				{method: "GET", path: "/v1/runs/r1/logs", query: "attempt=2&stream=stdout", contentType: "text/plain", answer: ""},
				{method: "GET", path: "/v1/runs/r1/logs", query: "attempt=2&stream=stderr", contentType: "text/plain", answer: "oops\n"},
			},
			stdout: "",
			stderr: "run r1 queued\njob j1 backup\noops\nrun r1 failed (attempt 2/2): exit code 3\n",
			code:   1,
		},
		{
			name: "wait for a run cancelled before it started: no output",
			args: []string{"submit", "--wait", "--shell", "x"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`, status: http.StatusCreated, answer: createdAnswer},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"cancelled","error":"cancelled by a user"}`},
			},
			stderr: "run r1 queued\njob j1 backup\nrun r1 cancelled: cancelled by a user\n",
			code:   1,
		},
		{
			name: "wait timeout: stop waiting, the run goes on",
			args: []string{"submit", "--wait", "--wait-timeout", "1ns", "--shell", "x"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`, status: http.StatusCreated, answer: createdAnswer},
			},
			stderr: "run r1 queued\njob j1 backup\nstopped waiting after 1ns (--wait-timeout): run r1 goes on\n",
			code:   7,
		},
		{name: "negative wait timeout", args: []string{"submit", "--wait", "--wait-timeout", "-1s", "--shell", "x"}, code: 2,
			stderr: "--wait-timeout: must not be negative"},
		{name: "wait timeout without waiting", args: []string{"submit", "--wait-timeout", "1s", "--shell", "x"}, code: 2,
			stderr: "--wait-timeout without --wait"},
		{
			name: "wait, json",
			args: []string{"submit", "--wait", "--json", "--shell", "x"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`, status: http.StatusCreated, answer: createdAnswer},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"cancelled"}`},
			},
			stdoutHas: []string{"{\n  \"id\": \"r1\",\n", "\"status\": \"cancelled\""},
			code:      1,
		},
		{
			name: "follow the logs of every attempt",
			args: []string{"submit", "--follow", "--shell", "x"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`, status: http.StatusCreated, answer: createdAnswer},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"queued"}`},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"running","attempt":1,"max_attempts":2}`},
				{method: "GET", path: "/v1/runs/r1/logs", query: "attempt=1&follow=true", contentType: "text/plain", answer: "first try\n"},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"scheduled","attempt":1,"max_attempts":2}`},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"succeeded","attempt":2,"max_attempts":2}`},
				{method: "GET", path: "/v1/runs/r1/logs", query: "attempt=2&follow=true", contentType: "text/plain", answer: "second try\n"},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"succeeded","attempt":2,"max_attempts":2}`},
			},
			stdout: "run r1 queued\njob j1 backup\nfirst try\nsecond try\n",
			stderr: "--- attempt 2 ---\nrun r1 succeeded (attempt 2/2)\n",
		},
		{
			name: "follow a run cancelled before it started",
			args: []string{"submit", "--follow", "-q", "--shell", "x"},
			exchanges: []exchange{
				{method: "POST", path: "/v1/jobs", body: `{"shell":"x"}`, status: http.StatusCreated, answer: createdAnswer},
				{method: "GET", path: "/v1/runs/r1", answer: `{"id":"r1","status":"cancelled","attempt":0}`},
			},
			stdout: "r1\n",
			stderr: "run r1 cancelled\n",
			code:   1,
		},
	})
}
