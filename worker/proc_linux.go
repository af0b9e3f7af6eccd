//go:build linux

package worker

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// cgroup2Magic is the file system type of a cgroup v2 hierarchy (statfs(2)).
const cgroup2Magic = 0x63677270

// cpuPeriod is the cpu.max period an attempt's CPU quota is given in (the kernel's default).
const cpuPeriod = 100_000

// cgroupDrain bounds how long the agent waits for a killed cgroup to empty before it removes
// it.
const cgroupDrain = 5 * time.Second

// cgroupParent is Config.Cgroup, opened: a cgroup v2 directory under which every command
// attempt gets a cgroup of its own, and the controllers its children have.
type cgroupParent struct {
	dir         string
	memory, cpu bool
}

// openCgroup checks that dir is a cgroup v2 directory the agent may create cgroups in, and
// enables the memory and cpu controllers for its children where the hierarchy offers them
// (a cgroup with processes of its own cannot: give the agent an empty, delegated one). A dir
// that does not exist is created, in a parent where those controllers are enabled first.
func openCgroup(dir string) (*cgroupParent, []string, error) {
	var warnings []string
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		parent := filepath.Dir(dir)
		warnings = append(warnings, enableControllers(parent)...)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("cgroup %s: %w", dir, err)
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil, nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	if st.Type != cgroup2Magic {
		return nil, nil, fmt.Errorf("cgroup %s: not a cgroup v2 directory", dir)
	}
	probe, err := os.MkdirTemp(dir, "stint-probe-")
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup %s: cannot create cgroups in it: %w", dir, err)
	}
	if err := os.Remove(probe); err != nil {
		return nil, nil, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	p := &cgroupParent{dir: dir}
	warnings = append(warnings, enableControllers(dir)...)
	enabled := strings.Fields(readFile(filepath.Join(dir, "cgroup.subtree_control")))
	p.memory, p.cpu = slices.Contains(enabled, "memory"), slices.Contains(enabled, "cpu")
	return p, warnings, nil
}

// enableControllers enables the memory and cpu controllers for the children of cgroup dir,
// where it has them, and says what it could not do.
func enableControllers(dir string) []string {
	var warnings []string
	available := strings.Fields(readFile(filepath.Join(dir, "cgroup.controllers")))
	for _, c := range []string{"memory", "cpu"} {
		if !slices.Contains(available, c) {
			warnings = append(warnings, fmt.Sprintf("the %s controller is not available in cgroup %s", c, dir))
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
			warnings = append(warnings, fmt.Sprintf("cannot enable the %s controller in cgroup %s: %v", c, dir, err))
		}
	}
	return warnings
}

func readFile(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}

// procSetup is what the agent arranges for one attempt's process around its start: the
// death signal, its cgroup and limits; notes say, for the attempt's log, what the host did
// not allow.
type procSetup struct {
	cgroup     string // the attempt's cgroup directory; "" without one
	cgroupFD   int
	rlimitData uint64 // bytes: RLIMIT_DATA to set once the process started; 0: none
	notes      []string
}

func (p *procSetup) note(format string, args ...any) {
	p.notes = append(p.notes, fmt.Sprintf(format, args...))
}

// setupProcess prepares attr for the attempt's process: SIGKILL when the thread that starts it
// dies (a starter's, which lives as long as the agent runs commands: starter_unix.go; so that
// means the worker's death), a cgroup of its own under Config.Cgroup when there is one, and the
// job's cpu and memory requirements as limits when Config.Limits is set: memory.max and
// cpu.max of its cgroup when the cgroup has those controllers; otherwise memory as
// RLIMIT_DATA on the process (each process of the attempt gets that much, not the attempt as
// a whole) and cpu not at all.
func (at *attempt) setupProcess(attr *syscall.SysProcAttr) *procSetup {
	p := &procSetup{cgroupFD: -1}
	attr.Pdeathsig = syscall.SIGKILL
	cpu, memMB := at.wantLimits()
	cg := at.agent.cgroup
	if cg != nil {
		dir := filepath.Join(cg.dir, attemptName(at.lease.RunID, at.lease.Attempt))
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			p.cgroup = dir
			p.cgroupFD, err = syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		}
		if err != nil {
			p.note("no cgroup for this attempt (%v): its processes are tracked by process group only", err)
			p.removeCgroup()
		} else {
			attr.UseCgroupFD, attr.CgroupFD = true, p.cgroupFD
		}
	}
	if memMB > 0 {
		bytes := memMB << 20
		switch {
		case p.cgroup != "" && cg.memory:
			if err := os.WriteFile(filepath.Join(p.cgroup, "memory.max"), []byte(strconv.FormatInt(bytes, 10)), 0); err != nil {
				p.note("memory limit of %d MB not applied: memory.max: %v", memMB, err)
			}
		default:
			p.rlimitData = uint64(bytes)
		}
	}
	if cpu > 0 {
		switch {
		case p.cgroup != "" && cg.cpu:
			quota := int64(math.Ceil(cpu * cpuPeriod))
			if err := os.WriteFile(filepath.Join(p.cgroup, "cpu.max"), fmt.Appendf(nil, "%d %d", quota, cpuPeriod), 0); err != nil {
				p.note("cpu limit of %s CPUs not applied: cpu.max: %v", fmtCPU(cpu), err)
			}
		case cg == nil:
			p.note("cpu limit of %s CPUs not applied: the worker has no cgroup to run attempts in", fmtCPU(cpu))
		default:
			p.note("cpu limit of %s CPUs not applied: the cpu controller is not enabled in cgroup %s", fmtCPU(cpu), cg.dir)
		}
	}
	return p
}

// started applies what can only be applied to a running process: RLIMIT_DATA. The process
// runs unlimited for the moment between its exec and this call.
func (p *procSetup) started(pid int) {
	if p.rlimitData == 0 {
		return
	}
	lim := syscall.Rlimit{Cur: p.rlimitData, Max: p.rlimitData}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_DATA,
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	if errno != 0 {
		p.note("memory limit of %d MB not applied: setting RLIMIT_DATA: %v", p.rlimitData>>20, errno)
	}
}

// closeFD closes the cgroup's descriptor once the process has started in it.
func (p *procSetup) closeFD() {
	if p.cgroupFD >= 0 {
		_ = syscall.Close(p.cgroupFD)
		p.cgroupFD = -1
	}
}

// killAll kills every process in the attempt's cgroup, those that left its process group
// (setsid) included.
func (p *procSetup) killAll() {
	if p.cgroup != "" {
		killCgroup(p.cgroup)
	}
}

// cleanup kills what is left in the attempt's cgroup and removes it.
func (p *procSetup) cleanup() {
	p.closeFD()
	if p.cgroup == "" {
		return
	}
	killCgroup(p.cgroup)
	p.removeCgroup()
}

func (p *procSetup) removeCgroup() {
	if p.cgroupFD >= 0 {
		p.closeFD()
	}
	if p.cgroup != "" {
		removeCgroup(p.cgroup, cgroupDrain)
		p.cgroup = ""
	}
}

// killCgroup kills every process in the cgroup dir: with cgroup.kill (Linux 5.14), else one
// by one from cgroup.procs.
func killCgroup(dir string) {
	err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	if err == nil || errors.Is(err, os.ErrNotExist) && !exists(dir) {
		return
	}
	for range 10 {
		procs := strings.Fields(readFile(filepath.Join(dir, "cgroup.procs")))
		if len(procs) == 0 {
			return
		}
		for _, s := range procs {
			if pid, err := strconv.Atoi(s); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// removeCgroup removes the cgroup dir once its killed processes are gone (the kernel reaps
// them a moment after the kill), waiting at most wait for that.
func removeCgroup(dir string, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Rmdir(dir)
		if !errors.Is(err, syscall.EBUSY) {
			return // removed, gone, or an error waiting will not cure
		}
		if !time.Now().Before(deadline) || !waitEmpty(dir, deadline) {
			return
		}
	}
}

// waitEmpty waits until the cgroup dir has no processes left, or deadline. It watches
// cgroup.events, which the kernel updates (and notifies) when that changes. It reports
// whether the cgroup is empty.
func waitEmpty(dir string, deadline time.Time) bool {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "inotify")
	defer f.Close()
	if _, err := syscall.InotifyAddWatch(fd, filepath.Join(dir, "cgroup.events"), syscall.IN_MODIFY); err != nil {
		return false
	}
	buf := make([]byte, 4096)
	for populated(dir) {
		killCgroup(dir)
		if err := f.SetReadDeadline(deadline); err != nil {
			return false
		}
		if _, err := f.Read(buf); err != nil {
			return !populated(dir)
		}
	}
	return true
}

// populated reports whether the cgroup dir (or a descendant) still has processes.
func populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	for line := range bytes.Lines(b) {
		if f := bytes.Fields(line); len(f) == 2 && string(f[0]) == "populated" {
			return string(f[1]) != "0"
		}
	}
	return false
}

// cgroupDir is the attempt's cgroup directory; "" without one.
func (p *procSetup) cgroupDir() string { return p.cgroup }

// onMainThread reports whether the calling goroutine runs on the process's main thread (the
// one whose thread id is the process id).
func onMainThread() bool { return syscall.Gettid() == os.Getpid() }

// attemptName names what the agent makes for one attempt of run runID alone (its cgroup):
// RUN-ATTEMPT-RANDOM, where RUN keeps the characters of runID that are safe in a file name.
func attemptName(runID string, attempt int) string {
	return safeName(runID) + "-" + strconv.Itoa(attempt) + "-" + strconv.FormatUint(rand.Uint64(), 36)
}

// safeName keeps the characters of s that are safe in a file name, at most 64.
func safeName(s string) string {
	b := make([]byte, 0, min(len(s), 64))
	for i := 0; i < len(s) && len(b) < 64; i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			b = append(b, c)
		}
	}
	if len(b) == 0 || b[0] == '.' {
		b = append([]byte("run"), b...)
	}
	return string(b)
}
