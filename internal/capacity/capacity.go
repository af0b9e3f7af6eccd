// Package capacity detects what a worker's host offers: CPUs, memory and GPUs. The host's
// facts (its files, its CPU count, the commands it runs) come in a Host, so detection can be
// tested without the host.
//
// Limits are read from cgroup v2 at /sys/fs/cgroup, which is the container's own cgroup when
// the process runs in a cgroup namespace (the default for containers on cgroup v2). On
// cgroup v1, or without a limit, the host's figures stand.
package capacity

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The files detection reads, relative to Host.FS.
const (
	memInfoPath   = "proc/meminfo"
	cpuMaxPath    = "sys/fs/cgroup/cpu.max"
	memoryMaxPath = "sys/fs/cgroup/memory.max"
)

// nvidiaSMI is the command that lists GPUs.
const nvidiaSMI = "nvidia-smi"

// commandTimeout bounds a command OS runs: a wedged GPU driver must not hang the worker's start.
const commandTimeout = 10 * time.Second

// Host is where detection reads the host's facts.
type Host struct {
	// FS is the host's root file system; detection reads proc/meminfo,
	// sys/fs/cgroup/cpu.max and sys/fs/cgroup/memory.max in it.
	FS fs.FS
	// NumCPU returns the number of CPUs the process may use (runtime.NumCPU).
	NumCPU func() int
	// Run runs a command found on PATH and returns its standard output. An error wraps
	// exec.ErrNotFound when the command is not there.
	Run func(ctx context.Context, name string, args ...string) ([]byte, error)
	// LookupEnv reads the process's environment (os.LookupEnv); nil reads nothing.
	LookupEnv func(key string) (string, bool)
}

// OS returns the Host of the running process.
func OS() Host {
	return Host{FS: os.DirFS("/"), NumCPU: runtime.NumCPU, Run: runCommand, LookupEnv: os.LookupEnv}
}

func runCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && len(exit.Stderr) > 0 {
			return nil, fmt.Errorf("run %s: %w: %s", name, err, strings.TrimSpace(string(exit.Stderr)))
		}
		return nil, fmt.Errorf("run %s: %w", name, err)
	}
	return out, nil
}

// GPU is one GPU as nvidia-smi lists it.
type GPU struct {
	Index    int
	Name     string
	MemoryMB int64
}

// CPU returns the CPUs the process may use: NumCPU, capped by the cgroup v2 quota in cpu.max
// when one is set (a quota of 150000 per 100000 is 1.5 CPUs).
func (h Host) CPU(log *slog.Logger) float64 {
	log = orDiscard(log)
	n := 1
	if h.NumCPU != nil {
		n = max(h.NumCPU(), 1)
	}
	cpus := float64(n)
	data, ok := h.readFile(log, cpuMaxPath)
	if !ok {
		return cpus
	}
	quota, limited, err := parseCPUMax(data)
	if err != nil {
		log.Warn("cgroup CPU quota ignored", "err", err)
		return cpus
	}
	if limited && quota < cpus {
		return quota
	}
	return cpus
}

// MemoryMB returns the memory in MB (MiB): MemTotal in /proc/meminfo, capped by the cgroup v2
// limit in memory.max when one is set. It is 0 when neither can be read.
func (h Host) MemoryMB(log *slog.Logger) int64 {
	log = orDiscard(log)
	var total int64
	if data, ok := h.readFile(log, memInfoPath); ok {
		mb, err := parseMemInfo(data)
		if err != nil {
			log.Warn("host memory unknown", "err", err)
		}
		total = mb
	}
	data, ok := h.readFile(log, memoryMaxPath)
	if !ok {
		return total
	}
	limit, limited, err := parseMemoryMax(data)
	if err != nil {
		log.Warn("cgroup memory limit ignored", "err", err)
		return total
	}
	if limited && (total == 0 || limit < total) {
		return limit
	}
	return total
}

// GPUs returns the GPUs nvidia-smi lists. Without nvidia-smi, or when it fails, there are none
// (logged at debug level). When the process has CUDA_VISIBLE_DEVICES set, only the GPUs it
// names by index are offered (an empty value names none): the worker was given those.
// GPU UUIDs in it are not matched; they are logged and left out.
func (h Host) GPUs(ctx context.Context, log *slog.Logger) []GPU {
	gpus := h.listGPUs(ctx, log)
	if h.LookupEnv == nil {
		return gpus
	}
	visible, ok := h.LookupEnv("CUDA_VISIBLE_DEVICES")
	if !ok {
		return gpus
	}
	allowed := map[int]bool{}
	for _, f := range strings.Split(visible, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		i, err := strconv.Atoi(f)
		if err != nil {
			orDiscard(log).Warn("CUDA_VISIBLE_DEVICES: only GPU indices are matched; this entry is left out (give --gpus to offer GPUs by count)",
				"entry", f)
			continue
		}
		allowed[i] = true
	}
	var out []GPU
	for _, g := range gpus {
		if allowed[g.Index] {
			out = append(out, g)
		}
	}
	return out
}

// listGPUs runs nvidia-smi.
func (h Host) listGPUs(ctx context.Context, log *slog.Logger) []GPU {
	if h.Run == nil {
		return nil
	}
	log = orDiscard(log)
	out, err := h.Run(ctx, nvidiaSMI, "--query-gpu=index,name,memory.total", "--format=csv,noheader")
	if errors.Is(err, exec.ErrNotFound) {
		log.Debug("no GPUs: nvidia-smi is not on PATH")
		return nil
	}
	if err != nil {
		log.Debug("no GPUs: nvidia-smi failed", "err", err)
		return nil
	}
	gpus, err := parseNvidiaSMI(string(out))
	if err != nil {
		log.Debug("no GPUs: nvidia-smi output not understood", "err", err)
		return nil
	}
	return gpus
}

// readFile reads name from h.FS; a missing file (no cgroup v2, no /proc) is not worth a log
// line above debug level.
func (h Host) readFile(log *slog.Logger, name string) (string, bool) {
	if h.FS == nil {
		return "", false
	}
	data, err := fs.ReadFile(h.FS, name)
	if errors.Is(err, fs.ErrNotExist) {
		log.Debug("capacity: file not found", "file", "/"+name)
		return "", false
	}
	if err != nil {
		log.Warn("capacity: cannot read file", "file", "/"+name, "err", err)
		return "", false
	}
	return string(data), true
}

// parseCPUMax reads cgroup v2 cpu.max, "$MAX $PERIOD" in microseconds: "max 100000" is no
// limit (limited false), "150000 100000" is 1.5 CPUs.
func parseCPUMax(s string) (cpus float64, limited bool, err error) {
	fields := strings.Fields(s)
	if len(fields) < 1 || len(fields) > 2 {
		return 0, false, fmt.Errorf("cpu.max %q: want QUOTA PERIOD", s)
	}
	if fields[0] == "max" {
		return 0, false, nil
	}
	quota, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil || quota <= 0 {
		return 0, false, fmt.Errorf("cpu.max %q: quota is not a positive number", s)
	}
	period := int64(100000) // the kernel's default
	if len(fields) == 2 {
		period, err = strconv.ParseInt(fields[1], 10, 64)
		if err != nil || period <= 0 {
			return 0, false, fmt.Errorf("cpu.max %q: period is not a positive number", s)
		}
	}
	return float64(quota) / float64(period), true, nil
}

// parseMemInfo returns MemTotal from /proc/meminfo, in MB.
func parseMemInfo(s string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "MemTotal:" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("meminfo: MemTotal %q is not a number of kB", fields[1])
		}
		return kb / 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("meminfo: %w", err)
	}
	return 0, errors.New("meminfo: no MemTotal line")
}

// parseMemoryMax reads cgroup v2 memory.max: "max" is no limit (limited false), else bytes,
// returned in MB.
func parseMemoryMax(s string) (mb int64, limited bool, err error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, false, nil
	}
	b, err := strconv.ParseInt(s, 10, 64)
	if err != nil || b < 0 {
		return 0, false, fmt.Errorf("memory.max %q: want max or a number of bytes", s)
	}
	return b >> 20, true, nil
}

// parseNvidiaSMI reads the lines of `nvidia-smi --query-gpu=index,name,memory.total
// --format=csv,noheader`, such as "0, NVIDIA A100-SXM4-40GB, 40960 MiB".
func parseNvidiaSMI(s string) ([]GPU, error) {
	var gpus []GPU
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		fields := strings.Split(line, ",")
		if len(fields) != 3 {
			return nil, fmt.Errorf("nvidia-smi line %q: want index, name, memory.total", line)
		}
		idx, err := strconv.Atoi(strings.TrimSpace(fields[0]))
		if err != nil || idx < 0 {
			return nil, fmt.Errorf("nvidia-smi line %q: index is not a number", line)
		}
		gpu := GPU{Index: idx, Name: strings.TrimSpace(fields[1])}
		// Memory is informative only: "[N/A]" leaves it 0.
		if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(fields[2]), " MiB"), 10, 64); err == nil && n >= 0 {
			gpu.MemoryMB = n
		}
		gpus = append(gpus, gpu)
	}
	return gpus, nil
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
