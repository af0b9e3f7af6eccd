//go:build !linux

package worker

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// cgroupParent: cgroups are Linux's.
type cgroupParent struct{}

func openCgroup(string) (*cgroupParent, []string, error) {
	return nil, nil, errors.New("cgroups exist on Linux only")
}

// procSetup: on this platform the agent applies no limits and has no death signal; notes say
// so in the attempt's log.
type procSetup struct {
	notes []string
}

func (at *attempt) setupProcess(*syscall.SysProcAttr) *procSetup {
	p := &procSetup{}
	cpu, memMB := at.wantLimits()
	if memMB > 0 {
		p.notes = append(p.notes, fmt.Sprintf("memory limit of %d MB not applied: not supported on this platform", memMB))
	}
	if cpu > 0 {
		p.notes = append(p.notes, fmt.Sprintf("cpu limit of %s CPUs not applied: not supported on this platform", fmtCPU(cpu)))
	}
	return p
}

func (p *procSetup) started(int) {}
func (p *procSetup) closeFD()    {}
func (p *procSetup) killAll()    {}
func (p *procSetup) cleanup()    {}

func killCgroup(string)                  {}
func removeCgroup(string, time.Duration) {}

func (p *procSetup) cgroupDir() string { return "" }

// onMainThread is false where threads have no death signal to protect (see proc_linux.go).
func onMainThread() bool { return false }
