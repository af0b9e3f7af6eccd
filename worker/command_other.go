//go:build !unix

package worker

import "syscall"

// runCommand: commands need process groups, which this platform lacks.
func (at *attempt) runCommand() outcome {
	at.state.CompareAndSwap(int32(running), int32(reasonDone))
	return outcome{status: statusFailed, err: "this worker's platform does not run commands"}
}

func (at *attempt) signalLocked(syscall.Signal) {}

func killGroup(int) {}

func ownGroup() *syscall.SysProcAttr { return nil }

// starters: nothing starts processes here.
type starters struct{}

func newStarters(int) *starters { return nil }

func (*starters) close() {}
func startersN() int     { return 0 }
