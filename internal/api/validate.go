package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/cron"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/placement"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/secret"
)

// Limits of a job spec.
const (
	minPriority    = -1000
	maxPriority    = 1000
	maxAttempts    = 1000
	maxDisruptions = 100
	maxExitCode    = 255
	maxKeyLen      = 255 // idempotency keys
	defaultJitter  = 0.1
	defaultBackoff = 2.0 // retry multiplier
)

// namePattern is what job names, namespaces and queue names look like: the regular
// expression ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ (nameRule in words), matched by hand because
// every job of a stream or a batch is checked against it (a regexp costs a sixth of a job's
// validation).
var namePattern namePatternMatcher

type namePatternMatcher struct{}

// MatchString reports whether s is a valid name.
func (namePatternMatcher) MatchString(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

const nameRule = "must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"

// fieldErrors collects the bad fields of one request, each with its JSON path.
type fieldErrors struct {
	prefix string // prepended to every field: "jobs[3]." in a batch
	errs   []apitype.FieldError
}

func (f *fieldErrors) add(field, format string, args ...any) {
	f.errs = append(f.errs, apitype.FieldError{Field: f.prefix + field, Message: fmt.Sprintf(format, args...)})
}

// validJob is a job spec that passed validation, ready to submit.
type validJob struct {
	Job *model.Job
	Run *model.Run // nil when the job gets no run now (disabled)
	// Deps is the spec's depends_on, checked, in order. For POST /v1/jobs they are in
	// Run.DependsOn too; a DAG entry's refs are resolved by the DAG's handler.
	Deps []jobDep
}

// jobDep is a checked entry of a spec's depends_on: Run (an existing run's id) or, in a DAG
// entry only, Ref (another entry's name), with the condition (default succeeded).
type jobDep struct {
	Run, Ref  string
	Condition model.Condition
}

// depsMode says what a spec's depends_on may name.
type depsMode int

const (
	depsOfJob   depsMode = iota // POST /v1/jobs, its batch, POST /v1/plan: runs only
	depsOfEntry                 // an entry of POST /v1/dags: refs too, and the entry must run once
	depsOfStep                  // a step of PUT /v1/pipelines/{name}: refs only, run by the pipeline's triggers
)

// buildJob validates spec and turns it into a job with id, defaults and request hash filled,
// plus its first run (via scheduler.NewRun) unless the job is disabled or scheduled. now is the
// submission time. prefix names the spec within the request ("" for POST /v1/jobs,
// "jobs[3]." in a batch). It returns every bad field at once; with any, the job is nil.
// depends_on entries must name runs (refs exist only in DAG requests); whether those runs
// exist is for the caller to check (missingUpstream).
func buildJob(spec *apitype.JobSpec, prefix string, now time.Time, lim *Limits, sl sealing) (*validJob, []apitype.FieldError) {
	return buildJobIn(spec, prefix, now, depsOfJob, lim, sl)
}

// buildJobIn is buildJob with the dependency rules of mode.
func buildJobIn(spec *apitype.JobSpec, prefix string, now time.Time, mode depsMode, lim *Limits, sl sealing) (*validJob, []apitype.FieldError) {
	fe := &fieldErrors{prefix: prefix}
	deps := checkDeps(spec, mode, fe)
	vj, errs := buildDefinition(spec, prefix, now, lim, sl)
	if errs = append(errs, fe.errs...); len(errs) > 0 {
		return nil, errs
	}
	if mode == depsOfStep { // a definition: the pipeline's triggers make its runs
		vj.Deps = deps
		return vj, nil
	}
	if vj.Job.Spec.Schedule != nil || !vj.Job.Enabled {
		return vj, nil
	}
	job := vj.Job
	if job.Spec.Concurrency.Key != "" { // the first run has the job's own args
		if _, err := scheduler.RenderKey(job, nil); err != nil {
			return nil, []apitype.FieldError{{Field: prefix + "concurrency.key", Message: err.Error() + " (over the job's args)"}}
		}
	}
	var due time.Time
	switch {
	case spec.RunAt != nil:
		due = *spec.RunAt
	case spec.Delay != nil:
		due = now.Add(spec.Delay.Std())
	}
	vj.Run = scheduler.NewRun(id.New(now), job, model.TriggerSubmit, nil, due, now)
	if len(deps) > 0 && vj.Run.Concurrency != nil {
		fe.add("depends_on", "a run with dependencies cannot have a concurrency or rate limit")
		fe.add("concurrency", "a job with depends_on cannot have a concurrency or rate limit")
		return nil, fe.errs
	}
	vj.Deps = deps
	if mode == depsOfJob {
		for _, d := range deps {
			vj.Run.DependsOn = append(vj.Run.DependsOn, model.Dependency{RunID: d.Run, Condition: d.Condition})
		}
	}
	return vj, nil
}

// checkDeps checks a spec's depends_on under the rules of mode, recording bad fields in fe,
// and returns its entries with their defaults. It is linear in the entries: an entry that
// repeats an upstream is found through a map.
func checkDeps(spec *apitype.JobSpec, mode depsMode, fe *fieldErrors) []jobDep {
	if mode == depsOfStep && spec.Concurrency != nil {
		fe.add("concurrency", "a pipeline step cannot have a concurrency or rate limit: its runs wait on each other")
	}
	switch {
	case mode == depsOfStep && spec.Schedule != nil:
		fe.add("schedule", "a pipeline step runs when the pipeline is triggered: give the schedule to the pipeline")
	case mode == depsOfStep && spec.Enabled != nil && !*spec.Enabled:
		fe.add("enabled", "a pipeline step must run: it cannot be disabled (disable the pipeline instead)")
	case mode == depsOfEntry && spec.Schedule != nil:
		fe.add("schedule", "a DAG entry runs once, when its dependencies allow: it cannot have a schedule")
	case mode == depsOfEntry && spec.Enabled != nil && !*spec.Enabled:
		fe.add("enabled", "a DAG entry must run: it cannot be disabled")
	case len(spec.DependsOn) == 0:
	case spec.Schedule != nil:
		fe.add("depends_on", "applies to a job's first run, and a job with a schedule has none")
		fe.add("schedule", "a job with depends_on cannot have a schedule")
	case spec.Enabled != nil && !*spec.Enabled:
		fe.add("depends_on", "applies to a job's first run, and a disabled job has none")
		fe.add("enabled", "a job with depends_on cannot be disabled")
	}
	if len(spec.DependsOn) == 0 {
		return nil
	}
	out := make([]jobDep, len(spec.DependsOn))
	seen := make(map[jobDep]int, len(spec.DependsOn)) // upstream (condition left empty) -> index
	for i, d := range spec.DependsOn {
		path := func(field string) string { return fmt.Sprintf("depends_on[%d]%s", i, field) }
		run, ref := strings.TrimSpace(d.Run), d.Ref
		if strings.TrimSpace(ref) == "" {
			ref = ""
		}
		upField := ".run"
		switch {
		case mode == depsOfJob && d.Ref != "":
			fe.add(path(".ref"), "refs name entries of a DAG request (POST /v1/dags); here give run, the id of an existing run")
			continue
		case mode == depsOfJob && run == "":
			fe.add(path(".run"), "is required: the id of the run to wait for")
			continue
		case mode == depsOfStep && d.Run != "":
			fe.add(path(".run"), "a pipeline step waits for other steps of its pipeline: give ref, the name of a step")
			continue
		case mode == depsOfStep && ref == "":
			fe.add(path(".ref"), "is required: the name of the step to wait for")
			continue
		case mode == depsOfEntry && run != "" && ref != "":
			fe.add(path(""), "give one of ref (an entry of this request) and run (an existing run's id), not both")
			continue
		case mode == depsOfEntry && run == "" && ref == "":
			fe.add(path(""), "needs ref (an entry of this request) or run (an existing run's id)")
			continue
		case ref != "":
			upField = ".ref"
		}
		if run != "" && (run != d.Run || len(run) > maxKeyLen || hasControl(run)) {
			fe.add(path(".run"), "is not a run id")
			continue
		}
		cond := model.Condition(d.Condition)
		if cond == "" {
			cond = model.CondSucceeded
		} else if !cond.Valid() {
			fe.add(path(".condition"), "must be one of succeeded, failed, finished")
		}
		up := jobDep{Run: run, Ref: ref}
		if j, dup := seen[up]; dup {
			fe.add(path(upField), "repeats depends_on[%d]: name each upstream run once", j)
			continue
		}
		seen[up] = i
		out[i] = jobDep{Run: run, Ref: ref, Condition: cond}
	}
	return out
}

// buildDefinition is buildJob without the first run: the job alone, with its next fire
// when it has a schedule (PUT /v1/jobs/{name} manages definitions). sl seals its secret env.
func buildDefinition(spec *apitype.JobSpec, prefix string, now time.Time, lim *Limits, sl sealing) (*validJob, []apitype.FieldError) {
	fe := &fieldErrors{prefix: prefix}
	ms := specToModel(spec, fe, lim, sl)

	ns := spec.Namespace
	if ns == "" {
		ns = model.DefaultNamespace
	} else if !namePattern.MatchString(ns) {
		fe.add("namespace", nameRule)
	}
	if spec.Name != "" && !namePattern.MatchString(spec.Name) {
		fe.add("name", nameRule)
	}
	if len(spec.IdempotencyKey) > maxKeyLen {
		fe.add("idempotency_key", "must be at most %d bytes", maxKeyLen)
	} else if hasControl(spec.IdempotencyKey) {
		fe.add("idempotency_key", "must not contain control characters")
	}
	if spec.RunAt != nil && spec.Delay != nil {
		fe.add("run_at", "run_at and delay are exclusive: give at most one")
	}
	if spec.Delay != nil && spec.Delay.Std() < 0 {
		fe.add("delay", "must not be negative")
	}
	if spec.Schedule != nil && (spec.RunAt != nil || spec.Delay != nil) {
		fe.add("schedule", "a scheduled job fires on its schedule: run_at and delay do not apply")
	}
	if len(fe.errs) > 0 {
		return nil, fe.errs
	}

	enabled := spec.Enabled == nil || *spec.Enabled
	var hash string
	if spec.IdempotencyKey != "" { // only a replay of the key compares it
		hash = requestHash(spec, sl.keys)
	}
	job := &model.Job{
		ID:             id.New(now),
		Namespace:      ns,
		Name:           spec.Name,
		Spec:           ms,
		Enabled:        enabled,
		IdempotencyKey: spec.IdempotencyKey,
		RequestHash:    hash,
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	if job.Name == "" {
		job.Name = job.ID
	}
	// Cron fires run with the job's own args: they must render the key.
	if ms.Concurrency.Key != "" && ms.Schedule != nil {
		if _, err := scheduler.RenderKey(job, nil); err != nil {
			return nil, []apitype.FieldError{{Field: prefix + "concurrency.key", Message: err.Error() + " (over the job's args)"}}
		}
	}
	if ms.Schedule != nil {
		job.NextFireAt = engine.NextFireAt(job, now)
	}
	return &validJob{Job: job}, nil
}

// specToModel checks the parts of a spec that make up model.JobSpec (what to run, where,
// and how to treat failure) and their sizes under lim, records bad fields in fe, and returns
// the spec with defaults applied. It is the one check of a job spec: every route that takes
// one (POST /v1/jobs, batches, DAG entries, pipeline steps, PUT and PATCH of a job, plans)
// comes through it, PATCH with the job's spec with the patch applied. Its secret env comes
// out sealed by sl (sealSecretEnv).
func specToModel(spec *apitype.JobSpec, fe *fieldErrors, lim *Limits, sl sealing) model.JobSpec {
	ms := model.JobSpec{
		Command: spec.Command,
		Shell:   spec.Shell,
		Handler: spec.Handler,
		Env:     spec.Env,
		Dir:     spec.Dir,
		Queue:   spec.Queue,
		Tags:    spec.Tags,
	}
	checkSizes(spec, lim, fe)

	// What to run: exactly one of command, shell and handler.
	given := make([]string, 0, 3)
	if spec.Command != nil {
		given = append(given, "command")
	}
	if spec.Shell != "" {
		given = append(given, "shell")
	}
	if spec.Handler != "" {
		given = append(given, "handler")
	}
	switch {
	case len(given) == 0:
		fe.add("command", "one of command, shell or handler is required")
	case len(given) > 1:
		for _, f := range given {
			fe.add(f, "command, shell and handler are exclusive: got %s", strings.Join(given, " and "))
		}
	}
	if spec.Command != nil {
		if len(spec.Command) == 0 {
			fe.add("command", "must not be empty")
		} else if spec.Command[0] == "" {
			fe.add("command[0]", "must not be empty: it is the program to run")
		}
		for i, a := range spec.Command {
			if strings.IndexByte(a, 0) >= 0 {
				fe.add(fmt.Sprintf("command[%d]", i), "must not contain a NUL byte")
			}
		}
	}
	if strings.IndexByte(spec.Shell, 0) >= 0 {
		fe.add("shell", "must not contain a NUL byte")
	}
	if spec.Handler != "" && (len(spec.Handler) > 256 || strings.IndexFunc(spec.Handler, unicode.IsSpace) >= 0 || hasControl(spec.Handler)) {
		fe.add("handler", "must be at most 256 characters without spaces or control characters")
	}
	if strings.IndexByte(spec.Dir, 0) >= 0 {
		fe.add("dir", "must not contain a NUL byte")
	}

	// Parameters.
	if args := bytes.TrimSpace(spec.Args); len(args) > 0 && !bytes.Equal(args, []byte("null")) {
		if args[0] != '{' {
			fe.add("args", "must be a JSON object")
		} else {
			ms.Args = spec.Args
		}
	}
	for _, k := range sortedKeys(spec.Env) {
		switch {
		case k == "":
			fe.add("env", "keys must not be empty")
		case strings.ContainsAny(k, "=\x00"):
			fe.add(mapPath("env", k), "key must not contain '=' or a NUL byte")
		case strings.IndexByte(spec.Env[k], 0) >= 0:
			fe.add(mapPath("env", k), "must not contain a NUL byte")
		}
	}
	ms.SecretEnv = sealSecretEnv(spec, fe, sl)

	// Placement.
	if ms.Queue == "" {
		ms.Queue = model.DefaultQueue
	} else if !namePattern.MatchString(ms.Queue) {
		fe.add("queue", nameRule)
	}
	if spec.Priority != nil {
		ms.Priority = *spec.Priority
		if ms.Priority < minPriority || ms.Priority > maxPriority {
			fe.add("priority", "must be between %d and %d", minPriority, maxPriority)
		}
	}
	if r := spec.Requirements; r != nil {
		ms.Requirements = model.Requirements{CPU: r.CPU, MemoryMB: r.MemoryMB, GPU: r.GPU, Labels: r.Labels}
		if r.CPU < 0 {
			fe.add("requirements.cpu", "must not be negative")
		}
		if r.MemoryMB < 0 {
			fe.add("requirements.memory_mb", "must not be negative")
		}
		if r.GPU < 0 {
			fe.add("requirements.gpu", "must not be negative")
		}
		for _, k := range sortedKeys(r.Labels) {
			if !placement.LabelPattern.MatchString(k) {
				fe.add("requirements.labels", "key %q: %s", k, placement.LabelRule)
			}
		}
	}
	if spec.Timeout != nil {
		ms.Timeout = spec.Timeout.Std()
		if ms.Timeout < 0 {
			fe.add("timeout", "must not be negative")
		}
	}
	ms.Retry = retryToModel(spec.Retry, fe)
	for i, t := range spec.Tags {
		if strings.TrimSpace(t) == "" {
			fe.add(fmt.Sprintf("tags[%d]", i), "must not be empty")
		}
	}

	ms.Schedule = scheduleToModel(spec.Schedule, fe)
	ms.Concurrency = concurrencyToModel(spec.Concurrency, fe)
	ms.Alerts = jobAlertsToModel(spec.Alerts, fe)

	return ms
}

// maxAlertWait bounds the durations of alert thresholds.
const maxAlertWait = 7 * 24 * time.Hour

// jobAlertsToModel checks a job's alert thresholds; all zero (or absent) is none.
func jobAlertsToModel(a *apitype.JobAlerts, fe *fieldErrors) *model.JobAlerts {
	if a == nil {
		return nil
	}
	out := model.JobAlerts{Off: a.Off, ConsecutiveFailures: a.ConsecutiveFailures}
	if n := a.ConsecutiveFailures; n < 0 || n > alerting.MaxConsecutiveFailures {
		fe.add("alerts.consecutive_failures", "must be between 1 and %d (0: the server's default)", alerting.MaxConsecutiveFailures)
	}
	if a.LateAfter != nil {
		out.LateAfter = a.LateAfter.Std()
		if out.LateAfter < 0 || out.LateAfter > maxAlertWait {
			fe.add("alerts.late_after", "must be between 0 and %s", maxAlertWait)
		}
	}
	if a.MaxDuration != nil {
		out.MaxDuration = a.MaxDuration.Std()
		if out.MaxDuration != 0 && (out.MaxDuration < alerting.MinMaxDuration || out.MaxDuration > 365*24*time.Hour) {
			fe.add("alerts.max_duration", "must be at least %s (0: the server's default)", alerting.MinMaxDuration)
		}
	}
	if out == (model.JobAlerts{}) {
		return nil
	}
	return &out
}

// jobAlertsToAPI is a job's alert thresholds in their wire form.
func jobAlertsToAPI(a *model.JobAlerts) *apitype.JobAlerts {
	if a == nil {
		return nil
	}
	out := &apitype.JobAlerts{Off: a.Off, ConsecutiveFailures: a.ConsecutiveFailures}
	if a.LateAfter != 0 {
		d := apitype.Duration(a.LateAfter)
		out.LateAfter = &d
	}
	if a.MaxDuration != 0 {
		d := apitype.Duration(a.MaxDuration)
		out.MaxDuration = &d
	}
	return out
}

// Limits of schedules and concurrency.
const (
	maxMisfireLimit = 10000
	maxConcurrency  = 100000
	maxRate         = 1000000
	maxRatePer      = 7 * 24 * time.Hour
)

// scheduleToModel checks a schedule: the expression and zone parse (the cron package says
// what is wrong), the misfire policy is known.
func scheduleToModel(s *apitype.Schedule, fe *fieldErrors) *model.Schedule {
	if s == nil {
		return nil
	}
	out := &model.Schedule{Cron: strings.TrimSpace(s.Cron), Timezone: s.Timezone, Misfire: s.Misfire,
		MisfireLimit: s.MisfireLimit, Paused: s.Paused}
	if _, err := cron.Parse(out.Cron, out.Timezone); err != nil {
		var ce *cron.Error
		if errors.As(err, &ce) {
			fe.add("schedule."+ce.Field, "%s", ce.Message)
		} else {
			fe.add("schedule.cron", "%s", err.Error())
		}
	}
	switch s.Misfire {
	case "", model.MisfireSkip, model.MisfireRunOnce, model.MisfireRunAll:
	default:
		fe.add("schedule.misfire", "must be one of skip, run_once, run_all")
	}
	if s.MisfireLimit < 0 || s.MisfireLimit > maxMisfireLimit {
		fe.add("schedule.misfire_limit", "must be between 1 and %d (0: the default, 100)", maxMisfireLimit)
	}
	return out
}

// concurrencyToModel checks a concurrency policy.
func concurrencyToModel(c *apitype.Concurrency, fe *fieldErrors) model.Concurrency {
	if c == nil {
		return model.Concurrency{}
	}
	switch model.ConcurrencyPolicy(c.Policy) {
	case "", model.ConcurrencyAllow, model.ConcurrencyForbid, model.ConcurrencyQueue, model.ConcurrencyReplace:
	default:
		fe.add("concurrency.policy", "must be one of allow, forbid, queue, replace")
	}
	if c.Max < 0 || c.Max > maxConcurrency {
		fe.add("concurrency.max", "must be between 0 and %d (0: unlimited for allow, 1 for the others)", maxConcurrency)
	}
	if c.Key != "" {
		if _, err := scheduler.ParseKeyTemplate(c.Key); err != nil {
			fe.add("concurrency.key", "%s", err.Error())
		}
	}
	out := model.Concurrency{Policy: c.Policy, Max: c.Max, Key: c.Key}
	if r := c.Rate; r != nil {
		out.Rate = &model.RateLimit{Rate: r.Rate, Per: r.Per.Std()}
		checkRate(r, "concurrency.rate", fe)
	}
	return out
}

// checkRate checks a rate limit; field names it ("concurrency.rate", "rate_limit").
func checkRate(r *apitype.RateLimit, field string, fe *fieldErrors) {
	if r.Rate < 1 || r.Rate > maxRate {
		fe.add(field+".rate", "must be between 1 and %d", maxRate)
	}
	if r.Per.Std() <= 0 || r.Per.Std() > maxRatePer {
		fe.add(field+".per", "must be a duration above 0 and at most %s", maxRatePer)
	}
}

// retryToModel checks a retry policy and applies its defaults.
func retryToModel(r *apitype.RetryPolicy, fe *fieldErrors) model.RetryPolicy {
	disruptions := scheduler.DefaultMaxDisruptions
	out := model.RetryPolicy{MaxAttempts: 1, Multiplier: defaultBackoff, MaxDisruptions: &disruptions}
	if r == nil {
		return out
	}
	if r.MaxAttempts != 0 {
		out.MaxAttempts = r.MaxAttempts
		if r.MaxAttempts < 1 || r.MaxAttempts > maxAttempts {
			fe.add("retry.max_attempts", "must be between 1 and %d", maxAttempts)
		}
	}
	if r.InitialDelay != nil {
		out.InitialDelay = r.InitialDelay.Std()
		if out.InitialDelay < 0 {
			fe.add("retry.initial_delay", "must not be negative")
		}
	}
	if r.MaxDelay != nil {
		out.MaxDelay = r.MaxDelay.Std()
		if out.MaxDelay < 0 {
			fe.add("retry.max_delay", "must not be negative")
		} else if out.MaxDelay < out.InitialDelay {
			fe.add("retry.max_delay", "must not be less than initial_delay")
		}
	}
	if r.Multiplier != 0 {
		out.Multiplier = r.Multiplier
		if r.Multiplier < 1 {
			fe.add("retry.multiplier", "must be at least 1")
		}
	}
	switch {
	case r.Jitter != nil:
		out.Jitter = *r.Jitter
		if out.Jitter < 0 || out.Jitter > 1 {
			fe.add("retry.jitter", "must be between 0 and 1")
		}
	case out.MaxAttempts > 1:
		out.Jitter = defaultJitter
	}
	if r.MaxDisruptions != nil {
		disruptions = *r.MaxDisruptions
		if disruptions < 0 || disruptions > maxDisruptions {
			fe.add("retry.max_disruptions", "must be between 0 and %d (attempts lost to a dead worker or server retried without counting against max_attempts)", maxDisruptions)
		}
	}
	out.FinalExitCodes = checkExitCodes(r.FinalExitCodes, "retry.final_exit_codes", fe)
	out.RetryExitCodes = checkExitCodes(r.RetryExitCodes, "retry.retry_exit_codes", fe)
	return out
}

func checkExitCodes(codes []int, field string, fe *fieldErrors) []int {
	for i, c := range codes {
		if c < 0 || c > maxExitCode {
			fe.add(fmt.Sprintf("%s[%d]", field, i), "must be an exit code between 0 and %d", maxExitCode)
		}
	}
	return codes
}

// specFromJob is the inverse of buildJob for the fields a job keeps: PATCH applies the patch
// to it and validates the result like a new spec.
func specFromJob(j *model.Job) *apitype.JobSpec {
	s := j.Spec
	enabled := j.Enabled
	prio := s.Priority
	spec := &apitype.JobSpec{
		Name:      j.Name,
		Namespace: j.Namespace,
		Command:   s.Command,
		Shell:     s.Shell,
		Handler:   s.Handler,
		Args:      s.Args,
		Env:       s.Env,
		SecretEnv: maskSecrets(s.SecretEnv),
		Dir:       s.Dir,
		Queue:     s.Queue,
		Priority:  &prio,
		Requirements: &apitype.Requirements{
			CPU: s.Requirements.CPU, MemoryMB: s.Requirements.MemoryMB, GPU: s.Requirements.GPU, Labels: s.Requirements.Labels,
		},
		Retry:   retryToAPI(s.Retry),
		Enabled: &enabled,
		Tags:    s.Tags,
	}
	if s.Timeout != 0 {
		d := apitype.Duration(s.Timeout)
		spec.Timeout = &d
	}
	spec.Schedule = scheduleToAPI(s.Schedule)
	spec.Concurrency = concurrencyToAPI(s.Concurrency)
	spec.Alerts = jobAlertsToAPI(s.Alerts)
	return spec
}

// applyPatch writes the fields a patch sets over spec.
func applyPatch(spec *apitype.JobSpec, p *apitype.JobPatch) {
	if p.Command != nil || p.Shell != nil || p.Handler != nil {
		spec.Command, spec.Shell, spec.Handler = p.Command, "", ""
		if p.Shell != nil {
			spec.Shell = *p.Shell
		}
		if p.Handler != nil {
			spec.Handler = *p.Handler
		}
	}
	if p.Dir != nil {
		spec.Dir = *p.Dir
	}
	if p.Enabled != nil {
		spec.Enabled = p.Enabled
	}
	if p.Priority != nil {
		spec.Priority = p.Priority
	}
	if p.Queue != nil {
		spec.Queue = *p.Queue
		if spec.Queue == "" {
			spec.Queue = model.DefaultQueue
		}
	}
	if p.Timeout != nil {
		spec.Timeout = p.Timeout
	}
	if p.Retry != nil {
		spec.Retry = p.Retry
	}
	if p.Schedule != nil {
		spec.Schedule = p.Schedule
	}
	if p.Concurrency != nil {
		spec.Concurrency = p.Concurrency
	}
	if p.Tags != nil {
		spec.Tags = p.Tags
	}
	if p.Env != nil {
		spec.Env = p.Env
	}
	if p.SecretEnv != nil {
		spec.SecretEnv = p.SecretEnv
	}
	if p.Args != nil {
		spec.Args = p.Args
	}
	if p.Requirements != nil {
		spec.Requirements = p.Requirements
	}
	if p.Alerts != nil {
		spec.Alerts = p.Alerts
	}
}

// requestHash is the SHA-256 of the canonical form of a spec: its JSON with object keys
// sorted (args included), times in UTC, secret values replaced by their keyed digests. Two
// bodies that mean the same request hash the same, whatever their key order or spacing.
func requestHash(spec *apitype.JobSpec, keys *secret.Keys) string {
	c := *spec
	c.Args = canonicalJSON(spec.Args)
	c.SecretEnv = secretDigests(keys, spec.SecretEnv)
	if spec.RunAt != nil {
		t := spec.RunAt.UTC()
		c.RunAt = &t
	}
	b, err := json.Marshal(&c)
	if err != nil { // cannot happen: every field marshals; hash what we have
		b = []byte(fmt.Sprintf("%#v", c))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// canonicalJSON rewrites a JSON value with sorted object keys and no insignificant space,
// keeping numbers exactly as written.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// mapPath names the entry key of the object at path: labels.gpu, env["A=B"].
func mapPath(path, key string) string {
	if isIdent(key) {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9' {
			continue
		}
		return false
	}
	return true
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}
