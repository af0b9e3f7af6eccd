package api

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stint-dev/stint/apitype"
)

// Limits bound what one request may ask of the server. They hold on every route that takes
// what they limit: a job spec is checked by one function (specToModel) whether it comes in
// through POST /v1/jobs, a batch, a DAG entry, a pipeline step, PUT or PATCH of a job, or a
// plan; run args the same whether a spec, a trigger, a webhook or a pipeline trigger gives
// them. A zero field takes its default (DefaultLimits). docs/limits.md lists every limit, its
// flag and the answer a request over it gets.
type Limits struct {
	// MaxBodyBytes caps a request body (413), except on the routes below.
	MaxBodyBytes int64
	// MaxBatchBodyBytes caps the bodies of POST /v1/jobs/batch and POST /v1/dags (at least
	// MaxBodyBytes).
	MaxBatchBodyBytes int64
	// MaxLogBodyBytes caps a worker's POST /v1/attempts/logs (at least MaxBodyBytes).
	MaxLogBodyBytes int64
	// MaxStreamBodyBytes caps the body of POST /v1/jobs/stream (at least MaxBodyBytes),
	// whose every line is at most MaxBodyBytes: past it the stream stops, what it
	// committed kept.
	MaxStreamBodyBytes int64

	// MaxSpecBytes caps the strings of one job spec together (command, shell, args, env,
	// names, tags, labels, keys...): a batch of 10,000 specs is 10,000 times this at most.
	MaxSpecBytes int
	// MaxCommandBytes caps a command's argv: each argument counts its length plus one, as
	// the kernel counts it.
	MaxCommandBytes int
	// MaxShellBytes caps a shell script.
	MaxShellBytes int
	// MaxArgsBytes caps a run's args (the JSON object jobs get in STINT_ARGS), from a spec,
	// a trigger, a webhook body or a pipeline.
	MaxArgsBytes int
	// MaxEnvBytes caps a job's env: each entry counts its key and value plus two.
	MaxEnvBytes int

	// MaxBatchJobs caps the entries of POST /v1/jobs/batch.
	MaxBatchJobs int
	// MaxDAGRuns caps the entries (runs) of POST /v1/dags.
	MaxDAGRuns int
	// MaxPageSize caps ?limit= on the routes that page (jobs, runs, pipeline runs).
	MaxPageSize int
	// MaxLogBytes caps the output stored for one attempt; chunks past it are dropped. It
	// should exceed the workers' own cap (10 MiB by default), which ends with a marker line.
	MaxLogBytes int64
}

// DefaultLimits are the limits a server runs with unless told otherwise.
func DefaultLimits() Limits {
	return Limits{
		MaxBodyBytes:       1 << 20,
		MaxBatchBodyBytes:  64 << 20,
		MaxLogBodyBytes:    8 << 20,
		MaxStreamBodyBytes: 1 << 30,
		MaxSpecBytes:       256 << 10,
		MaxCommandBytes:    64 << 10,
		MaxShellBytes:      64 << 10,
		MaxArgsBytes:       64 << 10,
		MaxEnvBytes:        64 << 10,
		MaxBatchJobs:       10000,
		MaxDAGRuns:         10000,
		MaxPageSize:        1000,
		MaxLogBytes:        16 << 20,
	}
}

// WithDefaults returns l with its zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	orDefault := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	orDefault64 := func(v *int64, def int64) {
		if *v <= 0 {
			*v = def
		}
	}
	orDefault64(&l.MaxBodyBytes, d.MaxBodyBytes)
	orDefault64(&l.MaxBatchBodyBytes, d.MaxBatchBodyBytes)
	orDefault64(&l.MaxLogBodyBytes, d.MaxLogBodyBytes)
	orDefault64(&l.MaxStreamBodyBytes, d.MaxStreamBodyBytes)
	l.MaxBatchBodyBytes = max(l.MaxBatchBodyBytes, l.MaxBodyBytes)
	l.MaxLogBodyBytes = max(l.MaxLogBodyBytes, l.MaxBodyBytes)
	l.MaxStreamBodyBytes = max(l.MaxStreamBodyBytes, l.MaxBodyBytes)
	orDefault(&l.MaxSpecBytes, d.MaxSpecBytes)
	orDefault(&l.MaxCommandBytes, d.MaxCommandBytes)
	orDefault(&l.MaxShellBytes, d.MaxShellBytes)
	orDefault(&l.MaxArgsBytes, d.MaxArgsBytes)
	orDefault(&l.MaxEnvBytes, d.MaxEnvBytes)
	orDefault(&l.MaxBatchJobs, d.MaxBatchJobs)
	orDefault(&l.MaxDAGRuns, d.MaxDAGRuns)
	orDefault(&l.MaxPageSize, d.MaxPageSize)
	orDefault64(&l.MaxLogBytes, d.MaxLogBytes)
	return l
}

// Fixed limits: rules of the data rather than of a deployment, so not configurable.
const (
	maxDirBytes     = 4096 // a job's working directory (PATH_MAX)
	maxTags         = 100  // tags of a job
	maxLabels       = 100  // labels a job requires or a worker offers
	maxLabelBytes   = 256  // a label's value; keys follow placement.LabelRule
	maxHandlers     = 1000 // handler kinds a worker serves
	maxHandlerBytes = 256  // a handler kind's name
	// Worker capacity at registration: a worker cannot offer more than a machine has by
	// orders of magnitude, so a typo (memory in bytes) or a hostile number cannot overflow
	// the placement arithmetic.
	maxWorkerCPU      = 100000
	maxWorkerMemoryMB = 1 << 30 // 1 PiB
	maxWorkerGPU      = 1024
	maxWorkerSlots    = 100000
	// heldBodyBytes is the body cap of a registration or a heartbeat, which lists the leases
	// the worker holds: room for apitype.MaxHeldLeases references of 128 bytes each (a run
	// id and a token take under 100 in JSON).
	heldBodyBytes = apitype.MaxHeldLeases * 128
)

// checkSizes records a field error for each part of spec over its limit, and for the whole.
func checkSizes(spec *apitype.JobSpec, lim *Limits, fe *fieldErrors) {
	before := len(fe.errs)
	cmd := 0
	for _, a := range spec.Command {
		cmd += len(a) + 1
	}
	if cmd > lim.MaxCommandBytes {
		fe.add("command", "must be at most %d bytes in all (each argument counts its length plus one), got %d", lim.MaxCommandBytes, cmd)
	}
	if len(spec.Shell) > lim.MaxShellBytes {
		fe.add("shell", "must be at most %d bytes, got %d", lim.MaxShellBytes, len(spec.Shell))
	}
	checkArgsSize(spec.Args, "args", lim, fe)
	env, secrets := envBytes(spec.Env), envBytes(spec.SecretEnv)
	switch {
	case env+secrets <= lim.MaxEnvBytes:
	case secrets == 0:
		fe.add("env", "must be at most %d bytes in all (each entry counts its key and value plus two), got %d", lim.MaxEnvBytes, env)
	default:
		fe.add("secret_env", "env and secret_env must be at most %d bytes together (each entry counts its key and value plus two), got %d", lim.MaxEnvBytes, env+secrets)
	}
	if len(spec.Dir) > maxDirBytes {
		fe.add("dir", "must be at most %d bytes, got %d", maxDirBytes, len(spec.Dir))
	}
	if len(spec.Tags) > maxTags {
		fe.add("tags", "must list at most %d tags, got %d", maxTags, len(spec.Tags))
	}
	if r := spec.Requirements; r != nil {
		checkLabels(r.Labels, "requirements.labels", fe)
	}
	if total := specBytes(spec); total > lim.MaxSpecBytes && len(fe.errs) == before { // else a part said it
		fe.addWhole("the job spec's strings must be at most %d bytes together, got %d", lim.MaxSpecBytes, total)
	}
}

// checkArgsSize records an error when args are longer than the limit.
func checkArgsSize(args json.RawMessage, field string, lim *Limits, fe *fieldErrors) {
	if len(args) > lim.MaxArgsBytes {
		fe.add(field, "must be at most %d bytes, got %d", lim.MaxArgsBytes, len(args))
	}
}

// checkLabels checks the number and the size of labels.
func checkLabels(labels map[string]string, field string, fe *fieldErrors) {
	if len(labels) > maxLabels {
		fe.add(field, "must hold at most %d labels, got %d", maxLabels, len(labels))
	}
	for _, k := range sortedKeys(labels) {
		if len(labels[k]) > maxLabelBytes {
			fe.add(mapPath(field, k), "must be at most %d bytes", maxLabelBytes)
		}
	}
}

// envBytes is the size of an env as the limits count it: each entry's key and value plus two.
func envBytes(env map[string]string) int {
	n := 0
	for k, v := range env {
		n += len(k) + len(v) + 2
	}
	return n
}

// specBytes is the length of a spec's strings together.
func specBytes(spec *apitype.JobSpec) int {
	n := len(spec.Name) + len(spec.Namespace) + len(spec.Shell) + len(spec.Handler) + len(spec.Args) +
		len(spec.Dir) + len(spec.Queue) + len(spec.IdempotencyKey)
	for _, a := range spec.Command {
		n += len(a) + 1
	}
	n += envBytes(spec.Env) + envBytes(spec.SecretEnv)
	for _, t := range spec.Tags {
		n += len(t)
	}
	if r := spec.Requirements; r != nil {
		for k, v := range r.Labels {
			n += len(k) + len(v)
		}
	}
	if s := spec.Schedule; s != nil {
		n += len(s.Cron) + len(s.Timezone) + len(s.Misfire)
	}
	if c := spec.Concurrency; c != nil {
		n += len(c.Policy) + len(c.Key)
	}
	for _, d := range spec.DependsOn {
		n += len(d.Run) + len(d.Ref) + len(d.Condition)
	}
	return n
}

// addWhole records an error about the whole of what the prefix names: "jobs[3]" in a batch,
// "runs.load" in a DAG, "body" for a single spec.
func (f *fieldErrors) addWhole(format string, args ...any) {
	field := strings.TrimSuffix(f.prefix, ".")
	if field == "" {
		field = "body"
	}
	f.errs = append(f.errs, apitype.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}
