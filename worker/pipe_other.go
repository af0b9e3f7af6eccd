//go:build unix && !linux

package worker

import "syscall"

// pipeCloexec makes a pipe whose ends close on exec: read end, write end. Without pipe2 the
// ends are marked after the pipe is made, under syscall.ForkLock, so that no fork between
// the two copies them into a child (as os.Pipe does).
func pipeCloexec() (r, w int, err error) {
	var p [2]int
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	if err := syscall.Pipe(p[:]); err != nil {
		return -1, -1, err
	}
	syscall.CloseOnExec(p[0])
	syscall.CloseOnExec(p[1])
	return p[0], p[1], nil
}
