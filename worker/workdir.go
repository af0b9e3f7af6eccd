package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// workDirs gives each command attempt an empty working directory of its own under base, and
// takes it back when the attempt ends.
//
// Making a directory costs a file system far more than keeping one: on ext4, mkdir and rmdir
// took about 170 µs of CPU, and each directory removed made the next mkdir dearer, which
// made them the largest cost of a short command after its own process; renaming one took
// 10 to 35 µs. So the directories are named for the agent, not for their attempts
// (BASE/stint-AGENT-N), and a directory its attempt left empty, with nothing of the attempt
// still running, is not removed: it is reset to the state mkdir gives (mode 0700, the
// attempt's user) and given as it is to a later attempt. Anything else is removed. At most
// maxIdle are kept between attempts: the agent's slots, so that it makes a directory only
// when more attempts than ever before hold one at once.
//
// Each directory is tracked by the guard from before it is made until it is removed.
type workDirs struct {
	base    string
	created bool        // base was made by the agent: it is removed when Run returns
	owner   *credential // nil: directories belong to the worker's user
	guard   *guard      // told of the directories, to remove them if the agent dies

	maxIdle  int
	uid, gid uint32 // of the attempts' directories
	mu       sync.Mutex
	idle     []string // paths of empty directories, ready for an attempt
	named    int      // directories named so far
	prefix   string   // of this agent's directories' names
}

// openWorkDirs prepares base (dir, or a new temporary directory when dir is empty). When
// commands run as another user, base must let that user reach the directory of its attempt:
// one the agent makes is searchable by all (0711); a given one must already be.
func openWorkDirs(dir string, owner *credential, g *guard, maxIdle int) (*workDirs, error) {
	w := &workDirs{owner: owner, guard: g, maxIdle: maxIdle,
		prefix: "stint-" + strconv.FormatUint(rand.Uint64(), 36) + "-",
		uid:    uint32(os.Geteuid()), gid: uint32(os.Getegid())}
	if owner != nil {
		w.uid, w.gid = owner.uid, owner.gid
	}
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

// make gives an attempt its working directory, empty and private (0700) to the user it runs
// as: an idle one when there is one, else a new one.
func (w *workDirs) make() (string, error) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		d := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		return d, nil
	}
	w.mu.Unlock()
	for {
		w.mu.Lock()
		d := filepath.Join(w.base, w.prefix+strconv.Itoa(w.named))
		w.named++
		w.mu.Unlock()
		w.guard.track(guardDir, d)
		err := os.Mkdir(d, 0o700)
		if errors.Is(err, fs.ErrExist) {
			w.guard.untrack(guardDir, d) // not ours
			continue
		}
		if err == nil && w.owner != nil {
			if err = os.Chown(d, int(w.owner.uid), int(w.owner.gid)); err != nil {
				_ = os.Remove(d)
			}
		}
		if err != nil {
			w.guard.untrack(guardDir, d)
			return "", fmt.Errorf("work dir: %w", err)
		}
		return d, nil
	}
}

// release takes back an attempt's directory. reusable says that nothing the attempt started
// can still be using it; then an empty directory is kept for a later attempt (up to maxIdle).
// Anything else is removed with what it holds.
func (w *workDirs) release(dir string, reusable bool) error {
	if reusable && w.keep(dir) {
		return nil
	}
	err := removeTree(dir)
	w.guard.untrack(guardDir, dir)
	return err
}

// keep keeps dir for a later attempt if it is empty and there is room, and reports whether
// it did.
func (w *workDirs) keep(dir string) bool {
	w.mu.Lock()
	full := len(w.idle) >= w.maxIdle
	w.mu.Unlock()
	if full || !resetEmptyDir(dir, w.uid, w.gid) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.idle) >= w.maxIdle { // others were kept meanwhile
		return false
	}
	w.idle = append(w.idle, dir)
	return true
}

// close removes the idle directories, and base if the agent made it (what is left in it too).
func (w *workDirs) close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	idle := w.idle
	w.idle = nil
	w.mu.Unlock()
	var errs []error
	for _, d := range idle {
		errs = append(errs, removeTree(d))
		w.guard.untrack(guardDir, d)
	}
	if w.created {
		errs = append(errs, removeTree(w.base))
	}
	return errors.Join(errs...)
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
