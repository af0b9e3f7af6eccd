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
	return procSample{cpu: time.Duration(ticks) * time.Second / userHZ, rss: rss, hwm: hwm}, nil
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
