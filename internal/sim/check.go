package sim

import (
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// checker holds the invariants and what they need to remember between checks. Every
// check reads the store (directly, not through the crashing wrapper); what it remembers of
// the simulation is only what a client or worker was told, or did.
type checker struct {
	s *sim

	accepted []string                   // runs a client was told of, in order
	final    map[string]model.RunStatus // runs seen final, and how
	seen     map[string]bool            // runs seen at all
	retried  map[string]int             // manual retries sent for a run (answered or not)
	reopened map[string]bool            // runs a retry was sent for since the last check
	crons    map[string]*cronCheck

	settles []time.Time // instants at which the services completed their rounds
}

func (c *checker) init(s *sim) {
	c.s = s
	c.final, c.seen, c.retried, c.reopened = map[string]model.RunStatus{}, map[string]bool{}, map[string]int{}, map[string]bool{}
	c.crons = map[string]*cronCheck{}
}

func (c *checker) store() store.Store { return c.s.st.inner }

func (c *checker) fail(format string, args ...any) { c.s.fail("invariant: "+format, args...) }

// accept records a run a client was told of: it must never disappear, and must end.
func (c *checker) accept(id string) {
	if !slices.Contains(c.accepted, id) {
		c.accepted = append(c.accepted, id)
		c.s.stats.Accepted++
	}
}

// retrying records a manual retry about to be sent for run id: the run may leave its final
// state (whether or not an answer comes).
func (c *checker) retrying(id string) {
	c.retried[id]++
	c.reopened[id] = true
}

// settled records that the services completed their rounds at the clock's reading at.
func (c *checker) settled(at time.Time) {
	if n := len(c.settles); n == 0 || c.settles[n-1].Before(at) {
		c.settles = append(c.settles, at)
	}
}

// pickFinal picks a run to retry: one seen final (or, now and then, any run).
func (c *checker) pickFinal() string {
	var ids []string
	for _, id := range c.accepted {
		if c.final[id] == model.RunFailed || c.final[id] == model.RunCancelled {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 || c.s.chance(0.2) {
		ids = c.accepted
	}
	if len(ids) == 0 {
		return ""
	}
	return ids[c.s.rng.IntN(len(ids))]
}

// listRuns reads every run in the store, by id.
func (c *checker) listRuns() []*model.Run {
	var out []*model.Run
	cursor := ""
	for {
		page, err := c.store().ListRuns(c.s.ctx, &store.ListRunsParams{Limit: 1000, Cursor: cursor})
		if err != nil {
			c.fail("list runs: %v", err)
			return nil
		}
		out = append(out, page.Runs...)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// readRuns reads some runs as they are now (nil for one that does not exist).
func (c *checker) readRuns(ids []string) []*model.Run {
	if !c.s.up {
		return make([]*model.Run, len(ids))
	}
	out := make([]*model.Run, len(ids))
	for i, id := range ids {
		r, err := c.store().GetRun(c.s.ctx, &store.GetRunParams{ID: id})
		switch {
		case errors.Is(err, model.ErrNotFound):
		case err != nil:
			c.fail("read run %s: %v", id, err)
		default:
			out[i] = r
		}
	}
	return out
}

// jobOf is a run's job, as the client sent it.
func (c *checker) jobOf(r *model.Run) *simJob { return c.s.client.byID[r.JobID] }

// check is run after every step that wrote to the store: it reads every run and worker.
func (c *checker) check() {
	s := c.s
	runs := c.listRuns()
	if s.err != nil {
		return
	}
	byID := make(map[string]*model.Run, len(runs))
	type keyCount struct {
		holders, running, max int
	}
	keys := map[string]*keyCount{}
	var keyOrder []string
	for _, r := range runs {
		byID[r.ID] = r
		c.seen[r.ID] = true
		j := c.jobOf(r)
		if j == nil {
			c.fail("run %s of job %s, which no client sent", r.ID, r.JobID)
			return
		}
		policy := j.job.Spec.Retry
		// Attempts within policy: what counts against the budget, and the disruptions.
		if counted := r.Attempt - r.Disruptions; counted > r.MaxAttempts {
			c.fail("run %s made %d attempts (%d disruptions) with a budget of %d", r.ID, r.Attempt, r.Disruptions, r.MaxAttempts)
		}
		if r.Disruptions > scheduler.MaxDisruptions(policy) {
			c.fail("run %s had %d disruptions, its policy allows %d", r.ID, r.Disruptions, scheduler.MaxDisruptions(policy))
		}
		if budget := max(policy.MaxAttempts, 1) + c.retried[r.ID]; r.MaxAttempts > budget {
			c.fail("run %s has an attempt budget of %d: its policy gives %d and %d manual retries were sent", r.ID, r.MaxAttempts, max(policy.MaxAttempts, 1), c.retried[r.ID])
		}
		// A lease belongs to running runs alone, and every running run has one.
		hasLease := r.WorkerID != "" || r.LeaseToken != "" || r.LeaseExpiresAt != nil
		if (r.Status == model.RunRunning) != hasLease {
			c.fail("run %s is %s with lease (worker %q, token set %v, expiry %v)", r.ID, r.Status, r.WorkerID, r.LeaseToken != "", r.LeaseExpiresAt)
		}
		// Every run that waits says why (invariant 2).
		if (r.Status == model.RunWaiting || r.Status == model.RunScheduled) && (r.PendingCode == "" || r.PendingReason == "") {
			c.fail("run %s is %s without a reason (code %q, reason %q)", r.ID, r.Status, r.PendingCode, r.PendingReason)
		}
		// Final runs stay final, but for a manual retry.
		if was, ok := c.final[r.ID]; ok && (r.Status != was) && !c.reopened[r.ID] {
			c.fail("run %s was %s and is now %s, with no manual retry", r.ID, was, r.Status)
		}
		if r.Status.Final() {
			c.final[r.ID] = r.Status
		} else {
			delete(c.final, r.ID)
		}
		// Concurrency: the runs holding a slot of a key, and those running, never exceed its
		// max. A stored run does not carry its limit: it is its job's, over its args.
		if cc := scheduler.RunConcurrency(j.job, r.Args); cc != nil && cc.Max > 0 && !r.Status.Final() {
			k := keys[cc.Key]
			if k == nil {
				k = &keyCount{max: cc.Max}
				keys[cc.Key] = k
				keyOrder = append(keyOrder, cc.Key)
			}
			if !(r.Status == model.RunWaiting && r.PendingCode == model.PendingConcurrencyLimit) {
				k.holders++
			}
			if r.Status == model.RunRunning {
				k.running++
			}
		}
		// Cron: no instant twice, every instant on the grid, the DST rules.
		if r.Trigger == model.TriggerCron {
			cc := c.crons[r.JobID]
			if cc == nil {
				if j.sched == nil {
					c.fail("cron run %s of job %s, which has no schedule", r.ID, r.JobID)
					return
				}
				cc = newCronCheck(j)
				c.crons[r.JobID] = cc
			}
			if err := cc.see(r); err != nil {
				c.fail("%v", err)
			}
		}
	}
	for _, key := range keyOrder {
		if k := keys[key]; k.holders > k.max || k.running > k.max {
			c.fail("concurrency key %s: %d runs hold a slot, %d run, max %d", key, k.holders, k.running, k.max)
		}
	}
	clear(c.reopened)
	// No accepted run is lost.
	for _, id := range c.accepted {
		if byID[id] == nil {
			c.fail("run %s was accepted (a client was told of it) and is gone from the store", id)
		}
	}
	c.checkBooked(runs)
}

// checkBooked: the capacity the store books on a worker (the requirements of the runs it
// has running there) never exceeds what the worker declared (invariant 5). It is worked
// out from the runs just read; checkWorkers asks the store's own sums at the end.
func (c *checker) checkBooked(runs []*model.Run) {
	for _, w := range c.s.workers {
		var used model.Requirements
		for _, r := range runs {
			if r.Status == model.RunRunning && r.WorkerID == w.id {
				used.CPU += r.Requirements.CPU
				used.MemoryMB += r.Requirements.MemoryMB
				used.GPU += r.Requirements.GPU
			}
		}
		if d := w.cap; used.CPU > d.CPU+1e-9 || used.MemoryMB > d.MemoryMB || used.GPU > d.GPU {
			c.fail("worker %s has cpu %g, memory %d MB, gpu %d booked of %+v", w.id, used.CPU, used.MemoryMB, used.GPU, d)
		}
	}
}

// checkWorkers: the capacity the store books on a worker never exceeds what it declared
// (invariant 5). Slots are the worker's to count (it asks for as many runs as it has free
// slots), so the store may count more running attempts than slots while a lease whose
// answer the worker never read (lost, a duplicate's, or one a dying server committed) waits
// to expire; that the worker never runs more attempts than its slots is checked where an
// attempt starts (attemptStarts).
func (c *checker) checkWorkers() {
	ws, err := c.store().ListWorkers(c.s.ctx)
	if err != nil {
		c.fail("list workers: %v", err)
		return
	}
	for _, w := range ws {
		u, d := w.Used, w.Capacity
		if u.CPU > d.CPU+1e-9 || u.MemoryMB > d.MemoryMB || u.GPU > d.GPU {
			c.fail("worker %s has %+v booked of %+v", w.ID, u, d)
		}
	}
}

// leased checks a lease answer: each lease is the run's valid one, on that worker, and no
// lease took a queue past its limit.
func (c *checker) leased(w *worker, res *engine.LeaseResult) {
	if len(res.Leases) == 0 {
		return
	}
	ids := make([]string, len(res.Leases))
	for i, l := range res.Leases {
		ids[i] = l.Run.ID
	}
	for i, r := range c.readRuns(ids) {
		l := res.Leases[i]
		if r == nil || r.Status != model.RunRunning || r.LeaseToken != l.Token || r.WorkerID != w.id {
			c.fail("lease of %s to %s is not what the store holds: %s", l.Run.ID, w.id, runLine(r))
		}
	}
	qs, err := c.store().ListQueues(c.s.ctx)
	if err != nil {
		c.fail("list queues: %v", err)
		return
	}
	for _, q := range qs {
		leasedHere := 0
		for _, l := range res.Leases {
			if l.Run.Queue == q.Name {
				leasedHere++
			}
		}
		if leasedHere > 0 && q.MaxConcurrency > 0 && q.Depth[model.RunRunning] > q.MaxConcurrency {
			c.fail("queue %s runs %d runs after a lease, its max is %d", q.Name, q.Depth[model.RunRunning], q.MaxConcurrency)
		}
		if leasedHere > 0 && q.Paused {
			c.fail("queue %s is paused and a lease took %d of its runs", q.Name, leasedHere)
		}
	}
}

// attemptStarts checks that no other process runs the run when an attempt starts: a retry
// never runs beside the attempt it replaces (invariant 8, with the workers killing what
// they could not renew for a TTL, as the agent does).
func (c *checker) attemptStarts(w *worker, a *attempt) {
	for _, other := range c.s.workers {
		if o := other.running(a.run); o != nil {
			c.fail("%s starts %s attempt %d while %s still runs attempt %d (renewed %s)", w.id, a.run, a.n, other.id, o.n,
				o.renewed.UTC().Format("15:04:05.000"))
		}
	}
	// The worker itself never runs more attempts than it declared slots.
	n := 0
	for _, h := range w.held {
		if h.end.IsZero() {
			n++
		}
	}
	if n+1 > w.cap.Slots {
		c.fail("%s starts %s with %d attempts running on %d slots", w.id, a.run, n, w.cap.Slots)
	}
}

// completed checks the fencing of completions: one is accepted exactly when it carries
// the token of the run's current lease (invariant 3). before is each run as it was.
func (c *checker) completed(cs []store.Completion, before []*model.Run, res []store.CompletionResult) {
	for i, comp := range cs {
		r := before[i]
		valid := r != nil && r.Status == model.RunRunning && r.LeaseToken == comp.Token
		switch accepted := res[i].Err == nil; {
		case accepted && !valid:
			c.fail("completion of %s with a stale token was accepted (run was %s)", comp.RunID, runLine(r))
		case !accepted && valid:
			c.fail("completion of %s with its valid token was refused: %v", comp.RunID, res[i].Err)
		case !accepted && !errors.Is(res[i].Err, model.ErrLeaseLost):
			c.fail("completion of %s refused with %v, want model.ErrLeaseLost", comp.RunID, res[i].Err)
		case !accepted:
			c.s.stats.Refused++
		}
	}
}

// heartbeat checks the fencing of a heartbeat: the leases it names that are valid (the run
// running, with that token, on that worker) are renewed and not reported; the others are
// reported Lost or Ended and left as they were.
func (c *checker) heartbeat(w *worker, p *engine.HeartbeatParams, before []*model.Run, res *engine.HeartbeatResult) {
	after := c.readRuns(refIDs(p.Held))
	now := c.s.clk.Now()
	for i, ref := range p.Held {
		b, a := before[i], after[i]
		valid := b != nil && b.Status == model.RunRunning && b.LeaseToken == ref.Token && b.WorkerID == w.id
		reported := slices.Contains(res.Lost, ref.RunID) || slices.Contains(res.Ended, ref.RunID)
		switch {
		case valid && reported:
			c.fail("heartbeat of %s for %s: its valid lease was reported lost or ended", w.id, ref.RunID)
		case valid && (a == nil || a.LeaseExpiresAt == nil || !a.LeaseExpiresAt.Equal(now.Add(leaseTTL).Truncate(time.Microsecond))):
			c.fail("heartbeat of %s for %s did not renew its valid lease: %s", w.id, ref.RunID, runLine(a))
		case !valid && !reported:
			c.fail("heartbeat of %s for %s with a stale lease was not reported (run was %s)", w.id, ref.RunID, runLine(b))
		case !valid && b != nil && a != nil && (a.LeaseToken != b.LeaseToken || !timeEq(a.LeaseExpiresAt, b.LeaseExpiresAt)):
			c.fail("heartbeat of %s with a stale lease of %s changed the run's lease", w.id, ref.RunID)
		}
	}
}

func timeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// activeRuns lists the runs that are not final.
func (c *checker) activeRuns() []string {
	var out []string
	for _, r := range c.listRuns() {
		if !r.Status.Final() {
			out = append(out, r.ID)
		}
	}
	return out
}

// stillActive returns those of ids that are not final yet.
func (c *checker) stillActive(ids []string) []string {
	if !c.s.up {
		return ids
	}
	var out []string
	for i, r := range c.readRuns(ids) {
		if r == nil || !r.Status.Final() {
			out = append(out, ids[i])
		}
	}
	return out
}

// quiesced checks, after the quiet end, that every run that was active when it began, and
// every accepted one, is final: nothing accepted is lost or stuck.
func (c *checker) quiesced(pending []string) {
	if !c.s.up {
		c.fail("the server is down after quiescing")
		return
	}
	ids := append(slices.Clone(pending), c.accepted...)
	for i, r := range c.readRuns(ids) {
		switch {
		case r == nil:
			c.fail("run %s is gone", ids[i])
		case !r.Status.Final():
			c.fail("run %s is still %s after quiescing a day: %s (%s)", r.ID, r.Status, r.PendingCode, r.PendingReason)
		}
		if c.s.err != nil {
			return
		}
	}
}

// atEnd checks, at the end: each run's attempt history, and each cron job's coverage and
// misfire policy.
func (c *checker) atEnd() {
	s := c.s
	if !s.up {
		return
	}
	c.check()
	c.checkWorkers()
	runs := c.listRuns()
	s.stats.Runs = len(runs)
	for _, r := range runs {
		if r.Trigger == model.TriggerCron {
			s.stats.CronRuns++
		}
		full, err := c.store().GetRun(s.ctx, &store.GetRunParams{ID: r.ID})
		if err != nil {
			c.fail("read run %s: %v", r.ID, err)
			return
		}
		lost := 0
		for i, a := range full.Attempts {
			if a.N != i+1 {
				c.fail("run %s: attempt %d is numbered %d", r.ID, i+1, a.N)
			}
			if a.Status == model.AttemptLost {
				lost++
			}
		}
		if len(full.Attempts) != full.Attempt {
			c.fail("run %s counts %d attempts and has %d in its history", r.ID, full.Attempt, len(full.Attempts))
		}
		if lost < full.Disruptions {
			c.fail("run %s had %d disruptions and %d lost attempts", r.ID, full.Disruptions, lost)
		}
	}
	until := s.clk.Now()
	if n := len(c.settles); n > 0 {
		until = c.settles[n-1]
	}
	for _, j := range s.client.jobs {
		if j.sched == nil || s.err != nil {
			continue
		}
		cc := c.crons[j.job.ID]
		if cc == nil {
			if _, err := c.store().GetJob(s.ctx, &store.GetJobParams{IDOrName: j.job.ID}); err != nil {
				continue // never created (or deleted before it fired)
			}
			cc = newCronCheck(j)
		}
		if err := cc.coverage(c.settles, until, &s.stats); err != nil {
			c.fail("%v", err)
		}
	}
}
