//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package progress

import "io"

// IsTerminal reports whether w is a terminal: never, on a system this package cannot ask.
func IsTerminal(io.Writer) bool { return false }
