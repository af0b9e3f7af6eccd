//go:build !unix

package sqlite

// dirLock is a no-op where flock is missing: the database is not guarded against a second
// process.
type dirLock struct{}

func lock(string) (*dirLock, error) { return &dirLock{}, nil }

func (l *dirLock) release() error { return nil }
