package cli

import "testing"

func TestAlertsAndAudit(t *testing.T) {
	t.Parallel()
	runCLICases(t, []cliCase{
		{
			name: "alerts firing",
			args: []string{"alerts", "--state", "firing", "--limit", "5"},
			exchanges: []exchange{{method: "GET", path: "/v1/alerts", query: "limit=5&state=firing", answer: `{"alerts":[
				{"id":"01B","rule":"job_failing","state":"firing","subject":"job:j1","summary":"job etl failed 3 times in a row",
				 "link":"/ui/jobs/j1","started_at":"2026-01-02T03:04:05Z"}]}`}},
			stdoutHas: []string{"ID", "STATE", "RULE", "01B", "FIRING", "job_failing", "job:j1", "job etl failed 3 times in a row"},
		},
		{
			name:   "alerts bad state",
			args:   []string{"alerts", "--state", "open"},
			stderr: "--state: must be firing or resolved",
			code:   2,
		},
		{
			name: "audit of a target",
			args: []string{"audit", "--target", "queue:gpu"},
			exchanges: []exchange{{method: "GET", path: "/v1/audit", query: "target=queue%3Agpu", answer: `{"entries":[
				{"id":"01C","at":"2026-01-02T03:04:05Z","actor":"ci (01T)","role":"operator","action":"queue.update","target":"queue:gpu",
				 "before":{"paused":false},"after":{"paused":true}}]}`}},
			stdoutHas: []string{"ACTOR", "ACTION", "ci (01T)", "operator", "queue.update", "queue:gpu"},
		},
		{
			name: "queue alert thresholds",
			args: []string{"queues", "set", "gpu", "--alert-max-backlog", "100", "--alert-max-age", "30m"},
			exchanges: []exchange{{method: "PATCH", path: "/v1/queues/gpu", body: `{"alerts":{"max_backlog":100,"max_age":"30m0s"}}`,
				answer: `{"name":"gpu"}`}},
			stdout: "queue gpu updated\n",
		},
	})
}
