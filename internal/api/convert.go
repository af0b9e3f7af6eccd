package api

import (
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
)

// jobToAPI turns a job into its wire form; lastRun may be nil. Times are UTC.
func jobToAPI(j *model.Job, lastRun *model.Run) *apitype.Job {
	s := j.Spec
	out := &apitype.Job{
		ID:        j.ID,
		Namespace: j.Namespace,
		Name:      j.Name,
		Command:   s.Command,
		Shell:     s.Shell,
		Handler:   s.Handler,
		Args:      s.Args,
		Env:       s.Env,
		SecretEnv: maskSecrets(s.SecretEnv),
		Dir:       s.Dir,
		Queue:     s.Queue,
		Priority:  s.Priority,
		Requirements: apitype.Requirements{
			CPU: s.Requirements.CPU, MemoryMB: s.Requirements.MemoryMB, GPU: s.Requirements.GPU, Labels: s.Requirements.Labels,
		},
		Retry:          *retryToAPI(s.Retry),
		Concurrency:    apitype.Concurrency{Policy: s.Concurrency.Policy},
		Tags:           s.Tags,
		Enabled:        j.Enabled,
		IdempotencyKey: j.IdempotencyKey,
		CreatedAt:      j.CreatedAt.UTC(),
		UpdatedAt:      j.UpdatedAt.UTC(),
	}
	if c := concurrencyToAPI(s.Concurrency); c != nil {
		out.Concurrency = *c
	}
	if out.Concurrency.Policy == "" {
		out.Concurrency.Policy = "allow"
	}
	if s.Timeout > 0 {
		d := apitype.Duration(s.Timeout)
		out.Timeout = &d
	}
	out.Schedule = scheduleToAPI(s.Schedule)
	out.Alerts = jobAlertsToAPI(s.Alerts)
	for _, t := range engine.NextFireTimes(j, nextFireCount) {
		out.NextFireTimes = append(out.NextFireTimes, t.UTC())
		out.NextFireTimesLocal = append(out.NextFireTimesLocal, t)
	}
	if lastRun != nil {
		out.LastRun = runToAPI(lastRun)
	}
	if d := s.DAG; d != nil {
		out.DAG = &apitype.DAGRef{ID: d.ID, Entry: d.Entry}
	}
	return out
}

// retryToAPI turns a retry policy into its wire form.
func retryToAPI(p model.RetryPolicy) *apitype.RetryPolicy {
	maxDisruptions := scheduler.MaxDisruptions(p)
	out := &apitype.RetryPolicy{
		MaxAttempts:    p.MaxAttempts,
		MaxDisruptions: &maxDisruptions,
		Multiplier:     p.Multiplier,
		FinalExitCodes: p.FinalExitCodes,
		RetryExitCodes: p.RetryExitCodes,
	}
	if p.InitialDelay != 0 {
		d := apitype.Duration(p.InitialDelay)
		out.InitialDelay = &d
	}
	if p.MaxDelay != 0 {
		d := apitype.Duration(p.MaxDelay)
		out.MaxDelay = &d
	}
	jitter := p.Jitter
	out.Jitter = &jitter
	return out
}

// runToAPI turns a run into its wire form, with its attempts when the run carries them.
func runToAPI(r *model.Run) *apitype.Run {
	out := &apitype.Run{
		ID:              r.ID,
		JobID:           r.JobID,
		JobName:         r.JobName,
		Namespace:       r.Namespace,
		Status:          string(r.Status),
		PendingCode:     string(r.PendingCode),
		PendingReason:   r.PendingReason,
		Queue:           r.Queue,
		Priority:        r.Priority,
		Trigger:         string(r.Trigger),
		Args:            r.Args,
		ScheduledFor:    r.ScheduledFor.UTC(),
		Instant:         utcPtr(r.Instant),
		CreatedAt:       r.CreatedAt.UTC(),
		StartedAt:       utcPtr(r.StartedAt),
		FinishedAt:      utcPtr(r.FinishedAt),
		Attempt:         r.Attempt,
		MaxAttempts:     r.MaxAttempts,
		Disruptions:     r.Disruptions,
		IdempotencyKey:  r.IdempotencyKey,
		CancelRequested: r.CancelRequested,
		Error:           r.Error,
		WorkerID:        r.WorkerID,
	}
	if len(r.DependsOn) > 0 {
		out.DependsOn = make([]apitype.Dependency, len(r.DependsOn))
		for i, d := range r.DependsOn {
			out.DependsOn[i] = apitype.Dependency{Run: d.RunID, Condition: string(d.Condition)}
		}
	}
	if len(r.Attempts) > 0 {
		out.Attempts = make([]apitype.Attempt, len(r.Attempts))
		for i, at := range r.Attempts {
			out.Attempts[i] = apitype.Attempt{
				N:          at.N,
				WorkerID:   at.WorkerID,
				Status:     string(at.Status),
				ExitCode:   at.ExitCode,
				Error:      at.Error,
				StartedAt:  at.StartedAt.UTC(),
				FinishedAt: utcPtr(at.FinishedAt),
			}
		}
	}
	return out
}

// runsToAPI converts a list of runs; the answer is never null.
func runsToAPI(rs []*model.Run) []*apitype.Run {
	out := make([]*apitype.Run, len(rs))
	for i, r := range rs {
		out[i] = runToAPI(r)
	}
	return out
}

// queueToAPI turns a queue into its wire form; depth has every run status that is not final,
// zero or not.
func queueToAPI(q *model.Queue) *apitype.Queue {
	out := &apitype.Queue{
		Name:           q.Name,
		Priority:       q.Priority,
		MaxConcurrency: q.MaxConcurrency,
		Paused:         q.Paused,
		Depth:          make(map[string]int, len(model.RunStatuses)),
	}
	if r := q.RateLimit; r != nil {
		out.RateLimit = &apitype.RateLimit{Rate: r.Rate, Per: apitype.Duration(r.Per)}
	}
	if a := q.Alerts; a != nil {
		out.Alerts = &apitype.QueueAlerts{Off: a.Off, MaxBacklog: a.MaxBacklog}
		if a.MaxAge != 0 {
			d := apitype.Duration(a.MaxAge)
			out.Alerts.MaxAge = &d
		}
	}
	for _, s := range model.RunStatuses {
		if !s.Final() {
			out.Depth[string(s)] = 0
		}
	}
	for s, n := range q.Depth {
		out.Depth[string(s)] = n
	}
	return out
}

// workerToAPI turns a worker into its wire form.
func workerToAPI(w *model.Worker) *apitype.Worker {
	return &apitype.Worker{
		ID:            w.ID,
		Labels:        w.Labels,
		Capacity:      apitype.Capacity(w.Capacity),
		Used:          apitype.Capacity(w.Used),
		Running:       w.Running,
		State:         string(w.State),
		RegisteredAt:  w.RegisteredAt.UTC(),
		LastHeartbeat: w.LastHeartbeat.UTC(),
	}
}

// leaseToAPI turns a lease into its wire form.
func leaseToAPI(l *model.Lease) apitype.Lease {
	out := apitype.Lease{
		RunID:     l.Run.ID,
		JobID:     l.Run.JobID,
		JobName:   l.Run.JobName,
		Attempt:   l.Run.Attempt,
		Token:     l.Token,
		ExpiresAt: l.ExpiresAt.UTC(),
		Command:   l.Spec.Command,
		Shell:     l.Spec.Shell,
		Handler:   l.Spec.Handler,
		Args:      l.Run.Args,
		Env:       l.Spec.Env,
		Dir:       l.Spec.Dir,
	}
	if l.Spec.Timeout > 0 {
		d := apitype.Duration(l.Spec.Timeout)
		out.Timeout = &d
	}
	if r := l.Run.Requirements; r.CPU > 0 || r.MemoryMB > 0 || r.GPU > 0 || len(r.Labels) > 0 {
		out.Requirements = &apitype.Requirements{CPU: r.CPU, MemoryMB: r.MemoryMB, GPU: r.GPU, Labels: r.Labels}
	}
	return out
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nextFireCount is how many next fire times a job's answer lists.
const nextFireCount = 5

func scheduleToAPI(s *model.Schedule) *apitype.Schedule {
	if s == nil {
		return nil
	}
	return &apitype.Schedule{Cron: s.Cron, Timezone: s.Timezone, Misfire: s.Misfire, MisfireLimit: s.MisfireLimit, Paused: s.Paused}
}

// concurrencyToAPI is a job's concurrency policy on the wire; nil when it sets none.
func concurrencyToAPI(c model.Concurrency) *apitype.Concurrency {
	if c.Policy == "" && c.Max == 0 && c.Key == "" && c.Rate == nil {
		return nil
	}
	out := &apitype.Concurrency{Policy: c.Policy, Max: c.Max, Key: c.Key}
	if c.Rate != nil {
		out.Rate = &apitype.RateLimit{Rate: c.Rate.Rate, Per: apitype.Duration(c.Rate.Per)}
	}
	return out
}
