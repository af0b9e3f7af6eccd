package worker

import "syscall"

// pipeCloexec makes a pipe whose ends close on exec: read end, write end.
func pipeCloexec() (r, w int, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return -1, -1, err
	}
	return p[0], p[1], nil
}
