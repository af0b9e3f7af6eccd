// Package progress draws a progress bar for people at a terminal: how much of a piece of
// work is done, its rate over the last seconds, the time left, redrawn in place at most ten
// times a second, and a last line that stays when the work ends.
//
// A Bar writes to any io.Writer and reads an injected clock, so its rate and time left are
// tested without waiting. Whether a bar is worth drawing at all is Shown's call: only on a
// terminal. The CLI draws its bars on standard error, never in machine-readable output.
package progress
