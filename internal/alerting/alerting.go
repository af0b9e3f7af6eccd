// Package alerting decides stint's alerts: which rules hold for which subjects (a job, a
// cron schedule, a queue, a worker, a run), and how the alerts open at the moment change.
// Evaluate is a pure function of the open alerts, the facts a store read gathered, the
// rules and the time: it reads no clock and does no I/O. internal/service's Alerter
// gathers the facts, persists the answer and hands it to the notifiers.
//
// An alert is one (rule, subject) while it fires. It fires once when its condition holds,
// and resolves once after the condition has been clear for Rules.Hysteresis without a
// break, so a condition that comes and goes keeps one alert open instead of a flood of
// fires and resolves. A later return of the condition fires a new alert.
package alerting

import (
	"fmt"
	"slices"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// Rule names an alert rule.
type Rule string

// The rules.
const (
	RuleJobFailing   Rule = "job_failing"   // a job's last runs failed N times in a row
	RuleCronLate     Rule = "cron_late"     // a cron instant did not start within its grace
	RuleQueueBacklog Rule = "queue_backlog" // a queue's backlog or its oldest queued run passed a threshold
	RuleWorkerLost   Rule = "worker_lost"   // a worker was lost
	RuleRunTooLong   Rule = "run_too_long"  // a run has been running longer than expected
)

// scanned reports whether rule r decides on facts that a read may leave out (Facts.ScansUnread).
func scanned(r Rule) bool {
	return r == RuleCronLate || r == RuleQueueBacklog || r == RuleRunTooLong
}

// AllRules lists the rules in a stable order.
var AllRules = []Rule{RuleJobFailing, RuleCronLate, RuleQueueBacklog, RuleWorkerLost, RuleRunTooLong}

// State is an alert's state.
type State string

// Alert states.
const (
	Firing   State = "firing"
	Resolved State = "resolved"
)

// Alert is one alert: a rule holding for a subject, from StartedAt to ResolvedAt.
type Alert struct {
	ID      string
	Rule    Rule
	Subject string // "job:<id>", "queue:<name>", "worker:<id>", "run:<id>"
	State   State
	Summary string // what holds and why, in words
	Link    string // the UI page of the subject, a path ("/ui/jobs/<id>")
	// StartedAt is when it fired, ResolvedAt when it resolved (nil while firing).
	StartedAt  time.Time
	ResolvedAt *time.Time
	// ClearSince is when the condition of a firing alert was last seen clear after
	// holding (nil while it holds): it resolves once Hysteresis has passed since.
	ClearSince *time.Time
}

// Rules are the server's thresholds; jobs and queues may override theirs
// (model.JobAlerts, model.QueueAlerts). Zero fields take the defaults of DefaultRules.
type Rules struct {
	ConsecutiveFailures int           // failed runs in a row that fire job_failing
	LateAfter           time.Duration // grace of a cron instant before cron_late
	QueueMaxBacklog     int           // queued runs above this fire queue_backlog
	QueueMaxAge         time.Duration // an oldest queued run older than this fires queue_backlog
	// RunGrace is how far past its job's timeout a run may go before run_too_long, for
	// jobs that set a timeout and no max_duration (the others have no duration rule).
	RunGrace time.Duration
	// Hysteresis is how long a condition stays clear before its alert resolves.
	Hysteresis time.Duration
	// Disabled turns rules off server-wide.
	Disabled map[Rule]bool
}

// Bounds of a job's thresholds (model.JobAlerts), which the API checks.
const (
	// MaxConsecutiveFailures caps consecutive_failures: the Alerter reads that many of a
	// job's latest ended runs.
	MaxConsecutiveFailures = 100
	// MinMaxDuration is the shortest max_duration: runs whose attempt started later than
	// this ago are not read.
	MinMaxDuration = time.Minute
)

// DefaultRules are the thresholds when none are given.
func DefaultRules() Rules {
	return Rules{ConsecutiveFailures: 3, LateAfter: time.Minute, QueueMaxBacklog: 10000,
		QueueMaxAge: 10 * time.Minute, RunGrace: time.Minute, Hysteresis: time.Minute}
}

// withDefaults fills zero fields from DefaultRules.
func (r Rules) withDefaults() Rules {
	d := DefaultRules()
	if r.ConsecutiveFailures <= 0 {
		r.ConsecutiveFailures = d.ConsecutiveFailures
	}
	if r.LateAfter <= 0 {
		r.LateAfter = d.LateAfter
	}
	if r.QueueMaxBacklog <= 0 {
		r.QueueMaxBacklog = d.QueueMaxBacklog
	}
	if r.QueueMaxAge <= 0 {
		r.QueueMaxAge = d.QueueMaxAge
	}
	if r.RunGrace <= 0 {
		r.RunGrace = d.RunGrace
	}
	if r.Hysteresis <= 0 {
		r.Hysteresis = d.Hysteresis
	}
	return r
}

// Job is what the rules read of a job.
type Job struct {
	ID, Namespace, Name string
	Alerts              *model.JobAlerts
	Timeout             time.Duration
}

// Streak is a job's latest ended runs (succeeded or failed), newest first.
type Streak struct {
	Job    Job
	Recent []model.RunStatus
}

// CronRun is a cron run as the cron_late rule reads it.
type CronRun struct {
	ID          string
	Instant     time.Time
	Status      model.RunStatus
	PendingCode model.PendingCode
	Reason      string // the run's pending reason, or its error when it ended unstarted
	Queue       string
	StartedAt   *time.Time
}

// CronJob is a job with a cron schedule: its next fire and its latest cron runs whose
// instant has come, newest first.
type CronJob struct {
	Job        Job
	NextFireAt *time.Time
	Latest     []CronRun
}

// Queue is a queue's backlog.
type Queue struct {
	Name         string
	Paused       bool
	Alerts       *model.QueueAlerts
	Queued       int        // runs queued
	OldestQueued *time.Time // the due time of its oldest queued run
}

// Worker is a worker's state.
type Worker struct {
	ID            string
	State         model.WorkerState
	LastHeartbeat time.Time
}

// Running is a running run and when its attempt started.
type Running struct {
	ID             string
	Job            Job
	AttemptStarted time.Time
}

// Facts are what a store read found. Cron, Queues, Workers and Running are complete: a
// subject they do not name has nothing to alert about. Streaks covers only the jobs whose
// runs ended since the last read (a streak changes only then): a job_failing alert of a job
// it does not name stays as it is. With ScansUnread the read left out the cron jobs, the
// queues and the running runs (Cron, Queues and Running are empty): the alerts of their
// rules (scanned) stay as they are and none fires.
type Facts struct {
	Streaks     []Streak
	Cron        []CronJob
	ScansUnread bool
	Queues      []Queue
	Workers     []Worker
	Running     []Running
}

// Result is what Evaluate decides: alerts to fire (without ID), firing alerts to resolve
// (with State, ResolvedAt set) and firing alerts whose ClearSince changed. A firing alert
// keeps the summary it fired with.
type Result struct {
	Fire    []Alert
	Resolve []Alert
	Update  []Alert
}

// Empty reports whether r changes nothing.
func (r Result) Empty() bool { return len(r.Fire)+len(r.Resolve)+len(r.Update) == 0 }

// condition is one rule's verdict on one subject.
type condition struct {
	rule    Rule
	subject string
	holds   bool
	unknown bool // the facts cannot tell: keep the alert as it is
	summary string
	link    string
}

type key struct {
	rule    Rule
	subject string
}

// Evaluate decides how the open (firing) alerts change given the facts at now: a condition
// that holds with no firing alert fires one; a firing alert whose condition is clear gets
// ClearSince and resolves once it has been clear for the hysteresis; one whose condition
// holds again loses its ClearSince. open must hold at most one firing alert per (rule,
// subject).
func Evaluate(open []Alert, facts Facts, rules Rules, now time.Time) Result {
	rules = rules.withDefaults()
	conds := conditions(facts, rules, now)
	byKey := make(map[key]condition, len(conds))
	for _, c := range conds {
		if !rules.Disabled[c.rule] {
			byKey[key{c.rule, c.subject}] = c
		}
	}
	partialJobs := map[string]bool{} // job_failing subjects the facts examined
	for _, s := range facts.Streaks {
		partialJobs[jobSubject(s.Job.ID)] = true
	}
	var res Result
	seen := map[key]bool{}
	for _, a := range open {
		if a.State != Firing {
			continue
		}
		k := key{a.Rule, a.Subject}
		seen[k] = true
		c, ok := byKey[k]
		switch {
		case ok && c.unknown:
			continue
		case !ok && a.Rule == RuleJobFailing && !partialJobs[a.Subject] && !rules.Disabled[a.Rule]:
			continue // not examined this time
		case !ok && scanned(a.Rule) && facts.ScansUnread && !rules.Disabled[a.Rule]:
			continue // not read this time
		case ok && c.holds:
			if a.ClearSince != nil { // it holds again: stays open, its clock of clearing stops
				a.ClearSince = nil
				res.Update = append(res.Update, a)
			}
			continue
		}
		// Clear (or no longer a subject, or the rule was disabled).
		if a.ClearSince == nil {
			since := now
			a.ClearSince = &since
			if rules.Hysteresis > 0 && !rules.Disabled[a.Rule] {
				res.Update = append(res.Update, a)
				continue
			}
		}
		if now.Sub(*a.ClearSince) >= rules.Hysteresis || rules.Disabled[a.Rule] {
			at := now
			a.State, a.ResolvedAt = Resolved, &at
			res.Resolve = append(res.Resolve, a)
		}
	}
	for _, c := range conds {
		k := key{c.rule, c.subject}
		if !c.holds || c.unknown || seen[k] || rules.Disabled[c.rule] {
			continue
		}
		seen[k] = true
		res.Fire = append(res.Fire, Alert{Rule: c.rule, Subject: c.subject, State: Firing,
			Summary: c.summary, Link: c.link, StartedAt: now})
	}
	return res
}

// conditions lists every rule's verdict on the subjects the facts name, in the facts'
// order.
func conditions(f Facts, r Rules, now time.Time) []condition {
	var out []condition
	for _, s := range f.Streaks {
		out = append(out, failing(s, r))
	}
	queues := make(map[string]Queue, len(f.Queues))
	for _, q := range f.Queues {
		queues[q.Name] = q
		out = append(out, backlog(q, r, now))
	}
	for _, c := range f.Cron {
		out = append(out, late(c, queues, r, now))
	}
	for _, w := range f.Workers {
		out = append(out, condition{rule: RuleWorkerLost, subject: "worker:" + w.ID, holds: w.State == model.WorkerLost,
			summary: fmt.Sprintf("worker %s lost: last heartbeat %s", w.ID, w.LastHeartbeat.UTC().Format(time.RFC3339)),
			link:    "/ui/workers"})
	}
	for _, run := range f.Running {
		out = append(out, tooLong(run, r, now))
	}
	return out
}

func jobSubject(id string) string { return "job:" + id }

func jobLink(id string) string { return "/ui/jobs/" + id }

// off reports whether a job turned its alerts off.
func (j Job) off() bool { return j.Alerts != nil && j.Alerts.Off }

func (j Job) label() string {
	if j.Namespace == "" || j.Namespace == model.DefaultNamespace {
		return j.Name
	}
	return j.Namespace + "/" + j.Name
}

// failing: the job's last N ended runs all failed.
func failing(s Streak, r Rules) condition {
	n := r.ConsecutiveFailures
	if s.Job.Alerts != nil && s.Job.Alerts.ConsecutiveFailures > 0 {
		n = s.Job.Alerts.ConsecutiveFailures
	}
	c := condition{rule: RuleJobFailing, subject: jobSubject(s.Job.ID), link: jobLink(s.Job.ID)}
	if s.Job.off() || len(s.Recent) < n {
		return c
	}
	c.holds = !slices.ContainsFunc(s.Recent[:n], func(st model.RunStatus) bool { return st != model.RunFailed })
	c.summary = fmt.Sprintf("job %s failed %d times in a row", s.Job.label(), n)
	return c
}

// LateAfter is a job's cron grace under r.
func LateAfter(j Job, r Rules) time.Duration {
	if j.Alerts != nil && j.Alerts.LateAfter > 0 {
		return j.Alerts.LateAfter
	}
	return r.withDefaults().LateAfter
}

// late: the job's latest cron instant past its grace did not start within it, or the job's
// next fire is overdue by the grace (no server fired it).
func late(c CronJob, queues map[string]Queue, r Rules, now time.Time) condition {
	grace := LateAfter(c.Job, r)
	out := condition{rule: RuleCronLate, subject: jobSubject(c.Job.ID), link: jobLink(c.Job.ID)}
	if c.Job.off() {
		return out
	}
	words := func(instant time.Time, why string) string {
		return fmt.Sprintf("cron instant %s of job %s did not start within %s: %s",
			instant.UTC().Format(time.RFC3339), c.Job.label(), grace, why)
	}
	if c.NextFireAt != nil && !now.Before(c.NextFireAt.Add(grace)) {
		out.holds, out.summary = true, words(*c.NextFireAt, "no server fired it (no leader, or its cron loop is behind)")
		return out
	}
	i := slices.IndexFunc(c.Latest, func(run CronRun) bool { return !now.Before(run.Instant.Add(grace)) })
	if i < 0 {
		out.unknown = len(c.Latest) > 0 // only instants still within their grace: judge later
		return out
	}
	run := c.Latest[i]
	deadline := run.Instant.Add(grace)
	switch {
	case run.StartedAt != nil:
		if run.StartedAt.After(deadline) {
			out.holds = true
			out.summary = words(run.Instant, fmt.Sprintf("it started %s late", run.StartedAt.Sub(run.Instant).Round(time.Second)))
		}
	case run.Status.Final():
		out.holds, out.summary = true, words(run.Instant, fmt.Sprintf("run %s %s before starting: %s", run.ID, run.Status, orWords(run.Reason, "no reason given")))
	default:
		why := orWords(run.Reason, string(run.PendingCode))
		if q, ok := queues[run.Queue]; ok && q.Paused {
			why = fmt.Sprintf("queue %s is paused", run.Queue)
		}
		out.holds, out.summary = true, words(run.Instant, fmt.Sprintf("run %s is %s: %s", run.ID, run.Status, orWords(why, "no worker leased it")))
	}
	return out
}

func orWords(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// backlog: a queue's queued runs or its oldest queued run's age passed its thresholds.
func backlog(q Queue, r Rules, now time.Time) condition {
	maxN, maxAge := r.QueueMaxBacklog, r.QueueMaxAge
	if a := q.Alerts; a != nil {
		if a.MaxBacklog > 0 {
			maxN = a.MaxBacklog
		}
		if a.MaxAge > 0 {
			maxAge = a.MaxAge
		}
	}
	c := condition{rule: RuleQueueBacklog, subject: "queue:" + q.Name, link: "/ui/queues"}
	if q.Alerts != nil && q.Alerts.Off {
		return c
	}
	var why []string
	if q.Queued > maxN {
		why = append(why, fmt.Sprintf("%d runs queued (threshold %d)", q.Queued, maxN))
	}
	if q.OldestQueued != nil && now.Sub(*q.OldestQueued) > maxAge {
		why = append(why, fmt.Sprintf("oldest queued for %s (threshold %s)", now.Sub(*q.OldestQueued).Round(time.Second), maxAge))
	}
	if len(why) == 0 {
		return c
	}
	c.holds = true
	c.summary = fmt.Sprintf("queue %s: %s", q.Name, why[0])
	if len(why) > 1 {
		c.summary += ", " + why[1]
	}
	if q.Paused {
		c.summary += " (paused)"
	}
	return c
}

// MaxDuration is how long a run of j may run before run_too_long: its max_duration, else
// its timeout plus the grace, else no limit (0).
func MaxDuration(j Job, r Rules) time.Duration {
	if j.Alerts != nil && j.Alerts.MaxDuration > 0 {
		return j.Alerts.MaxDuration
	}
	if j.Timeout > 0 {
		return j.Timeout + r.withDefaults().RunGrace
	}
	return 0
}

// tooLong: a run's attempt has been running longer than its job allows.
func tooLong(run Running, r Rules, now time.Time) condition {
	c := condition{rule: RuleRunTooLong, subject: "run:" + run.ID, link: "/ui/runs/" + run.ID}
	limit := MaxDuration(run.Job, r)
	if run.Job.off() || limit <= 0 {
		return c
	}
	took := now.Sub(run.AttemptStarted)
	c.holds = took > limit
	c.summary = fmt.Sprintf("run %s of job %s running for %s (expected at most %s)", run.ID, run.Job.label(), took.Round(time.Second), limit)
	return c
}
