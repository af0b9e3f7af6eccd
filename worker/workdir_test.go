//go:build unix

package worker

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

const testMaxIdle = 5

func openTestWorkDirs(t *testing.T) *workDirs {
	t.Helper()
	w, err := openWorkDirs(t.TempDir(), nil, nil, testMaxIdle)
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

// An attempt's directory left empty is reset to mode 0700 and given as it is to the next
// attempt; one with something in it, or one a process of its attempt may still use, is
// removed.
func TestWorkDirsReuse(t *testing.T) {
	t.Parallel()
	w := openTestWorkDirs(t)
	first, err := w.make()
	require.NoError(t, err)
	require.Equal(t, w.base, filepath.Dir(first))
	before, err := os.Stat(first)
	require.NoError(t, err)
	require.Equal(t, os.ModeDir|0o700, before.Mode())
	require.NoError(t, os.Chmod(first, 0o755))

	require.NoError(t, w.release(first, true))
	require.Equal(t, []string{filepath.Base(first)}, entries(t, w.base), "kept")

	second, err := w.make()
	require.NoError(t, err)
	require.Equal(t, first, second)
	after, err := os.Stat(second)
	require.NoError(t, err)
	require.True(t, os.SameFile(before, after), "the same directory, not made again")
	require.Equal(t, os.ModeDir|0o700, after.Mode(), "mode reset")

	// Another at once: a new one.
	other, err := w.make()
	require.NoError(t, err)
	require.NotEqual(t, second, other)
	require.NoError(t, w.release(other, true))

	// Not empty: removed with what it holds.
	require.NoError(t, os.WriteFile(filepath.Join(second, "f"), []byte("x"), 0o600))
	require.NoError(t, w.release(second, true))
	require.Equal(t, []string{filepath.Base(other)}, entries(t, w.base))

	// Empty, but something of its attempt may still be in it.
	third, err := w.make()
	require.NoError(t, err)
	require.Equal(t, other, third)
	require.NoError(t, w.release(third, false))
	require.Empty(t, entries(t, w.base))
}

// A name taken already under base (another worker's, say) is skipped.
func TestWorkDirsNameTaken(t *testing.T) {
	t.Parallel()
	w := openTestWorkDirs(t)
	taken := filepath.Join(w.base, w.prefix+"0")
	require.NoError(t, os.Mkdir(taken, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(taken, "theirs"), nil, 0o600))
	d, err := w.make()
	require.NoError(t, err)
	require.NotEqual(t, taken, d)
	require.NoError(t, w.release(d, false))
	require.FileExists(t, filepath.Join(taken, "theirs"))
}

// A directory replaced by a symbolic link is not followed: the link is removed, and what it
// pointed to is left alone and not kept for a later attempt.
func TestWorkDirsSymlinkNotKept(t *testing.T) {
	t.Parallel()
	w := openTestWorkDirs(t)
	d, err := w.make()
	require.NoError(t, err)
	target := t.TempDir()
	require.NoError(t, os.Remove(d))
	require.NoError(t, os.Symlink(target, d))
	require.NoError(t, w.release(d, true))
	require.Empty(t, entries(t, w.base))
	require.DirExists(t, target)
}

// At most maxIdle are kept; close removes them and leaves a given base.
func TestWorkDirsIdleBounded(t *testing.T) {
	t.Parallel()
	w := openTestWorkDirs(t)
	var dirs []string
	for range testMaxIdle + 3 {
		d, err := w.make()
		require.NoError(t, err)
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		require.NoError(t, w.release(d, true))
	}
	require.Len(t, entries(t, w.base), testMaxIdle)
	require.NoError(t, w.close())
	require.Empty(t, entries(t, w.base))
	require.DirExists(t, w.base)
}

// Attempts that end together keep no more than the bound either.
func TestWorkDirsIdleBoundedTogether(t *testing.T) {
	t.Parallel()
	w := openTestWorkDirs(t)
	var dirs []string
	for range 4 * testMaxIdle {
		d, err := w.make()
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
	require.Len(t, entries(t, w.base), testMaxIdle)
	require.Len(t, w.idle, testMaxIdle)
}
