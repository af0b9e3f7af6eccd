package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// workDirs makes the attempts' working directories under base, one fresh directory per
// command attempt, and removes them.
type workDirs struct {
	base    string
	created bool        // base was made by the agent: it is removed when Run returns
	owner   *credential // nil: directories belong to the worker's user
}

// openWorkDirs prepares base (dir, or a new temporary directory when dir is empty). When
// commands run as another user, base must let that user reach the directory of its attempt:
// one the agent makes is searchable by all (0711); a given one must already be.
func openWorkDirs(dir string, owner *credential) (*workDirs, error) {
	w := &workDirs{owner: owner}
	if dir == "" {
		d, err := os.MkdirTemp("", "stint-worker-")
		if err != nil {
			return nil, fmt.Errorf("work dir: %w", err)
		}
		w.base, w.created = d, true
		if owner != nil {
			if err := os.Chmod(d, 0o711); err != nil {
				_ = os.Remove(d)
				return nil, fmt.Errorf("work dir: %w", err)
			}
		}
		return w, nil
	}
	if strings.ContainsAny(dir, "\n\x00") {
		return nil, fmt.Errorf("work dir %q: the name has a newline", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o711); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	if owner != nil && fi.Mode().Perm()&0o001 == 0 {
		return nil, fmt.Errorf("work dir %s (mode %04o) is not searchable by others: user %s could not enter its attempt directories (chmod o+x it)",
			abs, fi.Mode().Perm(), owner.name)
	}
	w.base = abs
	return w, nil
}

// make creates the working directory of an attempt: private (0700) to the user it runs as.
func (w *workDirs) make(runID string, attempt int) (string, error) {
	d, err := os.MkdirTemp(w.base, safeName(runID)+"-"+strconv.Itoa(attempt)+"-")
	if err != nil {
		return "", fmt.Errorf("work dir: %w", err)
	}
	if w.owner != nil {
		if err := os.Chown(d, int(w.owner.uid), int(w.owner.gid)); err != nil {
			_ = os.Remove(d)
			return "", fmt.Errorf("work dir: %w", err)
		}
	}
	return d, nil
}

// close removes base if the agent made it (what is left in it too).
func (w *workDirs) close() error {
	if w == nil || !w.created {
		return nil
	}
	return removeTree(w.base)
}

// safeName keeps the characters of s that are safe in a file name, at most 64.
func safeName(s string) string {
	b := make([]byte, 0, min(len(s), 64))
	for i := 0; i < len(s) && len(b) < 64; i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			b = append(b, c)
		}
	}
	if len(b) == 0 || b[0] == '.' {
		b = append([]byte("run"), b...)
	}
	return string(b)
}

// removeTree removes dir and everything in it. A job may have left directories it cannot
// be removed from (chmod 0): those are made writable and the removal tried again.
//
// Most attempts leave their directory empty, and one rmdir removes it: os.RemoveAll would
// try unlink first, a failed system call per attempt (5% of the worker's CPU when it runs
// nothing but `true`).
func removeTree(dir string) error {
	if syscall.Rmdir(dir) == nil {
		return nil
	}
	err := os.RemoveAll(dir)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
