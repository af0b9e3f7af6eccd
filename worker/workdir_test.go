//go:build unix

package worker

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

const testMaxSpares = 5

func openTestWorkDirs(t *testing.T) *workDirs {
	t.Helper()
	w, err := openWorkDirs(t.TempDir(), nil, nil, testMaxSpares)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.close() })
	return w
}

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// An attempt's directory left empty is kept under a spare name, reset to mode 0700, and the
// next attempt gets it under its own name; one with something in it, or one a process of
// its attempt may still use, is removed.
func TestWorkDirsReuse(t *testing.T) {
	t.Parallel()
	w := openTestWorkDirs(t)
	first, err := w.make("run-a", 1)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(filepath.Base(first), "run-a-1-"), first)
	before, err := os.Stat(first)
	require.NoError(t, err)
	require.Equal(t, os.ModeDir|0o700, before.Mode())
	require.NoError(t, os.Chmod(first, 0o755))

	require.NoError(t, w.release(first, true))
	require.NoDirExists(t, first)
	names := entries(t, w.base)
	require.Len(t, names, 1)
	require.True(t, strings.HasPrefix(names[0], ".stint-spare-"), names[0])

	second, err := w.make("run-b", 2)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(filepath.Base(second), "run-b-2-"), second)
	after, err := os.Stat(second)
	require.NoError(t, err)
	require.True(t, os.SameFile(before, after), "the spare was renamed, not made again")
	require.Equal(t, os.ModeDir|0o700, after.Mode(), "mode reset")
	require.Equal(t, []string{filepath.Base(second)}, entries(t, w.base))

	// Not empty: removed with what it holds.
	require.NoError(t, os.WriteFile(filepath.Join(second, "f"), []byte("x"), 0o600))
	require.NoError(t, w.release(second, true))
	require.Empty(t, entries(t, w.base))

	// Empty, but something of its attempt may still be in it.
	third, err := w.make("run-c", 1)
	require.NoError(t, err)
	require.NoError(t, w.release(third, false))
	require.Empty(t, entries(t, w.base))
}

// A directory replaced by a symbolic link is not followed: the link is removed, and what it
// pointed to is left alone and not taken as a spare.
func TestWorkDirsSymlinkNotKept(t *testing.T) {
	t.Parallel()
	w := openTestWorkDirs(t)
	d, err := w.make("r", 1)
	require.NoError(t, err)
	target := t.TempDir()
	require.NoError(t, os.Remove(d))
	require.NoError(t, os.Symlink(target, d))
	require.NoError(t, w.release(d, true))
	require.Empty(t, entries(t, w.base))
	require.DirExists(t, target)
}

// At most maxSpares are kept; close removes them and leaves a given base.
func TestWorkDirsSparesBounded(t *testing.T) {
	t.Parallel()
	w := openTestWorkDirs(t)
	var dirs []string
	for range testMaxSpares + 3 {
		d, err := w.make("r", 1)
		require.NoError(t, err)
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		require.NoError(t, w.release(d, true))
	}
	require.Len(t, entries(t, w.base), testMaxSpares)
	require.NoError(t, w.close())
	require.Empty(t, entries(t, w.base))
	require.DirExists(t, w.base)
}

// Attempts that end together keep no more spares than the bound either.
func TestWorkDirsSparesBoundedTogether(t *testing.T) {
	t.Parallel()
	w := openTestWorkDirs(t)
	var dirs []string
	for range 4 * testMaxSpares {
		d, err := w.make("r", 1)
		require.NoError(t, err)
		dirs = append(dirs, d)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(dirs))
	for i, d := range dirs {
		wg.Go(func() { errs[i] = w.release(d, true) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, entries(t, w.base), testMaxSpares)
	require.Len(t, w.spares, testMaxSpares)
}
