//go:build !unix

package app

// fdLimit is the process's soft limit of open files: unknown here.
func fdLimit() uint64 { return 0 }
