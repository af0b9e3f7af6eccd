package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/store"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	local := localVersion()
	require.Equal(t, "dev", local.Version, "a test binary is not a release")
	require.Equal(t, runtime.Version(), local.GoVersion)
	require.Equal(t, store.SchemaVersion, local.Schema)
	text := "stint dev\n  commit: " + local.Commit + "\n  built:  "
	server := `{"version":"v0.1.0","commit":"abc123","date":"2030-01-02T10:00:00Z","go_version":"go1.26.0","schema":11}`
	runCLICases(t, []cliCase{
		{name: "text", args: []string{"version"}, stdoutHas: []string{text, "  go:     " + runtime.Version() + "\n"}},
		{name: "flag", args: []string{"--version"}, stdoutHas: []string{text, "  go:     " + runtime.Version() + "\n"}},
		{
			name: "remote", args: []string{"version", "--remote"},
			exchanges: []exchange{{method: "GET", path: "/v1/version", answer: server}},
			stdoutHas: []string{"client dev\n", "v0.1.0\n  commit: abc123\n  built:  2030-01-02T10:00:00Z\n  go:     go1.26.0\n  schema: 11\n"},
		},
		{
			name: "server refuses", args: []string{"version", "--remote"},
			exchanges: []exchange{{method: "GET", path: "/v1/version", status: 401, contentType: "application/problem+json",
				answer: `{"title":"unauthorized","status":401}`}},
			code: ExitUnauthorized, stderr: "unauthorized",
		},
	})

	res := run(t, nil, "version", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	var got apitype.Version
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
	require.Equal(t, local, got)

	res = run(t, nil, "version", "-o", "yaml")
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stdout, fmt.Sprintf("schema: %d\n", local.Schema))
	require.Equal(t, 2, run(t, nil, "version", "-o", "xml").code, "an unknown format is a usage error")
}
