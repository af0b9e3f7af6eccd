//go:build unix

package app

import "syscall"

// fdLimit is the process's soft limit of open files (0 when unknown).
func fdLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
