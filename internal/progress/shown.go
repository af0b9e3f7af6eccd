package progress

import "io"

// Shown reports whether a bar drawn on w would be seen by a person: w is a terminal (a
// file, such as os.Stderr, that is a tty), and the environment's TERM is not "dumb". A
// bar on a pipe or a file would only fill it with redraws.
func Shown(w io.Writer, getenv func(string) string) bool {
	return getenv("TERM") != "dumb" && IsTerminal(w)
}
