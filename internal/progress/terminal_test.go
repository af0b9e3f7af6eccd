//go:build linux

package progress

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIsTerminal(t *testing.T) {
	t.Parallel()
	require.False(t, IsTerminal(&bytes.Buffer{}), "not a file")
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.False(t, IsTerminal(w), "a pipe")
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	require.False(t, IsTerminal(f), "a file")

	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer pty.Close()
	require.True(t, IsTerminal(pty), "a pseudo-terminal")
	env := map[string]string{}
	require.True(t, Shown(pty, func(k string) string { return env[k] }))
	env["TERM"] = "dumb"
	require.False(t, Shown(pty, func(k string) string { return env[k] }), "TERM=dumb draws no bar")
}
