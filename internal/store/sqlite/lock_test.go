//go:build unix

package sqlite_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/store/sqlite"
)

// lockHelperEnv names, in the environment of this test binary run as a helper process, the
// database that TestLockHelper holds open.
const lockHelperEnv = "STINT_SQLITE_LOCK_HELPER"

func TestLockRefusesASecondOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "stint.db")
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Synchronous: "OFF"})
	require.NoError(t, err)

	_, err = sqlite.Open(t.Context(), sqlite.Config{Path: path, Synchronous: "OFF"})
	require.ErrorIs(t, err, sqlite.ErrLocked)
	require.ErrorContains(t, err, "data directory "+dir+" is in use by process "+strconv.Itoa(os.Getpid()))
	require.NoError(t, s.Ping(t.Context()), "the refused Open leaves the first store working")

	// Another database in the same directory is another lock.
	other, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(dir, "other.db"), Synchronous: "OFF"})
	require.NoError(t, err)
	require.NoError(t, other.Close())

	// Close releases the lock.
	require.NoError(t, s.Close())
	s, err = sqlite.Open(t.Context(), sqlite.Config{Path: path, Synchronous: "OFF"})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// The lock holds across processes, names the holder's pid, and dies with its holder.
func TestLockHeldByAnotherProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "stint.db")
	helper := exec.Command(os.Args[0], "-test.run=^TestLockHelper$")
	helper.Env = append(os.Environ(), lockHelperEnv+"="+path)
	out, err := helper.StdoutPipe()
	require.NoError(t, err)
	stdin, err := helper.StdinPipe()
	require.NoError(t, err)
	helper.Stderr = os.Stderr
	require.NoError(t, helper.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = helper.Process.Kill()
		_ = helper.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line, "the helper holds the store open")

	_, err = sqlite.Open(t.Context(), sqlite.Config{Path: path, Synchronous: "OFF"})
	require.ErrorIs(t, err, sqlite.ErrLocked)
	require.ErrorContains(t, err, fmt.Sprintf("data directory %s is in use by process %d", dir, helper.Process.Pid))

	// SIGKILL: the kernel drops the lock with the process.
	require.NoError(t, helper.Process.Kill())
	_ = helper.Wait()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Synchronous: "OFF"})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// TestLockHelper is not a test of its own: run by TestLockHeldByAnotherProcess as a
// separate process, it opens the database named in its environment, says so, and holds it
// until its stdin closes or it is killed.
func TestLockHelper(t *testing.T) {
	path := os.Getenv(lockHelperEnv)
	if path == "" {
		t.Skip("a helper process of TestLockHeldByAnotherProcess")
	}
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Synchronous: "OFF"})
	require.NoError(t, err)
	defer s.Close()
	fmt.Println("locked")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}
