package cli

import "testing"

func TestTokens(t *testing.T) {
	t.Parallel()
	created := `{"token":"stint_secret","id":"t1","name":"ci","role":"operator","namespaces":["etl","ml"],"created_at":"2030-01-02T11:00:00Z"}`
	runCLICases(t, []cliCase{
		{
			name: "create prints the secret alone on stdout",
			args: []string{"tokens", "create", "--role", "operator", "--name", "ci", "--namespaces", "etl,ml"},
			exchanges: []exchange{{method: "POST", path: "/v1/tokens",
				body: `{"name":"ci","role":"operator","namespaces":["etl","ml"]}`, status: 201, answer: created}},
			stdout: "stint_secret\n",
			stderr: "created token t1 (ci, role operator, namespaces etl, ml): the secret above is shown only this once",
		},
		{
			name: "create with --namespaces repeated",
			args: []string{"tokens", "create", "--role", "operator", "--name", "ci", "--namespaces", "etl", "--namespaces", "ml"},
			exchanges: []exchange{{method: "POST", path: "/v1/tokens",
				body: `{"name":"ci","role":"operator","namespaces":["etl","ml"]}`, status: 201, answer: created}},
			stdout: "stint_secret\n",
			stderr: "namespaces etl, ml",
		},
		{
			// --namespace, repeated, is the old spelling: it still works, with a warning (on
			// stdout here only because the test sets it; cobra writes it to stderr).
			name: "create with the old --namespace",
			args: []string{"tokens", "create", "--role", "operator", "--name", "ci", "--namespace", "etl", "--namespace", "ml"},
			exchanges: []exchange{{method: "POST", path: "/v1/tokens",
				body: `{"name":"ci","role":"operator","namespaces":["etl","ml"]}`, status: 201, answer: created}},
			stdoutHas: []string{"Flag --namespace has been deprecated, use --namespaces\n", "stint_secret\n"},
			stderr:    "namespaces etl, ml",
		},
		{
			name: "create json",
			args: []string{"tokens", "create", "--role", "worker", "--name", "w1", "--worker-id", "w1", "--json"},
			exchanges: []exchange{{method: "POST", path: "/v1/tokens", body: `{"name":"w1","role":"worker","worker_id":"w1"}`, status: 201,
				answer: `{"token":"stint_w","id":"t2","name":"w1","role":"worker","worker_id":"w1","created_at":"2030-01-02T11:00:00Z"}`}},
			stdoutHas: []string{`"token": "stint_w"`, `"id": "t2"`, `"worker_id": "w1"`},
		},
		{
			name: "create yaml",
			args: []string{"tokens", "create", "--role", "viewer", "--name", "dash", "-o", "yaml"},
			exchanges: []exchange{{method: "POST", path: "/v1/tokens", body: `{"name":"dash","role":"viewer"}`, status: 201,
				answer: `{"token":"stint_v","id":"t3","name":"dash","role":"viewer","created_at":"2030-01-02T11:00:00Z"}`}},
			stdoutHas: []string{"token: stint_v\n", "id: t3\n", "role: viewer\n"},
		},
		{name: "create with a bad -o sends nothing", args: []string{"tokens", "create", "--role", "viewer", "--name", "x", "-o", "csv"},
			code: 2, stderr: `--output: want table, wide, json or yaml, got "csv"`},
		{name: "create without a role", args: []string{"tokens", "create", "--name", "ci"}, code: 2, stderr: "--role: required"},
		{name: "create without a name", args: []string{"tokens", "create", "--role", "viewer"}, code: 2, stderr: "--name: required"},
		{
			name: "create refused",
			args: []string{"tokens", "create", "--role", "admin", "--name", "x", "--namespaces", "etl"},
			exchanges: []exchange{{method: "POST", path: "/v1/tokens", body: `{"name":"x","role":"admin","namespaces":["etl"]}`,
				status: 400, contentType: "application/problem+json",
				answer: `{"title":"Bad Request","status":400,"errors":[{"field":"namespaces","message":"namespaces scope operator and viewer tokens only"}]}`}},
			code: ExitUsage, stderr: "namespaces: namespaces scope operator and viewer tokens only",
		},
		{
			name: "list",
			args: []string{"tokens", "list"},
			exchanges: []exchange{{method: "GET", path: "/v1/tokens", answer: `{"items":[
				{"id":"t0","name":"bootstrap","role":"admin","created_at":"2030-01-01T12:00:00Z","last_used_at":"2030-01-02T11:59:00Z"},
				{"id":"t1","name":"ci","role":"operator","namespaces":["etl","ml"],"created_at":"2030-01-02T11:00:00Z","revoked_at":"2030-01-02T11:30:00Z"},
				{"id":"t2","name":"w1","role":"worker","worker_id":"w1","created_at":"2030-01-02T11:00:00Z"},
				{"id":"t3","name":"fleet","role":"worker","created_at":"2030-01-02T11:00:00Z"}]}`}},
			stdout: `ID  NAME       ROLE      NAMESPACES  WORKER  CREATED  LAST USED  REVOKED
t0  bootstrap  admin     all         -       24h ago  1m ago     -
t1  ci         operator  etl,ml      -       1h ago   -          30m ago
t2  w1         worker    all         w1      1h ago   -          -
t3  fleet      worker    all         any     1h ago   -          -
`,
		},
		{
			name:      "revoke",
			args:      []string{"tokens", "revoke", "t1"},
			exchanges: []exchange{{method: "POST", path: "/v1/tokens/t1/revoke", answer: `{"id":"t1","name":"ci","role":"operator","created_at":"2030-01-02T11:00:00Z","revoked_at":"2030-01-02T12:00:00Z"}`}},
			stdout:    "token t1 revoked\n",
		},
		{
			name: "revoke without admin",
			args: []string{"tokens", "revoke", "t1"},
			exchanges: []exchange{{method: "POST", path: "/v1/tokens/t1/revoke", status: 403, contentType: "application/problem+json",
				answer: `{"title":"Forbidden","status":403,"detail":"this route needs the admin role; the token \"ci\" has the role viewer"}`}},
			code: ExitUnauthorized, stderr: "stint: Forbidden: this route needs the admin role",
		},
	})
}
