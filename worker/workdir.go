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
// Making a directory costs a file system far more than renaming one: on ext4, mkdir and rmdir
// took about 170 µs of CPU where a rename took 10-20 µs, which made them the largest cost of a
// short command after its own process. So a directory its attempt left empty, with nothing of
// the attempt still running, is not removed: it is reset to the state mkdir gives (mode 0700,
// the attempt's user) and kept under a spare name, and a later attempt renames it to its own
// name. Anything else is removed. At most maxSpares are kept: the agent's slots, so that it
// makes a directory only when more attempts than ever before hold one at once.
type workDirs struct {
	base    string
	created bool        // base was made by the agent: it is removed when Run returns
	owner   *credential // nil: directories belong to the worker's user
	guard   *guard      // told of the spares, to remove them if the agent dies

	maxSpares int
	uid, gid  uint32 // of the attempts' directories
	mu        sync.Mutex
	spares    []string // paths of empty directories, ready for an attempt
	named     int      // spares named so far
	prefix    string   // of this agent's spares' names
}

// openWorkDirs prepares base (dir, or a new temporary directory when dir is empty). When
// commands run as another user, base must let that user reach the directory of its attempt:
// one the agent makes is searchable by all (0711); a given one must already be.
func openWorkDirs(dir string, owner *credential, g *guard, maxSpares int) (*workDirs, error) {
	w := &workDirs{owner: owner, guard: g, maxSpares: maxSpares,
		prefix: ".stint-spare-" + strconv.FormatUint(rand.Uint64(), 36) + "-",
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

// make gives an attempt its working directory, BASE/RUN-ATTEMPT-RANDOM: empty and private
// (0700) to the user it runs as; a spare renamed when there is one, else a new one.
func (w *workDirs) make(runID string, attempt int) (string, error) {
	prefix := safeName(runID) + "-" + strconv.Itoa(attempt) + "-"
	if spare := w.takeSpare(); spare != "" {
		d := filepath.Join(w.base, prefix+strconv.FormatUint(rand.Uint64(), 36))
		err := os.Rename(spare, d)
		w.guard.untrack(guardDir, spare)
		if err == nil {
			return d, nil
		}
		_ = removeTree(spare)
	}
	d, err := os.MkdirTemp(w.base, prefix)
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

// release takes back an attempt's directory. reusable says that nothing the attempt started
// can still be using it; then an empty directory becomes a spare (up to maxSpares). Anything
// else is removed with what it holds.
func (w *workDirs) release(dir string, reusable bool) error {
	if reusable {
		dir = w.keepSpare(dir)
	}
	if dir == "" {
		return nil
	}
	return removeTree(dir)
}

// keepSpare makes dir a spare if it is empty and there is room, and returns what is left to
// remove: "" when it was kept; dir, or its spare name if others were kept meanwhile.
func (w *workDirs) keepSpare(dir string) string {
	w.mu.Lock()
	full := len(w.spares) >= w.maxSpares
	name := w.prefix + strconv.Itoa(w.named)
	w.named++
	w.mu.Unlock()
	if full || !resetEmptyDir(dir, w.uid, w.gid) {
		return dir
	}
	spare := filepath.Join(w.base, name)
	w.guard.track(guardDir, spare)
	if err := os.Rename(dir, spare); err != nil {
		w.guard.untrack(guardDir, spare)
		return dir
	}
	w.mu.Lock()
	kept := len(w.spares) < w.maxSpares
	if kept {
		w.spares = append(w.spares, spare)
	}
	w.mu.Unlock()
	if kept {
		return ""
	}
	w.guard.untrack(guardDir, spare)
	return spare
}

func (w *workDirs) takeSpare() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.spares)
	if n == 0 {
		return ""
	}
	s := w.spares[n-1]
	w.spares = w.spares[:n-1]
	return s
}

// close removes the spares, and base if the agent made it (what is left in it too).
func (w *workDirs) close() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	spares := w.spares
	w.spares = nil
	w.mu.Unlock()
	var errs []error
	for _, s := range spares {
		errs = append(errs, removeTree(s))
		w.guard.untrack(guardDir, s)
	}
	if w.created {
		errs = append(errs, removeTree(w.base))
	}
	return errors.Join(errs...)
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
