//go:build unix

package worker

import (
	"syscall"
)

// resetEmptyDir says whether dir is an empty directory (not a symbolic link) of user uid and
// group gid, and if so gives it mode 0700 back, as a new attempt directory has it. It reads
// the directory with system calls alone (os.File's Readdirnames would allocate a buffer for
// each directory).
func resetEmptyDir(dir string, uid, gid uint32) bool {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Uid != uid || st.Gid != gid {
		return false
	}
	if !emptyDir(fd) {
		return false
	}
	if st.Mode&0o7777 != 0o700 && syscall.Fchmod(fd, 0o700) != nil {
		return false
	}
	return true
}

// emptyDir reports whether the directory open as fd has no entries but "." and "..".
func emptyDir(fd int) bool {
	var buf [1024]byte
	for {
		n, err := syscall.ReadDirent(fd, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		if n <= 0 {
			return true
		}
		var names []string
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
		if len(names) > 0 { // ParseDirent leaves "." and ".." out
			return false
		}
	}
}
