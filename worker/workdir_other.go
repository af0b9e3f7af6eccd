//go:build !unix

package worker

// resetEmptyDir: attempt directories are not kept for reuse on this platform.
func resetEmptyDir(string, uint32, uint32) bool { return false }
