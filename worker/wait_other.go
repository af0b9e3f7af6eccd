//go:build unix && !linux

package worker

// waitExited cannot wait without reaping here; the caller kills the group after Wait instead.
func waitExited(int) bool { return false }
