//go:build unix

package worker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A name's lookup in PATH is reused for pathCacheTTL with the same PATH: a program installed
// earlier in PATH is found once that has passed, or at once when PATH changes; a failed
// lookup is not kept.
func TestPathCache(t *testing.T) {
	d0, d1 := t.TempDir(), t.TempDir()
	install := func(dir string) string {
		p := filepath.Join(dir, "prog")
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
		return p
	}
	t.Setenv("PATH", d0+string(filepath.ListSeparator)+d1)
	t0 := time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)
	now := t0
	c := newPathCache(func() time.Time { return now })
	look := func() string {
		t.Helper()
		p, err := c.lookPath("prog")
		require.NoError(t, err)
		return p
	}

	_, err := c.lookPath("prog")
	require.Error(t, err, "not installed yet")
	later := install(d1)
	require.Equal(t, later, look(), "a failed lookup is not kept")

	earlier := install(d0)
	now = t0.Add(pathCacheTTL - time.Millisecond)
	require.Equal(t, later, look(), "reused within the TTL")
	now = t0.Add(pathCacheTTL)
	require.Equal(t, earlier, look(), "looked up again after it")

	t.Setenv("PATH", d1)
	require.Equal(t, later, look(), "PATH changed")
	now = t0
	t.Setenv("PATH", d0+string(filepath.ListSeparator)+d1)
	require.Equal(t, earlier, look(), "PATH changed back; the clock went back")
}
