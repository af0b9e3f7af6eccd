package app

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseLabels(t *testing.T) {
	t.Parallel()
	got, err := parseLabels("zone=eu, disk=ssd,empty=")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"zone": "eu", "disk": "ssd", "empty": ""}, got)
	got, err = parseLabels(" ")
	require.NoError(t, err)
	require.Empty(t, got)
	for _, bad := range []string{"zone", "=eu", "a=b,,c=d"} {
		_, err := parseLabels(bad)
		require.ErrorContains(t, err, "--labels", bad)
	}
}

func TestOpenStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	dir := filepath.Join(t.TempDir(), "data")
	s, eng, err := OpenStore(ctx, "", dir, log)
	require.NoError(t, err)
	require.Equal(t, EngineSQLite, eng)
	require.NoError(t, s.Ping(ctx))
	require.NoError(t, s.Close())
	require.FileExists(t, filepath.Join(dir, "stint.db"), "the default store lives in the data directory")

	_, _, err = OpenStore(ctx, "mysql://x", dir, log)
	require.ErrorContains(t, err, "want sqlite:///path/file.db or postgres://")
}

func TestNewLogger(t *testing.T) {
	t.Parallel()
	_, err := newLogger("info", "json")
	require.NoError(t, err)
	_, err = newLogger("loud", "text")
	require.ErrorContains(t, err, "--log-level")
	_, err = newLogger("info", "xml")
	require.ErrorContains(t, err, "--log-format")
}
