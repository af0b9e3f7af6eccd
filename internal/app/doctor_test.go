package app

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/cli"
)

// doctor runs `stint doctor --server url` and returns its exit code and output.
func doctor(t *testing.T, url string, args ...string) (int, string) {
	t.Helper()
	root := cli.NewRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"doctor", "--server", url}, args...))
	return cli.Execute(t.Context(), root), out.String()
}

// TestDoctor: stint doctor against real servers: one without workers warns and says how to
// start one; stint dev (a local worker) passes every check; a server nobody listens on fails
// with exit code 1.
func TestDoctor(t *testing.T) {
	t.Parallel()
	t.Run("no workers", func(t *testing.T) {
		t.Parallel()
		const admin = "doctor-test-admin-secret-0123456789"
		url := startServer(t, ServerConfig{UserToken: admin})
		code, out := doctor(t, url, "--token", admin)
		require.Equal(t, 0, code, "warnings only: %s", out)
		for _, want := range []string{"ok    server", "ok    clock", "ok    store       reachable and writable",
			"ok    migrations  schema at", "ok    timezone", "warn  workers     no workers seen",
			"fix: start one: stint worker --server URL --token TOKEN"} {
			require.Contains(t, out, want)
		}
		code, out = doctor(t, url)
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "fail  server")
		require.Contains(t, out, "give --token", "a 401 says what to give")
	})
	t.Run("stint dev", func(t *testing.T) {
		t.Parallel()
		url := startDev(t, &fakeHost{})
		c, err := client.New(url)
		require.NoError(t, err)
		require.Eventually(t, func() bool { // the local worker registers once the server is up
			ws, err := c.ListWorkers(t.Context())
			return err == nil && len(ws.Items) == 1
		}, time.Minute, 10*time.Millisecond)
		code, out := doctor(t, url)
		require.Equal(t, 0, code, out)
		require.NotContains(t, out, "warn")
		require.Contains(t, out, "ok    workers     1 live of 1 seen")
	})
	t.Run("no server", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		code, out := doctor(t, "http://"+addr)
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "fail  server")
		require.Contains(t, out, "fix: start a server")
	})
}
