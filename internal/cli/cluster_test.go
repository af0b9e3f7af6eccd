package cli

import "testing"

func TestCluster(t *testing.T) {
	t.Parallel()
	const cluster = `{"leader":{"id":"s2","addr":"10.0.0.2:8080","since":"2030-01-02T11:00:00Z","term":4},
	"servers":[{"id":"s1","addr":"10.0.0.1:8080","started_at":"2030-01-02T08:00:00Z","last_seen":"2030-01-02T11:59:59.8Z"},
	{"id":"s2","addr":"10.0.0.2:8080","started_at":"2030-01-02T10:00:00Z","last_seen":"2030-01-02T11:59:58Z"}]}`
	runCLICases(t, []cliCase{
		{
			name:      "table",
			args:      []string{"cluster"},
			exchanges: []exchange{{method: "GET", path: "/v1/cluster", answer: cluster}},
			stdout: `Leader: s2 (10.0.0.2:8080), term 4, since 2030-01-02 11:00:00 (1h ago)

ID  ADDR           ROLE      STARTED  LAST SEEN
s1  10.0.0.1:8080  follower  4h ago   just now
s2  10.0.0.2:8080  leader    2h ago   2s ago
`,
		},
		{
			name:      "no leader",
			args:      []string{"cluster"},
			exchanges: []exchange{{method: "GET", path: "/v1/cluster", answer: `{"servers":[]}`}},
			stdout:    "Leader: none (an election is under way)\n\nID  ADDR  ROLE  STARTED  LAST SEEN\n",
		},
		{
			name:      "json",
			args:      []string{"cluster", "--json"},
			exchanges: []exchange{{method: "GET", path: "/v1/cluster", answer: `{"servers":[]}`}},
			stdout:    "{\n  \"servers\": []\n}\n",
		},
	})
}
