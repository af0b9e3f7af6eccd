package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
)

// The history the big-store workloads seed (--seed-finished): finished runs as a store
// that has worked for a while holds them, written straight into the tables (seedStore)
// because going through the API would take longer than the bench itself.
//
// Every job has seedRunsPerJob runs, one a day: its first run on day 0, at a time of day
// of its own, and one more each day after, so the history spans seedRunsPerJob days
// (ending an hour before the seeding). One job in seedCronEvery has a daily cron schedule
// that fires at that time of day (its runs are cron runs of those instants, and its next
// fire is the next one after the seeding, as the API sets it); the others are nameless
// jobs, submitted once (trigger submit) and triggered again by hand (manual). Jobs are
// spread over seedQueues queues.
//
// Each run goes through its life as the server would take it: built by scheduler.NewRun,
// then attempt after attempt, each ended by scheduler.Decide (the outcome the store
// writes), until the run is final. Nine runs in ten succeed at once; of the rest, six in
// ten fail once and then succeed, four fail on every one of their 3 attempts and end
// failed. So a million runs are ~960,000 succeeded and ~40,000 failed, with ~1.14 million
// attempts rows.
const (
	seedRunsPerJob = 10
	seedCronEvery  = 10
	seedQueues     = 20
	seedWorkers    = 50
	seedMaxAttempt = 3
)

// seedRetry is the retry policy of the seeded jobs.
var seedRetry = model.RetryPolicy{MaxAttempts: seedMaxAttempt, InitialDelay: 30 * time.Second, Multiplier: 2, Jitter: 0.1}

// seedJob is a seeded job, with its stored spec and when its first run was made.
type seedJob struct {
	job   *model.Job
	spec  []byte
	first time.Time // the first run's creation (a cron job: its first instant)
	cron  bool
}

// seedRun is a finished run as the store keeps it, and its ended attempts.
type seedRun struct {
	run              *model.Run
	attemptStartedAt time.Time
	attempts         []model.Attempt
}

// seedGen makes the seeded history: jobs first (jobs), then runs in creation order
// (next).
type seedGen struct {
	runs  int // finished runs to make
	jobs  []seedJob
	rng   *rand.Rand
	made  int // runs made so far
	start time.Time
}

// newSeedGen plans runs finished runs seeded at now (all of them end before now), drawn
// from a random source seeded with seed.
func newSeedGen(runs int, now time.Time, seed uint64) (*seedGen, error) {
	const day = 24 * time.Hour
	g := &seedGen{runs: runs, rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	nJobs := (runs + seedRunsPerJob - 1) / seedRunsPerJob
	g.start = now.Add(-seedRunsPerJob*day - time.Hour).UTC()
	g.jobs = make([]seedJob, nJobs)
	for j := range nJobs {
		first := g.start.Add(time.Duration(j) * day / time.Duration(nJobs))
		sj := seedJob{cron: j%seedCronEvery == 0}
		spec := model.JobSpec{
			Handler: "noop",
			Queue:   fmt.Sprintf("seed-%02d", j%seedQueues),
			Retry:   seedRetry,
		}
		created := first
		job := &model.Job{Namespace: model.DefaultNamespace, Spec: spec, Enabled: true}
		if sj.cron {
			first = first.Truncate(time.Minute).Add(time.Minute)
			created = first.Add(-time.Hour)
			job.Spec.Schedule = &model.Schedule{Cron: fmt.Sprintf("%d %d * * *", first.Minute(), first.Hour())}
			job.Name = fmt.Sprintf("seed-cron-%07d", j)
			job.NextFireAt = engine.NextFireAt(job, now)
			if job.NextFireAt == nil {
				return nil, fmt.Errorf("seed: cron %q of job %d does not fire", job.Spec.Schedule.Cron, j)
			}
		}
		job.ID = id.New(created)
		if job.Name == "" {
			job.Name = job.ID // a nameless job, as the API names it
		}
		job.CreatedAt, job.UpdatedAt = created, created
		b, err := json.Marshal(&job.Spec) // the stored form of a spec
		if err != nil {
			return nil, fmt.Errorf("seed: encode spec: %w", err)
		}
		sj.job, sj.spec, sj.first = job, b, first
		g.jobs[j] = sj
	}
	return g, nil
}

// next returns up to n more runs, in creation order (day by day, then job by job); none
// once every run was made.
func (g *seedGen) next(n int) []seedRun {
	var out []seedRun
	for len(out) < n && g.made < g.runs {
		k, j := g.made/len(g.jobs), g.made%len(g.jobs)
		sj := &g.jobs[j]
		out = append(out, g.run(sj, k, sj.first.Add(time.Duration(k)*24*time.Hour)))
		g.made++
	}
	return out
}

// run makes run k of sj, made (or, from cron, due) at at, and takes it to its end.
func (g *seedGen) run(sj *seedJob, k int, at time.Time) seedRun {
	trigger, due, created := model.TriggerManual, at, at
	switch {
	case sj.cron:
		// Cron runs are made ahead of their instant (the engine's CronLead) and promoted.
		trigger, created = model.TriggerCron, at.Add(-2*time.Second)
	case k == 0:
		trigger = model.TriggerSubmit
	}
	r := scheduler.NewRun(id.New(created), sj.job, trigger, nil, due, created)
	// How this run's attempts end: 90% succeed at once, 6% fail once then succeed, 4%
	// fail every time.
	fails := 0
	switch p := g.rng.IntN(100); {
	case p >= 96:
		fails = seedMaxAttempt
	case p >= 90:
		fails = 1
	}
	out := seedRun{run: r}
	start := r.ScheduledFor
	for n := 1; ; n++ {
		start = start.Add(time.Duration(1+g.rng.IntN(20)) * time.Millisecond) // leased
		worker := fmt.Sprintf("seed-worker-%02d", g.rng.IntN(seedWorkers))
		end := start.Add(time.Duration(50+g.rng.IntN(2000)) * time.Millisecond)
		e := scheduler.Ending{Attempt: n, MaxAttempts: r.MaxAttempts, Disruptions: r.Disruptions,
			Policy: sj.job.Spec.Retry, Status: model.AttemptSucceeded}
		if n <= fails {
			e.Status, e.Error = model.AttemptFailed, "seeded failure"
		}
		o := scheduler.Decide(e, end, g.rng.Float64())
		// What a lease writes, then what the completion writes (the run keeps its worker
		// and its last attempt's start; the lease token and expiry are cleared).
		r.Attempt, r.WorkerID = n, worker
		if r.StartedAt == nil {
			s := start
			r.StartedAt = &s
		}
		out.attemptStartedAt = start
		out.attempts = append(out.attempts, model.Attempt{RunID: r.ID, N: n, WorkerID: worker,
			Status: scheduler.RecordedStatus(e.Status), Error: o.Error, StartedAt: start, FinishedAt: &end})
		r.Status, r.PendingCode, r.PendingReason, r.FinishedAt, r.Error = o.Status, o.PendingCode, o.PendingReason, o.FinishedAt, o.Error
		if !o.ScheduledFor.IsZero() {
			r.ScheduledFor = o.ScheduledFor
		}
		if o.Disrupted {
			r.Disruptions++
		}
		if r.Status.Final() {
			return out
		}
		start = r.ScheduledFor
	}
}
