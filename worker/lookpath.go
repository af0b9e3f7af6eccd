package worker

import (
	"os"
	"os/exec"
	"sync"
	"time"
)

// pathCacheTTL is how long a command name's lookup in PATH is reused.
const pathCacheTTL = time.Second

// pathCacheMax bounds the names a pathCache holds: past it, it starts over.
const pathCacheMax = 1024

// pathCache remembers, for a second, where the worker's PATH led a command's first word.
// Looking a name up stats each directory of PATH until one has it: on a machine whose PATH
// had 13 directories, `true` cost 12 stat calls and some 30 allocations, about 25 µs of the
// agent's CPU an attempt. A shell keeps such a table until told to forget it (`hash -r`);
// this one forgets after pathCacheTTL, so a program installed earlier in PATH, or PATH
// changed, is seen within a second. Failed lookups are not kept.
type pathCache struct {
	now     func() time.Time
	mu      sync.Mutex
	entries map[string]pathEntry
}

type pathEntry struct {
	path    string    // what exec.LookPath returned
	pathEnv string    // the PATH it looked in
	at      time.Time // when
}

func newPathCache(now func() time.Time) *pathCache {
	return &pathCache{now: now, entries: make(map[string]pathEntry)}
}

// lookPath is exec.LookPath(name), or what it returned for name less than pathCacheTTL ago
// with the same PATH.
func (c *pathCache) lookPath(name string) (string, error) {
	pathEnv := os.Getenv("PATH")
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[name]
	c.mu.Unlock()
	if age := now.Sub(e.at); ok && e.pathEnv == pathEnv && age >= 0 && age < pathCacheTTL {
		return e.path, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if len(c.entries) >= pathCacheMax {
		clear(c.entries)
	}
	c.entries[name] = pathEntry{path: p, pathEnv: pathEnv, at: now}
	c.mu.Unlock()
	return p, nil
}
