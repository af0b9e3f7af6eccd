//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dirLock is the exclusive lock a Store holds on its database for its life: flock on a lock
// file beside the database file, so that a second process (or a second Open in this one)
// cannot open the same database and end the first one's running attempts as its own. The
// kernel drops the lock when the file is closed or the process dies, so a crash leaves
// nothing to clean up.
type dirLock struct{ f *os.File }

// lockPath is the lock file of the database at dbPath.
func lockPath(dbPath string) string { return dbPath + ".lock" }

// lock takes the lock of the database at dbPath without waiting. When another holds it, the
// error names the directory, the lock file and, when it wrote it, the holder's pid.
func lock(dbPath string) (*dirLock, error) {
	path := lockPath(dbPath)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, lockedError(path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// The holder's pid, for the error of the next one to try.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
}

// lockedError says who holds the lock at path, as far as its file tells.
func lockedError(path string) error {
	holder := "another process"
	if b, err := os.ReadFile(path); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			holder = "process " + strconv.Itoa(pid)
		}
	}
	return fmt.Errorf("data directory %s is in use by %s (lock %s): %w; "+
		"stop it, or use another data directory", filepath.Dir(path), holder, path, ErrLocked)
}

// release drops the lock; the file stays (removing it would let two processes lock two
// different files of one name).
func (l *dirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	if err := f.Close(); err != nil {
		return fmt.Errorf("release lock: %w", err)
	}
	return nil
}
