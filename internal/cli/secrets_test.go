package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSecretEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "jobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`jobs:
  - name: db
    command: [./migrate]
    secret_env: {DB_PASSWORD: "${MY_DB_PASSWORD}", KEPT: "***", LITERAL: "$x"}
pipelines:
  - name: etl
    steps:
      load: {command: [./load], secret_env: {TOKEN: "${MY_TOKEN}"}}
`), 0o600))
	env := map[string]string{"FROM_ENV": "env-value", "MY_DB_PASSWORD": "pw", "MY_TOKEN": "tok"}
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		exchanges []exchange
		stdout    string
		has       string // in stdout
		stderr    string
		code      int
	}{
		{
			name: "submit: KEY=VALUE, and KEY from the environment",
			env:  env,
			args: []string{"submit", "--secret-env", "A=1", "--secret-env", "FROM_ENV", "--", "./x"},
			exchanges: []exchange{{method: "POST", path: "/v1/jobs", body: `{"command":["./x"],"secret_env":{"A":"1","FROM_ENV":"env-value"}}`,
				status: 201, answer: createdAnswer}},
			stdout: "run r1 queued\njob j1 backup\n",
		},
		{
			name: "submit: a bare KEY not set", args: []string{"submit", "--secret-env", "NOPE", "--", "./x"},
			code: 2, stderr: "--secret-env NOPE: NOPE is not set in this environment",
		},
		{name: "submit: no key", args: []string{"submit", "--secret-env", "=v", "--", "./x"}, code: 2, stderr: "want KEY=VALUE"},
		{
			name: "apply: ${NAME} from the environment, *** and the rest as written",
			env:  env,
			args: []string{"apply", "-f", file},
			exchanges: []exchange{
				{method: "PUT", path: "/v1/jobs/db", body: `{"name":"db","command":["./migrate"],"secret_env":{"DB_PASSWORD":"pw","KEPT":"***","LITERAL":"$x"}}`,
					answer: `{"action":"unchanged","job":{"id":"j1","name":"db"}}`},
				{method: "PUT", path: "/v1/pipelines/etl", body: `{"name":"etl","steps":{"load":{"command":["./load"],"secret_env":{"TOKEN":"tok"}}}}`,
					answer: `{"id":"p1","name":"etl","steps":[{"name":"load"}]}`},
			},
			stdout: "job/db unchanged\npipeline/etl updated (1 step)\n",
		},
		{
			name: "apply: ${NAME} not set", env: map[string]string{"MY_DB_PASSWORD": "pw"},
			args: []string{"apply", "-f", file}, code: 2, stderr: "pipelines[0].steps.load.secret_env.TOKEN: ${MY_TOKEN} is not set",
		},
		{
			name:      "jobs get shows the names",
			args:      []string{"jobs", "get", "db"},
			exchanges: []exchange{{method: "GET", path: "/v1/jobs/db", answer: `{"id":"j1","name":"db","command":["x"],"secret_env":{"DB_PASSWORD":"***"}}`}},
			has:       "Secret env:    DB_PASSWORD\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, tt.exchanges...)
			res := run(t, tt.env, append([]string{"--server", api.URL}, tt.args...)...)
			require.Equal(t, tt.code, res.code, "stderr:\n%s", res.stderr)
			api.check(t)
			if tt.stdout != "" {
				require.Equal(t, tt.stdout, res.stdout)
			}
			require.Contains(t, res.stdout, tt.has)
			require.Contains(t, res.stderr, tt.stderr)
		})
	}
}
