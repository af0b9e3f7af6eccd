package cli

import "testing"

func TestCompletion(t *testing.T) {
	t.Parallel()
	runs := exchange{method: "GET", path: "/v1/runs", query: "limit=100", answer: `{"items":[
		{"id":"r2","job_id":"j1","job_name":"backup","status":"running"},
		{"id":"r1","job_id":"j2","job_name":"j2","status":"failed"}]}`}
	jobs := exchange{method: "GET", path: "/v1/jobs", query: "limit=100", answer: `{"items":[
		{"id":"j1","name":"backup","schedule":{"cron":"0 3 * * *"}}]}`}
	queues := exchange{method: "GET", path: "/v1/queues", answer: `{"items":[{"name":"gpu","depth":{"queued":2,"running":1}}]}`}
	runCLICases(t, []cliCase{
		{name: "run ids with their jobs", args: []string{"__complete", "runs", "get", ""}, exchanges: []exchange{runs},
			stdout: "r2\tbackup running\nr1\t- failed\n:4\n", stderr: "Completion ended with directive"},
		{name: "logs take run ids", args: []string{"__complete", "logs", ""}, exchanges: []exchange{runs},
			stdoutHas: []string{"r2\tbackup running\n"}, stderr: "Completion ended"},
		{name: "job names", args: []string{"__complete", "jobs", "trigger", ""}, exchanges: []exchange{jobs},
			stdout: "backup\tbackup 0 3 * * *\n:4\n", stderr: "Completion ended"},
		{name: "queue names", args: []string{"__complete", "queues", "set", ""}, exchanges: []exchange{queues},
			stdout: "gpu\tqueued 2, running 1\n:4\n", stderr: "Completion ended"},
		{name: "one argument only", args: []string{"__complete", "runs", "get", "r1", ""}, stdout: ":4\n", stderr: "Completion ended"},
	})
}
