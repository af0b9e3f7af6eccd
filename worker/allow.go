package worker

import (
	"errors"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// shellPath is the program a shell job runs, as /bin/sh -c SCRIPT: the executable the
// allow-list judges for every shell job.
const shellPath = "/bin/sh"

// allowList is Config.AllowCommands, checked: patterns of absolute paths (path.Match syntax,
// bare names already looked up in PATH). A nil list allows every executable.
type allowList struct {
	patterns []string
}

// newAllowList checks AllowCommands and returns the list, nil when it is empty. An entry is
// an absolute path or a pattern of them ("/usr/bin/python3", "/opt/jobs/*"), or a bare
// command name ("python3"), which is looked up in the worker's PATH now, as a command's
// first word is when it runs.
func newAllowList(entries []string) (*allowList, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	l := &allowList{patterns: make([]string, 0, len(entries))}
	for _, e := range entries {
		switch {
		case e == "":
			return nil, errors.New("AllowCommands: an entry is empty")
		case strings.Contains(e, "/"):
			if !filepath.IsAbs(e) {
				return nil, fmt.Errorf("AllowCommands: %q must be an absolute path or a bare command name", e)
			}
			if _, err := path.Match(e, ""); err != nil {
				return nil, fmt.Errorf("AllowCommands: %q: %w", e, err)
			}
			l.patterns = append(l.patterns, filepath.Clean(e))
		case strings.ContainsAny(e, `*?[\`):
			return nil, fmt.Errorf("AllowCommands: %q: a pattern must be an absolute path such as /opt/jobs/*", e)
		default:
			p, err := exec.LookPath(e)
			if err != nil {
				return nil, fmt.Errorf("AllowCommands: %q: %w", e, err)
			}
			if p, err = filepath.Abs(p); err != nil {
				return nil, fmt.Errorf("AllowCommands: %q: %w", e, err)
			}
			l.patterns = append(l.patterns, escapePattern(p))
		}
	}
	return l, nil
}

// escapePattern makes a path match itself only.
func escapePattern(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// allows reports whether exe, an absolute and clean path, may run.
func (l *allowList) allows(exe string) bool {
	if l == nil {
		return true
	}
	for _, p := range l.patterns {
		if ok, _ := path.Match(p, exe); ok {
			return true
		}
	}
	return false
}

// String lists the patterns; "" for a nil list (everything allowed).
func (l *allowList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.patterns, ", ")
}

// notAllowedError says a command's executable is not in the worker's allow-list.
type notAllowedError struct {
	exe  string
	list *allowList
}

func (e *notAllowedError) Error() string {
	return fmt.Sprintf("command %s is not allowed on this worker (allowed: %s)", e.exe, e.list)
}

// resolveExecutable returns the program the lease runs, as an absolute, clean path: the shell
// for a shell job; for a command, its first word looked up in the worker's PATH when it has
// no slash (as exec.Command does, through paths), or taken relative to dir, the directory it
// runs in.
func resolveExecutable(command []string, dir string, paths *pathCache) (string, error) {
	if len(command) == 0 {
		return shellPath, nil
	}
	name := command[0]
	if !strings.Contains(name, "/") {
		p, err := paths.lookPath(name)
		if err != nil {
			return "", err
		}
		name = p
	} else if !filepath.IsAbs(name) {
		name = filepath.Join(dir, name)
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", command[0], err)
	}
	return abs, nil
}
