//go:build darwin || freebsd || netbsd || openbsd

package progress

import "golang.org/x/sys/unix"

const ioctlGetTermios = unix.TIOCGETA
