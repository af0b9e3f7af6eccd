//go:build linux

package worker

import (
	"syscall"
	"unsafe"
)

// waitid(2) arguments (the same on every Linux architecture).
const (
	pPID     = 1
	wEXITED  = 0x4
	wNOWAIT  = 0x1000000
	siginfoN = 128 // sizeof(siginfo_t)
)

// waitExited blocks until process pid has exited, without reaping it, and reports whether it
// did so: the process is then a zombie until exec.Cmd.Wait reaps it.
func waitExited(pid int) bool {
	var info [siginfoN]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), wEXITED|wNOWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		return errno == 0
	}
}
