package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/cron"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// client is the users: they submit one-off jobs (delayed or not, with retry policies,
// idempotency keys, concurrency limits, dependencies), cron jobs in the run's time zone,
// manual triggers, cancels, manual retries, queue changes and deletions, at random moments
// with long quiet spells between bursts. A request that gets no answer may be sent again
// later, as a user would (with its idempotency key, if it had one).
type client struct {
	s        *sim
	requests int       // requests sent
	jobs     []*simJob // every job it sent, answered or not, in order
	byID     map[string]*simJob
	runs     []string  // runs it was told of (created, or found by an idempotency key)
	keyed    []*simJob // jobs sent with an idempotency key, to send again
	again    []*simJob // submissions that got no answer, to send again
	stopped  bool
	// firstCron is how many of the first requests create cron jobs: a seed's schedules
	// then fire for all of its run.
	firstCron int
}

// simJob is a job as the client sent it.
type simJob struct {
	job     *model.Job
	run     *model.Run // its first run (nil for a cron job)
	sent    time.Time
	known   bool      // the client got an answer creating (or finding) it
	deleted time.Time // when a deletion of it was sent (zero: never)
	cron    *cronSpec // its schedule's oracle, for a cron job
	sched   *cron.Schedule
}

// Queues the clients use; q2 is paused, resumed and limited now and then.
const queue2 = "q2"

// schedule plans the next request: mostly seconds apart, now and then after a quiet spell
// of minutes to hours, which moves the clock across the DST change and past many leases.
func (c *client) schedule() {
	if c.stopped {
		return
	}
	if c.requests == 0 {
		c.firstCron = 2 + c.s.rng.IntN(3)
	}
	d := c.s.exp(20 * time.Second)
	if c.s.chance(0.04) {
		d = c.s.between(5*time.Minute, time.Hour)
	}
	c.s.at(d, "client", c.act)
}

// act sends one request.
func (c *client) act() {
	if c.stopped {
		return
	}
	c.requests++
	c.s.forceCheck = true
	switch r := c.s.rng.Float64(); {
	case len(c.again) > 0 && r < 0.1:
		j := c.again[0]
		c.again = c.again[1:]
		c.resubmit(j, false)
	case r < 0.45:
		c.submit(c.newJob(false))
	case r < 0.52 || c.requests <= c.firstCron:
		if c.cronJobs() < 5 {
			c.submit(c.newJob(true))
		} else {
			c.submit(c.newJob(false))
		}
	case r < 0.58 && len(c.keyed) > 0:
		c.resubmit(c.keyed[c.s.rng.IntN(len(c.keyed))], c.s.chance(0.3))
	case r < 0.66:
		c.trigger()
	case r < 0.74:
		c.cancel()
	case r < 0.84:
		c.retry()
	case r < 0.89:
		c.updateQueue()
	case r < 0.91:
		c.deleteJob()
	default:
		c.submit(c.newJob(false))
	}
	if c.requests < c.s.cfg.Requests {
		c.schedule()
	}
}

func (c *client) cronJobs() int {
	n := 0
	for _, j := range c.jobs {
		if j.cron != nil {
			n++
		}
	}
	return n
}

func (c *client) pick(xs ...string) string { return xs[c.s.rng.IntN(len(xs))] }

// newJob builds a job as the API would from a spec (ids, defaults, next fire, first run).
func (c *client) newJob(isCron bool) *simJob {
	s := c.s
	now := s.clk.Now()
	spec := model.JobSpec{Handler: c.pick(handlers...), Queue: model.DefaultQueue}
	if s.chance(0.25) {
		spec.Queue = queue2
	}
	if s.chance(0.3) {
		spec.Priority = []int{5, 10}[s.rng.IntN(2)]
	}
	if s.chance(0.3) {
		spec.Requirements = model.Requirements{CPU: []float64{0.5, 1, 2}[s.rng.IntN(3)], MemoryMB: []int64{0, 512, 2048}[s.rng.IntN(3)]}
	}
	if s.chance(0.08) {
		spec.Requirements.GPU = 1
	}
	if s.chance(0.3) {
		spec.Timeout = s.between(20*time.Second, 3*time.Minute)
	}
	spec.Retry = model.RetryPolicy{MaxAttempts: 1 + s.rng.IntN(4)}
	if s.chance(0.5) {
		spec.Retry.InitialDelay = []time.Duration{time.Second, 10 * time.Second, time.Minute}[s.rng.IntN(3)]
		spec.Retry.Multiplier, spec.Retry.MaxDelay = 2, 5*time.Minute
		if s.chance(0.5) {
			spec.Retry.Jitter = 0.5
		}
	}
	if s.chance(0.3) {
		spec.Retry.FinalExitCodes = []int{3}
	}
	if s.chance(0.15) {
		spec.Retry.RetryExitCodes = []int{4}
	}
	if s.chance(0.4) {
		spec.Retry.MaxDisruptions = intp(s.rng.IntN(3))
	}
	if s.chance(0.35) {
		spec.Concurrency = model.Concurrency{
			Policy: c.pick(string(model.ConcurrencyAllow), string(model.ConcurrencyForbid), string(model.ConcurrencyQueue), string(model.ConcurrencyReplace)),
			Max:    1 + s.rng.IntN(2),
		}
		if s.chance(0.5) {
			// A key shared by the jobs that render it: its limit is the same for all.
			spec.Concurrency.Key, spec.Concurrency.Max = "c-{{.c}}", 2
			spec.Args = json.RawMessage(fmt.Sprintf(`{"c":%q}`, c.pick("x", "y")))
		}
	}
	jobID := s.newID("j")
	sj := &simJob{sent: now}
	sj.job = &model.Job{ID: jobID, Namespace: model.DefaultNamespace, Name: jobID, Spec: spec, Enabled: true, CreatedAt: now, UpdatedAt: now}
	if isCron {
		cs := cronSpecs[s.rng.IntN(len(cronSpecs))]
		zone := s.zone.String()
		if s.chance(0.15) {
			zone = "UTC"
		}
		sched := &model.Schedule{Cron: cs.expr, Timezone: zone, Misfire: c.pick("", model.MisfireSkip, model.MisfireRunOnce, model.MisfireRunAll)}
		if sched.Misfire != model.MisfireRunAll && s.chance(0.3) {
			sched.MisfireLimit = 3
		}
		sj.job.Spec.Schedule = sched
		sj.job.NextFireAt = engine.NextFireAt(sj.job, now)
		sc, err := cron.Parse(cs.expr, zone)
		if err != nil {
			s.fail("cron %q in %s: %v", cs.expr, zone, err)
			return sj
		}
		sj.cron, sj.sched = &cs, sc
	} else {
		var due time.Time
		if s.chance(0.3) {
			due = now.Add(s.between(time.Second, 10*time.Minute))
		}
		sj.run = scheduler.NewRun(s.newID("r"), sj.job, model.TriggerSubmit, nil, due, now)
		if sj.run.Concurrency == nil && len(c.runs) > 0 && s.chance(0.25) {
			for range 1 + s.rng.IntN(2) {
				up := c.runs[s.rng.IntN(len(c.runs))]
				if !containsDep(sj.run.DependsOn, up) {
					cond := []model.Condition{model.CondSucceeded, model.CondSucceeded, model.CondFailed, model.CondFinished}[s.rng.IntN(4)]
					sj.run.DependsOn = append(sj.run.DependsOn, model.Dependency{RunID: up, Condition: cond})
				}
			}
		}
	}
	if s.chance(0.25) {
		sj.job.IdempotencyKey = "key-" + jobID
	}
	sj.job.RequestHash = requestHash(sj)
	return sj
}

func containsDep(deps []model.Dependency, run string) bool {
	for _, d := range deps {
		if d.RunID == run {
			return true
		}
	}
	return false
}

// requestHash stands for the API's hash of the request a job came from.
func requestHash(j *simJob) string {
	b, _ := json.Marshal(struct {
		Spec model.JobSpec
		Deps []model.Dependency
	}{j.job.Spec, depsOf(j.run)})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

func depsOf(r *model.Run) []model.Dependency {
	if r == nil {
		return nil
	}
	return r.DependsOn
}

// submit sends a job (and its first run).
func (c *client) submit(sj *simJob) {
	if c.s.err != nil {
		return
	}
	c.jobs = append(c.jobs, sj)
	c.index(sj)
	if sj.job.IdempotencyKey != "" {
		c.keyed = append(c.keyed, sj)
	}
	var res []store.CreateJobResult
	err := c.s.call(func() error {
		var err error
		res, err = c.s.eng.SubmitJobs(c.s.ctx, []store.NewJob{{Job: sj.job, Run: sj.run}})
		return err
	})
	what := describe(sj)
	switch {
	case unreachable(err):
		c.s.logf("client", "submit %s: no answer (%v)", what, err)
		if c.s.chance(0.5) {
			c.again = append(c.again, sj)
		}
		return
	case err != nil:
		c.s.fail("submit %s: %v", what, err)
		return
	}
	c.answered(sj, what, res[0])
}

// answered records what a submission's answer says.
func (c *client) answered(sj *simJob, what string, r store.CreateJobResult) {
	switch {
	case r.Err != nil:
		c.s.fail("submit %s: refused: %v", what, r.Err)
	case r.Conflict:
		c.s.logf("client", "submit %s: conflict with %s (409)", what, r.Job.ID)
	default:
		if r.Job.ID != sj.job.ID {
			c.s.logf("client", "submit %s: found %s by its key, run %s", what, r.Job.ID, runLine(r.Run))
		} else {
			c.s.logf("client", "submit %s: created, run %s", what, runLine(r.Run))
		}
		if known := c.byID[r.Job.ID]; known != nil {
			known.known = true
		}
		sj.known = r.Job.ID == sj.job.ID
		if r.Run != nil {
			c.runs = append(c.runs, r.Run.ID)
			c.s.checks.accept(r.Run.ID)
		}
	}
}

// resubmit sends a keyed job again with new ids, as a user repeating a request does: the
// same request (changed: a different one under the same key, which conflicts).
func (c *client) resubmit(orig *simJob, changed bool) {
	s := c.s
	now := s.clk.Now()
	sj := &simJob{sent: now, cron: orig.cron, sched: orig.sched}
	job := *orig.job
	job.ID, job.CreatedAt, job.UpdatedAt = s.newID("j"), now, now
	job.Name = job.ID
	if changed {
		job.Spec.Priority++
	}
	if job.Spec.Schedule != nil {
		job.NextFireAt = engine.NextFireAt(&job, now)
	}
	sj.job = &job
	if orig.run != nil {
		sj.run = scheduler.NewRun(s.newID("r"), &job, model.TriggerSubmit, nil, orig.run.ScheduledFor, now)
		sj.run.DependsOn = orig.run.DependsOn
	}
	sj.job.RequestHash = requestHash(sj)
	if !changed {
		sj.job.RequestHash = orig.job.RequestHash
	}
	s.logf("client", "sends %s again as %s%s", orig.job.ID, job.ID, map[bool]string{true: ", changed"}[changed])
	c.submit(sj)
}

func (c *client) index(sj *simJob) {
	if c.byID == nil {
		c.byID = make(map[string]*simJob)
	}
	c.byID[sj.job.ID] = sj
}

// describe is a job's summary for the trace.
func describe(sj *simJob) string {
	j := sj.job
	out := j.ID
	if sj.run != nil {
		out += "/" + sj.run.ID
	}
	sp := j.Spec
	out += fmt.Sprintf(" [%s q=%s p=%d att=%d", sp.Handler, sp.Queue, sp.Priority, sp.Retry.MaxAttempts)
	if sp.Retry.MaxDisruptions != nil {
		out += fmt.Sprintf(" dis=%d", *sp.Retry.MaxDisruptions)
	}
	if sp.Retry.InitialDelay > 0 {
		out += fmt.Sprintf(" backoff=%s", sp.Retry.InitialDelay)
	}
	if c := sp.Concurrency; c.Policy != "" {
		out += fmt.Sprintf(" %s/%d", c.Policy, c.Max)
		if c.Key != "" {
			out += " key=" + string(sp.Args)
		}
	}
	if sp.Requirements.CPU > 0 || sp.Requirements.GPU > 0 {
		out += fmt.Sprintf(" cpu=%g gpu=%d", sp.Requirements.CPU, sp.Requirements.GPU)
	}
	if sp.Timeout > 0 {
		out += fmt.Sprintf(" timeout=%s", sp.Timeout)
	}
	if sc := sp.Schedule; sc != nil {
		out += fmt.Sprintf(" cron=%q tz=%s misfire=%s", sc.Cron, sc.Timezone, sc.Misfire)
		if sj.job.NextFireAt != nil {
			out += " next=" + sj.job.NextFireAt.UTC().Format("01-02T15:04:05")
		}
	}
	if j.IdempotencyKey != "" {
		out += " key"
	}
	if sj.run != nil {
		if !sj.run.ScheduledFor.Equal(sj.run.CreatedAt) {
			out += " due=" + sj.run.ScheduledFor.UTC().Format("15:04:05")
		}
		for _, d := range sj.run.DependsOn {
			out += fmt.Sprintf(" after %s:%s", d.RunID, d.Condition)
		}
	}
	return out + "]"
}

// liveJob picks a job the client knows and did not delete; nil when there is none.
func (c *client) liveJob() *simJob {
	var live []*simJob
	for _, j := range c.jobs {
		if j.known && j.deleted.IsZero() {
			live = append(live, j)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[c.s.rng.IntN(len(live))]
}

// trigger runs a job by hand, one to four runs in one request (more often a job under a
// concurrency limit: they compete for its slots), sometimes with an idempotency key or
// other args.
func (c *client) trigger() {
	s := c.s
	j := c.liveJob()
	if j == nil {
		return
	}
	if j.job.Spec.Concurrency.Policy == "" && s.chance(0.5) {
		if lim := c.limitedJob(); lim != nil {
			j = lim
		}
	}
	now := s.clk.Now()
	var runs []*model.Run
	for range 1 + s.rng.IntN(4) {
		var args json.RawMessage
		if j.job.Spec.Concurrency.Key != "" && s.chance(0.5) {
			args = json.RawMessage(fmt.Sprintf(`{"c":%q}`, c.pick("x", "y")))
		}
		r := scheduler.NewRun(s.newID("r"), j.job, model.TriggerManual, args, now, now)
		if s.chance(0.1) && len(c.runs) > 0 {
			r.IdempotencyKey = "t-" + c.runs[s.rng.IntN(len(c.runs))] // sometimes one used before
		}
		runs = append(runs, r)
	}
	var res []store.CreateRunResult
	err := s.call(func() error {
		var err error
		res, err = s.eng.Trigger(s.ctx, runs)
		return err
	})
	switch {
	case unreachable(err):
		s.logf("client", "trigger %s (%d runs): no answer (%v)", j.job.ID, len(runs), err)
		return
	case err != nil:
		s.fail("trigger %s: %v", j.job.ID, err)
		return
	}
	for _, rr := range res {
		if rr.Err != nil {
			s.fail("trigger %s: refused: %v", j.job.ID, rr.Err)
			return
		}
		s.logf("client", "trigger %s: %s%s", j.job.ID, runLine(rr.Run), map[bool]string{true: " (found by its key)"}[rr.Existing])
		c.runs = append(c.runs, rr.Run.ID)
		s.checks.accept(rr.Run.ID)
	}
}

// limitedJob picks a live job under a concurrency limit; nil when there is none.
func (c *client) limitedJob() *simJob {
	var out []*simJob
	for _, j := range c.jobs {
		if j.known && j.deleted.IsZero() && j.job.Spec.Concurrency.Policy != "" {
			out = append(out, j)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out[c.s.rng.IntN(len(out))]
}

// cancel cancels a run, or now and then every active run of a job.
func (c *client) cancel() {
	s := c.s
	var p store.CancelRunsParams
	switch {
	case s.chance(0.2):
		j := c.liveJob()
		if j == nil {
			return
		}
		p.JobID = j.job.ID
	case len(c.runs) > 0:
		p.RunIDs = []string{c.runs[s.rng.IntN(len(c.runs))]}
	default:
		return
	}
	var runs []*model.Run
	err := s.call(func() error {
		var err error
		runs, err = s.eng.CancelRuns(s.ctx, &p)
		return err
	})
	what := fmt.Sprintf("cancel %v%s", p.RunIDs, p.JobID)
	switch {
	case unreachable(err):
		s.logf("client", "%s: no answer (%v)", what, err)
	case err != nil:
		s.fail("%s: %v", what, err)
	default:
		s.logf("client", "%s: %d changed %s", what, len(runs), runsWords(runs))
	}
}

// retry reopens a run by hand (it may not be failed or cancelled: then it is refused).
func (c *client) retry() {
	s := c.s
	id := s.checks.pickFinal()
	if id == "" {
		return
	}
	s.checks.retrying(id)
	var run *model.Run
	err := s.call(func() error {
		var err error
		run, err = s.eng.RetryRun(s.ctx, id)
		return err
	})
	switch {
	case unreachable(err):
		s.logf("client", "retry %s: no answer (%v)", id, err)
	case errors.Is(err, model.ErrInvalidState):
		s.logf("client", "retry %s: refused (invalid state)", id)
	case err != nil:
		s.fail("retry %s: %v", id, err)
	default:
		s.logf("client", "retry %s: %s", id, runLine(run))
	}
}

// updateQueue pauses, resumes or limits queue q2.
func (c *client) updateQueue() {
	s := c.s
	p := &store.UpdateQueueParams{Name: queue2}
	switch r := s.rng.Float64(); {
	case r < 0.35:
		p.Paused = boolp(true)
	case r < 0.7:
		p.Paused = boolp(false)
	default:
		p.MaxConcurrency = intp(s.rng.IntN(3))
	}
	var q *model.Queue
	err := s.call(func() error {
		var err error
		q, err = s.eng.UpdateQueue(s.ctx, p)
		return err
	})
	switch {
	case unreachable(err):
		s.logf("client", "update queue %s: no answer (%v)", queue2, err)
	case err != nil:
		s.fail("update queue %s: %v", queue2, err)
	default:
		s.logf("client", "queue %s: paused %v, max %d", q.Name, q.Paused, q.MaxConcurrency)
	}
}

func boolp(b bool) *bool { return &b }

// deleteJob deletes a job (its active runs are cancelled).
func (c *client) deleteJob() {
	s := c.s
	j := c.liveJob()
	if j == nil {
		return
	}
	j.deleted = s.clk.Now()
	var runs []*model.Run
	err := s.call(func() error {
		var err error
		runs, err = s.eng.DeleteJob(s.ctx, j.job.ID)
		return err
	})
	switch {
	case unreachable(err):
		s.logf("client", "delete %s: no answer (%v)", j.job.ID, err)
	case errors.Is(err, model.ErrNotFound):
		s.logf("client", "delete %s: not found", j.job.ID)
	case err != nil:
		s.fail("delete %s: %v", j.job.ID, err)
	default:
		s.logf("client", "delete %s: %d runs changed %s", j.job.ID, len(runs), runsWords(runs))
	}
}

// quiesce stops the requests.
func (c *client) quiesce() { c.stopped = true }

// resumeQueues resumes q2 and lifts its limit, so that every run can finish.
func (c *client) resumeQueues() {
	s := c.s
	err := s.call(func() error {
		_, err := s.eng.UpdateQueue(s.ctx, &store.UpdateQueueParams{Name: queue2, Paused: boolp(false), MaxConcurrency: intp(0)})
		return err
	})
	if err != nil {
		s.fail("resume queue %s: %v", queue2, err)
	}
}

func runsWords(runs []*model.Run) string {
	out := ""
	for i, r := range runs {
		if i == 4 {
			return out + " ..."
		}
		out += " " + runLine(r)
	}
	return out
}
