package worker

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
)

// defaultPath is a command's PATH when the worker has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// inheritedVars pass from the worker's environment to every command: where to find programs,
// and the GPU scoping the worker was started with (a run that needs no GPU keeps it, as the
// package documentation says). HOME is added separately (the RunAs user's, or the worker's).
var inheritedVars = []string{"PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"}

// reservedPrefix marks stint's own variables: the worker's and server's configuration and
// credentials (STINT_TOKEN, STINT_API_TOKEN, STINT_WORKER_TOKEN...) never pass to a job,
// whatever PassEnv says; a job's STINT_ variables are the ones the agent sets.
const reservedPrefix = "STINT_"

// checkPassEnv checks Config.PassEnv: each entry is a variable name or a path.Match pattern of
// names, and none names stint's own variables.
func checkPassEnv(patterns []string) error {
	for _, p := range patterns {
		if p == "" || strings.ContainsAny(p, "=\x00") {
			return fmt.Errorf("PassEnv: %q is not a variable name or a pattern of names", p)
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("PassEnv: %q: %w", p, err)
		}
		if strings.HasPrefix(strings.ToUpper(p), reservedPrefix) {
			return fmt.Errorf("PassEnv: %q: stint's own %s* variables (its tokens among them) never pass to jobs", p, reservedPrefix)
		}
	}
	return nil
}

// passes reports whether the worker's variable name goes to commands under PassEnv patterns.
func passes(patterns []string, name string) bool {
	if strings.HasPrefix(strings.ToUpper(name), reservedPrefix) {
		return false
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// commandEnv is the environment of an attempt's process, from a clean start: PATH (the
// worker's, or defaultPath), HOME (home: the RunAs user's, or the worker's),
// CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER when the worker has them, TMPDIR set to the
// attempt's working directory, then the worker's variables PassEnv names, then the job's env
// and its secret env, then stint's variables and, for an attempt given GPU devices, CUDA_VISIBLE_DEVICES and
// STINT_GPUS naming them with CUDA_DEVICE_ORDER=PCI_BUS_ID (later entries win in
// exec.Cmd.Env): the devices are nvidia-smi's indices, which follow the PCI bus, while CUDA's
// default order puts the fastest device first and would name other devices on a host of
// mixed GPUs.
func (at *attempt) commandEnv(home, workDir string) []string {
	l := at.lease
	env := make([]string, 0, 16+len(l.Env)+len(l.SecretEnv))
	if p := os.Getenv("PATH"); p != "" {
		env = append(env, "PATH="+p)
	} else {
		env = append(env, "PATH="+defaultPath)
	}
	for _, k := range inheritedVars[1:] {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if home != "" {
		env = append(env, "HOME="+home)
	}
	if workDir != "" {
		env = append(env, "TMPDIR="+workDir)
	}
	if pass := at.agent.cfg.PassEnv; len(pass) > 0 {
		for _, kv := range os.Environ() {
			if k, _, ok := strings.Cut(kv, "="); ok && k != "" && passes(pass, k) {
				env = append(env, kv)
			}
		}
	}
	for k, v := range l.Env {
		env = append(env, k+"="+v)
	}
	for k, v := range l.SecretEnv {
		env = append(env, k+"="+v)
	}
	args := "{}"
	if len(l.Args) > 0 && string(l.Args) != "null" {
		args = string(l.Args)
	}
	env = append(env,
		"STINT_RUN_ID="+l.RunID,
		"STINT_ATTEMPT="+strconv.Itoa(l.Attempt),
		"STINT_JOB="+l.JobName,
		"STINT_JOB_ID="+l.JobID,
		"STINT_ARGS="+args,
	)
	if workDir != "" {
		env = append(env, "STINT_WORK_DIR="+workDir)
	}
	if len(at.task.GPUs) > 0 {
		devices := strings.Join(at.task.GPUs, ",")
		env = append(env, "CUDA_VISIBLE_DEVICES="+devices, "STINT_GPUS="+devices, "CUDA_DEVICE_ORDER=PCI_BUS_ID")
	}
	return env
}
