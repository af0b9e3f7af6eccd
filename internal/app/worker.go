package app

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/capacity"
	"github.com/stint-dev/stint/internal/cli"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/placement"
	"github.com/stint-dev/stint/worker"
)

func workerCommand() *cobra.Command { return newWorkerCommand(capacity.OS(), guardCommand()) }

// workerFlags are the flags of stint worker. A capacity flag not given is detected on host.
type workerFlags struct {
	id, labels          string
	offer               capacityFlags
	gpus                int
	drainTimeout        time.Duration
	logLevel, logFormat string
	cert, key           string // client certificate (mutual TLS)
	commands            commandFlags
}

// commandFlags say how a worker runs commands (stint worker; --pass-env for stint dev too).
type commandFlags struct {
	passEnv, allow []string
	runAs, workDir string
	cgroup         string
	noLimits       bool
}

func (f *commandFlags) registerPassEnv(fl *pflag.FlagSet) {
	fl.StringSliceVar(&f.passEnv, "pass-env", nil,
		"variables of this process's environment that jobs get, as NAME,NAME or patterns such as LC_* (jobs otherwise get only PATH, HOME and their own env; STINT_* never passes)")
}

func (f *commandFlags) register(fl *pflag.FlagSet) {
	f.registerPassEnv(fl)
	fl.StringSliceVar(&f.allow, "allow-commands", nil,
		"the only executables jobs may run: absolute paths, patterns such as /opt/jobs/*, or names looked up in PATH; /bin/sh allows shell jobs (default: any)")
	fl.StringVar(&f.runAs, "run-as", "", "run jobs as this user, with its groups and HOME (the worker must run as root)")
	fl.StringVar(&f.workDir, "work-dir", "", "where each attempt gets an empty working directory of its own, emptied when it ends (default: a temporary directory)")
	fl.StringVar(&f.cgroup, "cgroup", "", "a delegated, empty cgroup v2 directory in which each attempt gets a cgroup of its own (Linux)")
	fl.BoolVar(&f.noLimits, "no-limits", false, "do not limit jobs to their cpu and memory requirements")
}

// apply sets the command fields of cfg.
func (f *commandFlags) apply(cfg *worker.Config, guard []string) {
	cfg.PassEnv, cfg.AllowCommands = f.passEnv, f.allow
	cfg.RunAs, cfg.WorkDir, cfg.Cgroup = f.runAs, f.workDir, f.cgroup
	cfg.Limits = !f.noLimits
	cfg.Guard = guard
}

// guardCommand is how this binary starts a worker's guard process: itself, as
// `stint worker-guard`; nil when it cannot tell its own path.
func guardCommand() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, guardCommandName}
}

// guardCommandName is the hidden command that runs a worker's guard (worker.RunGuard).
const guardCommandName = "worker-guard"

// newGuardCommand returns the hidden `stint worker-guard`: the guard process a worker
// starts, which kills what the worker's attempts left running when the worker's process
// ends (see worker.RunGuard). Only the end of its input ends it.
func newGuardCommand() *cobra.Command {
	return &cobra.Command{
		Use:    guardCommandName,
		Short:  "The guard process of a worker (started by the worker itself)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
			if err := worker.RunGuard(cmd.InOrStdin()); err != nil {
				return fmt.Errorf("worker guard: %w", err)
			}
			return nil
		},
	}
}

// newWorkerCommand returns stint worker, which detects its capacity on host and starts guard
// as its guard process (none when nil).
func newWorkerCommand(host capacity.Host, guard []string) *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker that executes jobs leased from a stint server",
		Long: `Run a worker that executes jobs leased from a stint server.

The worker offers what it detects on its host; each flag overrides one part:
  --cpu     the CPUs the process may use, capped by the cgroup v2 quota (cpu.max)
  --memory  MemTotal in /proc/meminfo, capped by the cgroup v2 limit (memory.max)
  --gpus    the GPUs nvidia-smi lists (none without nvidia-smi), only those whose index
            the worker's own CUDA_VISIBLE_DEVICES names when it is set
  --slots   one per CPU offered, rounded up

A run that needs GPUs gets that many of the worker's devices to itself while it runs, named
in CUDA_VISIBLE_DEVICES and STINT_GPUS ("0,2"); a run that needs none is left alone, with
whatever CUDA_VISIBLE_DEVICES the worker's environment and the job's env give it. The
devices are the indices nvidia-smi lists; with --gpus N, nvidia-smi is not run and the
devices are 0 to N-1.

Jobs start from a clean environment: PATH, HOME and their own env, plus what --pass-env
names (never STINT_*: the worker's token stays its own). Each attempt runs in a fresh
directory under --work-dir, removed when it ends, in its own process group (and cgroup with
--cgroup), limited to its cpu and memory requirements where the host allows (memory.max and
cpu.max with --cgroup; otherwise memory as RLIMIT_DATA per process and cpu not at all, which
the attempt's log says). --allow-commands refuses other executables, --run-as drops
privileges. If the worker dies, its jobs' processes are killed (a guard process watches it).

--server takes the server's URL, or a comma-separated list of the servers of one cluster
(env STINT_SERVER); https:// servers are verified against --ca (env STINT_CA), else the
system's roots. The worker proves who it is with --token (env STINT_TOKEN): a worker token,
best bound to its id, or the server's --worker-token; or with a client certificate, --cert
and --key, signed by a CA of the server's --client-ca: the certificate's Common Name is the
one worker id it may use.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return cli.Usagef("%w", err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, err := loadSettings(cmd, workerEnv)
			if err != nil || set.print {
				return printSettings(cmd, set, err)
			}
			log, err := newLogger(f.logLevel, f.logFormat)
			if err != nil {
				return cli.Usagef("%w", err)
			}
			lbls, err := parseLabels(f.labels)
			if err != nil {
				return err
			}
			if err := f.validate(cmd); err != nil {
				return err
			}
			capa, gpus := f.capacity(cmd, host, log)
			id := f.id
			if id == "" {
				hostname, _ := os.Hostname()
				id = fmt.Sprintf("%s-%d", hostname, os.Getpid())
			}
			server, _ := cmd.Flags().GetString("server")
			token, _ := cmd.Flags().GetString("token")
			ca, _ := cmd.Flags().GetString("ca")
			if f.cert != "" && token != "" {
				return cli.Usagef("--cert: the client certificate is the worker's identity; give no --token (nor STINT_TOKEN) with it")
			}
			tlsCfg, err := clientTLS(ca, f.cert, f.key, clock.Real{}, log)
			if err != nil {
				return cli.Usagef("%w", err)
			}
			var opts []client.Option
			if token != "" {
				opts = append(opts, client.WithToken(token))
			}
			if tlsCfg != nil {
				opts = append(opts, client.WithTLSConfig(tlsCfg))
			}
			c, err := client.New(server, opts...)
			if err != nil {
				return cli.Usagef("--server: %w", err)
			}
			wcfg := worker.Config{
				Server:   c,
				ID:       id,
				Labels:   lbls,
				Capacity: capa,
				GPUs:     gpus,
				Handlers: map[string]worker.Handler{"noop": worker.Noop},
				Commands: true,
				Logger:   log.With("worker", id),
				// 0 would mean the agent's default; the flag's 0 means stop at once.
				DrainTimeout: cmp.Or(f.drainTimeout, time.Nanosecond),
			}
			f.commands.apply(&wcfg, guard)
			w, err := worker.New(wcfg)
			if err != nil {
				return fmt.Errorf("start worker: %w", err)
			}
			log.Info("stint worker starting", "id", id, "server", server,
				"cpu", capa.CPU, "memory_mb", capa.MemoryMB, "gpu", capa.GPU, "gpu_devices", gpus,
				"slots", capa.Slots, "labels", lbls)
			return w.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.id, "id", "", "worker id (default host-pid)")
	fl.StringVar(&f.labels, "labels", "", "labels as k=v,k=v")
	f.offer.register(fl, "one per CPU offered")
	fl.IntVar(&f.gpus, "gpus", 0, "GPUs offered (default: detected with nvidia-smi)")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", worker.DefaultDrainTimeout,
		"on SIGTERM or a remote drain, how long running attempts may finish before they are stopped (-1s: no limit)")
	f.commands.register(fl)
	fl.StringVar(&f.cert, "cert", "",
		"client certificate (PEM) to present to the server (mutual TLS): its Common Name must be --id; reloaded when it changes; needs --key, and no --token")
	fl.StringVar(&f.key, "key", "", "the private key of --cert (PEM)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	registerConfig(cmd, workerEnv)
	return cmd
}

// validate refuses the capacity flags given with values a worker cannot offer.
func (f *workerFlags) validate(cmd *cobra.Command) error {
	given := cmd.Flags().Changed
	if err := f.offer.validate(cmd); err != nil {
		return err
	}
	if given("gpus") && f.gpus < 0 {
		return cli.Usagef("--gpus: must not be negative, got %d", f.gpus)
	}
	if given("drain-timeout") && f.drainTimeout < 0 && f.drainTimeout != -time.Second {
		return cli.Usagef("--drain-timeout: must be 0 or more, or -1s for no limit, got %s", f.drainTimeout)
	}
	return nil
}

// capacity returns what the worker offers: the flags given, and what host says for the rest.
// It runs nvidia-smi only when --gpus is not given. gpus are the GPU devices offered, as
// CUDA_VISIBLE_DEVICES names them (see offeredGPUs); capacity's GPU is their number.
func (f *workerFlags) capacity(cmd *cobra.Command, host capacity.Host, log *slog.Logger) (apitype.Capacity, []string) {
	given := cmd.Flags().Changed
	c := f.offer.detect(cmd, host, log, 1)
	var detected []capacity.GPU
	if !given("gpus") {
		detected = host.GPUs(cmd.Context(), log)
	}
	gpus := offeredGPUs(detected, given("gpus"), f.gpus)
	c.GPU = len(gpus)
	return c, gpus
}

// capacityFlags are --cpu, --memory and --slots: what a worker offers (stint worker, and
// the local worker of stint dev), each detected on the host when not given.
type capacityFlags struct {
	cpu    float64
	memory cli.MemoryFlag
	slots  int
}

func (f *capacityFlags) register(fl *pflag.FlagSet, slotsDefault string) {
	fl.Float64Var(&f.cpu, "cpu", 0, "CPUs offered (default: detected)")
	fl.Var(&f.memory, "memory", "memory offered, e.g. 16384 (MiB) or 16G (default: detected)")
	fl.IntVar(&f.slots, "slots", 0, "attempts run at once (default: "+slotsDefault+")")
}

// validate refuses the flags given with values a worker cannot offer.
func (f *capacityFlags) validate(cmd *cobra.Command) error {
	given := cmd.Flags().Changed
	if given("cpu") && (f.cpu <= 0 || math.IsInf(f.cpu, 0) || math.IsNaN(f.cpu)) {
		return cli.Usagef("--cpu: must be a number of CPUs above 0, got %v", f.cpu)
	}
	if given("slots") && f.slots < 1 {
		return cli.Usagef("--slots: must be at least 1, got %d", f.slots)
	}
	return nil
}

// detect returns the CPUs, memory and slots offered: the flags given, what host says for the
// others, and slotsPerCPU slots per CPU offered (rounded up) unless --slots is given.
func (f *capacityFlags) detect(cmd *cobra.Command, host capacity.Host, log *slog.Logger, slotsPerCPU int) apitype.Capacity {
	given := cmd.Flags().Changed
	c := apitype.Capacity{CPU: f.cpu, MemoryMB: f.memory.MB, Slots: f.slots}
	if !given("cpu") {
		c.CPU = host.CPU(log)
	}
	if !given("memory") {
		c.MemoryMB = host.MemoryMB(log)
	}
	if !given("slots") {
		c.Slots = slotsPerCPU * max(1, int(math.Ceil(c.CPU)))
	}
	return c
}

// localSlotsPerCPU are the slots per CPU of stint dev's local worker: a development
// machine's jobs mostly wait (on the network, on sleep), so it runs more than one per CPU.
const localSlotsPerCPU = 4

// offeredGPUs names the GPU devices the worker offers: with --gpus n (overridden), "0" to
// "n-1", the first n indices CUDA knows, since nothing was detected; otherwise the indices of
// the detected GPUs, in ascending order (an attempt gets the lowest free ones first), each
// once.
func offeredGPUs(detected []capacity.GPU, overridden bool, n int) []string {
	if overridden {
		ids := make([]string, max(n, 0))
		for i := range ids {
			ids[i] = strconv.Itoa(i)
		}
		return ids
	}
	indices := make([]int, 0, len(detected))
	for _, g := range detected {
		indices = append(indices, g.Index)
	}
	slices.Sort(indices)
	indices = slices.Compact(indices)
	ids := make([]string, len(indices))
	for i, idx := range indices {
		ids[i] = strconv.Itoa(idx)
	}
	return ids
}

// parseLabels reads "k=v,k=v". Keys must match placement.LabelPattern, as requirement labels
// do, so that jobs can be placed by them.
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, cli.Usagef("--labels: %q is not key=value", kv)
		}
		if !placement.LabelPattern.MatchString(k) {
			return nil, cli.Usagef("--labels: key %q %s", k, placement.LabelRule)
		}
		out[k] = v
	}
	return out, nil
}
