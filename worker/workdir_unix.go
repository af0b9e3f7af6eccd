//go:build unix

package worker

import (
	"io"
	"os"
	"syscall"
)

// resetEmptyDir says whether dir is an empty directory (not a symbolic link) of user uid and
// group gid, and if so gives it mode 0700 back, as a new attempt directory has it.
func resetEmptyDir(dir string, uid, gid uint32) bool {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Uid != uid || st.Gid != gid {
		return false
	}
	if names, err := f.Readdirnames(1); len(names) > 0 || err != io.EOF {
		return false
	}
	if st.Mode&0o7777 != 0o700 && syscall.Fchmod(fd, 0o700) != nil {
		return false
	}
	return true
}
