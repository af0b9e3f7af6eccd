package worker

import "strconv"

// wantLimits returns the requirements an attempt's process is limited to: its lease's cpu and
// memory, when the agent enforces limits (Config.Limits).
func (at *attempt) wantLimits() (cpu float64, memoryMB int64) {
	r := at.lease.Requirements
	if !at.agent.cfg.Limits || r == nil {
		return 0, 0
	}
	return max(r.CPU, 0), max(r.MemoryMB, 0)
}

// fmtCPU writes a number of CPUs as requirements do ("2", "0.5").
func fmtCPU(cpu float64) string { return strconv.FormatFloat(cpu, 'f', -1, 64) }
