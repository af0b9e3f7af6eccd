package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: clock ticks of USER_HZ, which
// Linux fixes at 100 per second for everything it reports to user space.
const userHZ = 100

// procSample is what /proc says of a process at one moment.
type procSample struct {
	cpu time.Duration // CPU time used so far, user and system (utime + stime)
	rss int64         // resident memory now, bytes (VmRSS)
	hwm int64         // the most resident memory it ever had, bytes (VmHWM)
}

// readProc reads /proc/PID/stat and /proc/PID/status.
func readProc(pid int) (procSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, fmt.Errorf("process %d: %w", pid, err)
	}
	ticks, err := parseStat(stat)
	if err != nil {
		return procSample{}, fmt.Errorf("process %d: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, fmt.Errorf("process %d: %w", pid, err)
	}
	rss, hwm, err := parseStatus(status)
	if err != nil {
		return procSample{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return procSample{cpu: ticksToDuration(ticks), rss: rss, hwm: hwm}, nil
}

// parseStat returns utime + stime (fields 14 and 15, in clock ticks) of a /proc/PID/stat
// line. The second field, the command name in parentheses, may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStat(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat %q: no command name", b)
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("stat %q: %d fields after the command name, want at least 13", b, len(f))
	}
	var sum uint64
	for _, s := range f[11:13] { // fields 14 (utime) and 15 (stime)
		v, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat: cpu time %q: %w", s, err)
		}
		sum += v
	}
	return sum, nil
}

// parseStatus returns VmRSS and VmHWM, in bytes, of a /proc/PID/status file.
func parseStatus(b []byte) (rss, hwm int64, err error) {
	found := 0
	for line := range bytes.Lines(b) {
		var dst *int64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &rss
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &hwm
		default:
			continue
		}
		f := bytes.Fields(line)
		if len(f) != 3 || string(f[2]) != "kB" {
			return 0, 0, fmt.Errorf("status: %q: want NAME: N kB", bytes.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("status: %q: %w", bytes.TrimSpace(line), err)
		}
		*dst = kb * 1024
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("status: VmRSS or VmHWM missing (a kernel thread, or a process that ended)")
	}
	return rss, hwm, nil
}

// cpuShare is CPU time used over a wall-clock window, as a percentage of one core.
func cpuShare(used, window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	return 100 * used.Seconds() / window.Seconds()
}

// rssOf is the resident memory of the processes sampled, summed, in bytes.
func rssOf(s []procSample) int64 {
	var sum int64
	for _, p := range s {
		sum += p.rss
	}
	return sum
}

// growthPer is how many bytes resident memory grew from before to after for each per of
// count things (a negative growth stays negative: the processes gave memory back); 0 when
// count is not positive.
func growthPer(before, after int64, count int, per float64) float64 {
	if count <= 0 {
		return 0
	}
	return float64(after-before) * per / float64(count)
}

// machineSample is what /proc/stat says of all the machine's CPUs together at one moment.
type machineSample struct {
	busy  time.Duration // time spent on anything but idling, summed over the CPUs
	total time.Duration // all time, idle and stolen included, summed over the CPUs
}

// readMachine reads the first line of /proc/stat.
func readMachine() (machineSample, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineSample{}, fmt.Errorf("machine CPU: %w", err)
	}
	busy, total, err := parseMachineStat(b)
	if err != nil {
		return machineSample{}, fmt.Errorf("machine CPU: %w", err)
	}
	return machineSample{busy: ticksToDuration(busy), total: ticksToDuration(total)}, nil
}

// parseMachineStat returns, from /proc/stat, the CPU time of all CPUs spent working (user,
// nice, system, irq, softirq) and in all (those, idle, iowait and steal), in clock ticks. The
// guest columns are already counted in user and nice. Steal, time the hypervisor gave
// another machine, is counted in the total and not as work.
func parseMachineStat(b []byte) (busy, total uint64, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0, 0, fmt.Errorf("stat %q: want a first line \"cpu\" and at least 8 columns", line)
	}
	var v [8]uint64 // user nice system idle iowait irq softirq steal
	for i := range v {
		if v[i], err = strconv.ParseUint(string(f[i+1]), 10, 64); err != nil {
			return 0, 0, fmt.Errorf("stat: column %d %q: %w", i+1, f[i+1], err)
		}
	}
	busy = v[0] + v[1] + v[2] + v[5] + v[6]
	return busy, busy + v[3] + v[4] + v[7], nil
}

// ticksToDuration converts clock ticks of USER_HZ.
func ticksToDuration(ticks uint64) time.Duration { return time.Duration(ticks) * time.Second / userHZ }

// machineUse is what the machine's CPUs did between two samples.
type machineUse struct {
	busy time.Duration // working time, summed over the CPUs
	// share is busy as a percentage of all the CPUs' time (100: every CPU worked throughout)
	share float64
}

// machineBetween is the use of the machine's CPUs from a to b. The share is at most 100:
// Linux's iowait count may step back, which can leave the total short of the work.
func machineBetween(a, b machineSample) machineUse {
	u := machineUse{busy: b.busy - a.busy}
	if all := b.total - a.total; all > 0 {
		u.share = min(100, 100*u.busy.Seconds()/all.Seconds())
	}
	return u
}
