//go:build linux || darwin || freebsd || netbsd || openbsd

package progress

import (
	"io"

	"golang.org/x/sys/unix"
)

// IsTerminal reports whether w is a file that is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	return err == nil
}
