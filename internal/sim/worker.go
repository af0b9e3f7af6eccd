package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// handlers are the kinds of work the simulated jobs name; every worker runs both.
var handlers = []string{"a", "b"}

// worker is a simulated worker process, modelled on the agent in package worker: it
// registers, keeps one lease poll outstanding while it has free slots, heartbeats every
// interval while it holds leases (the agent heartbeats always; an idle worker's heartbeat
// only marks it live), reports each attempt's end until the server answers, kills an
// attempt whose lease it could not renew for a whole TTL, and re-registers with its session
// and held leases when the server no longer knows it. All its requests are messages that
// the network delivers after a random delay, sometimes twice, and whose answers are
// sometimes lost.
type worker struct {
	s   *sim
	id  string
	cap model.Capacity

	alive   bool
	gen     int    // the process: a restart is a new one, and answers to the old are dropped
	session string // "" until registered
	held    []*attempt

	awaiting    []int // requests sent and not answered yet (a duplicate's answer is dropped)
	registering bool
	polling     bool            // a lease request is outstanding
	parked      <-chan struct{} // the poll is parked on the server until this closes
	parkedGen   int             // the server process it is parked on
	parkedUntil time.Time       // or until this (the long poll's end)
	hbOn        bool            // the heartbeat timer runs
	resendOn    bool            // a resend of unanswered completions is scheduled
	failures    int             // consecutive requests without an answer, for the backoff
	cutUntil    time.Time       // a network partition: requests sent before this are lost
}

// attempt is a lease the worker holds: running, or ended with its completion not answered.
type attempt struct {
	run     string
	token   string
	n       int
	start   time.Time // when its process started
	renewed time.Time // when the request that last renewed its lease was sent
	end     time.Time // when its process ended; zero while it runs
	done    *store.Completion
	stop    bool // a cancel came: its process is being stopped
}

// message is a request of a worker to the server.
type message struct {
	id   int
	w    *worker
	gen  int
	kind string // register, lease, heartbeat, complete
	sent time.Time

	register  *engine.RegisterParams
	lease     *engine.LeaseParams
	heartbeat *engine.HeartbeatParams
	complete  []store.Completion
}

func (s *sim) newWorker(i int) *worker {
	w := &worker{s: s, id: fmt.Sprintf("w%d", i+1)}
	w.cap = model.Capacity{CPU: float64(2 + s.rng.IntN(3)), MemoryMB: 4096, Slots: 2 + s.rng.IntN(3)}
	if i == 0 {
		w.cap.GPU = 1 // one worker fits every job the clients submit
	}
	s.workers = append(s.workers, w)
	return w
}

// start starts a new process of the worker: it registers as new, holding nothing.
func (w *worker) start() {
	if w.alive {
		return
	}
	w.alive, w.gen, w.session = true, w.gen+1, ""
	w.held, w.awaiting, w.polling, w.parked, w.registering, w.hbOn, w.resendOn = nil, nil, false, nil, false, false, false
	w.s.logf(w.id, "process %d starts (cpu %.0f, slots %d, gpu %d)", w.gen, w.cap.CPU, w.cap.Slots, w.cap.GPU)
	w.register(false)
	w.chaosLater()
}

// chaosLater schedules the worker's next misfortune.
func (w *worker) chaosLater() {
	gen := w.gen
	w.s.at(w.s.exp(20*time.Minute), "chaos "+w.id, func() {
		if w.gen != gen || !w.alive || w.s.quiescing {
			return
		}
		switch r := w.s.rng.Float64(); {
		case r < 0.35:
			w.die()
			return
		case r < 0.7:
			d := w.s.between(5*time.Second, 2*time.Minute)
			w.cutUntil = w.s.clk.Now().Add(d)
			w.s.logf(w.id, "network cut for %s", d)
		default:
			w.s.logf(w.id, "re-attaches (as to another server)")
			w.register(true)
		}
		w.chaosLater()
	})
}

// die kills the process and everything it runs; it starts again after a while.
func (w *worker) die() {
	w.s.stats.WorkerDeaths++
	w.expire()
	now := w.s.clk.Now()
	for _, a := range w.held {
		if a.end.IsZero() {
			a.end = now
		}
	}
	w.s.logf(w.id, "process %d DIES holding %d leases", w.gen, len(w.held))
	w.alive, w.held, w.polling, w.parked = false, nil, false, nil
	w.s.at(w.s.between(time.Second, 10*time.Minute), "restart "+w.id, w.start)
}

// quiesce makes the worker healthy for the end of the run: alive, connected, every attempt
// it runs (and will run) succeeding soon.
func (w *worker) quiesce() {
	w.cutUntil = time.Time{}
	if !w.alive {
		w.start()
		return
	}
	for _, a := range w.held {
		if a.end.IsZero() && !a.stop {
			w.endAt(a, w.s.between(0, 10*time.Second), model.AttemptSucceeded, nil)
		}
	}
	w.poll()
}

// send puts a request on the network: it arrives after a random delay (sometimes long
// enough for leases to expire), sometimes twice, and not at all while the worker is cut off.
func (w *worker) send(m *message) {
	w.s.msgs++
	m.id, m.w, m.gen, m.sent = w.s.msgs, w, w.gen, w.s.clk.Now()
	w.awaiting = append(w.awaiting, m.id)
	if w.s.clk.Now().Before(w.cutUntil) {
		w.s.logf(w.id, "%s #%d lost in the network", m.kind, m.id)
		w.s.at(w.s.between(time.Second, 5*time.Second), "timeout", func() { w.noAnswer(m) })
		return
	}
	if m.kind == "register" {
		// Registrations go promptly and once: a late duplicate of a process's registration
		// would start a new session and end the attempts that process runs (see the package
		// doc, "Known defects").
		w.s.at(w.s.between(time.Millisecond, 30*time.Millisecond), m.kind, func() { w.s.deliver(m, false) })
		return
	}
	w.s.at(w.s.latency(), m.kind, func() { w.s.deliver(m, false) })
	if !w.s.quiescing && w.s.chance(0.04) {
		w.s.at(w.s.latency(), m.kind+" (again)", func() { w.s.deliver(m, true) })
	}
}

// latency is a message's delay: mostly milliseconds, sometimes seconds, now and then past a
// lease's TTL.
func (s *sim) latency() time.Duration {
	if s.quiescing {
		return s.between(time.Millisecond, 20*time.Millisecond)
	}
	switch r := s.rng.Float64(); {
	case r < 0.88:
		return s.between(time.Millisecond, 30*time.Millisecond)
	case r < 0.97:
		return s.between(30*time.Millisecond, 5*time.Second)
	default:
		return s.between(5*time.Second, 2*time.Minute)
	}
}

// answered takes request id off the awaited ones and reports whether it was awaited: only
// the first answer to a request is read.
func (w *worker) answered(id int) bool {
	i := slices.Index(w.awaiting, id)
	if i < 0 {
		return false
	}
	w.awaiting = slices.Delete(w.awaiting, i, i+1)
	return true
}

// backoff is the pause before sending again after requests went unanswered.
func (w *worker) backoff() time.Duration {
	d := time.Second << min(w.failures, 6)
	return w.s.between(d/2, d)
}

// noAnswer handles a request that got no answer (server down, died, or the answer lost).
func (w *worker) noAnswer(m *message) {
	if w.gen != m.gen || !w.alive || !w.answered(m.id) {
		return
	}
	w.failures++
	switch m.kind {
	case "register":
		w.registering = false
		w.s.at(w.backoff(), "register again", func() {
			if w.gen == m.gen && w.alive && w.session == "" {
				w.register(false)
			}
		})
	case "lease":
		w.polling = false
		w.s.at(w.backoff(), "poll again", func() {
			if w.gen == m.gen {
				w.poll()
			}
		})
	case "complete":
		w.resendLater()
	}
}

// serverDown: the polls parked on the server end with it (the connection resets).
func (w *worker) serverDown() {
	if w.parked == nil {
		return
	}
	w.parked, w.polling = nil, false
	gen := w.gen
	w.failures++
	w.s.at(w.backoff(), "poll again", func() {
		if w.gen == gen {
			w.poll()
		}
	})
}

// register sends a registration: as a new process, or (resume) re-attaching with its
// session and the leases it holds.
func (w *worker) register(resume bool) {
	if !w.alive || w.registering {
		return
	}
	p := &engine.RegisterParams{ID: w.id, Capacity: w.cap, Handlers: handlers}
	if resume && w.session != "" {
		p.Resume, p.Held = w.session, w.refs()
	}
	w.registering = true
	w.send(&message{kind: "register", register: p})
}

// refs lists the leases the worker holds.
func (w *worker) refs() []store.LeaseRef {
	out := make([]store.LeaseRef, 0, len(w.held))
	for _, a := range w.held {
		out = append(out, store.LeaseRef{RunID: a.run, Token: a.token})
	}
	return out
}

// onRegister applies a registration's answer.
func (w *worker) onRegister(m *message, reg *engine.Registration) {
	w.registering = false
	w.session = reg.Session
	if !reg.Resumed {
		// A new session: the store ended whatever an earlier session held.
		for _, a := range w.held {
			w.kill(a, "not kept by the new session")
		}
		w.held = nil
	} else {
		w.applyAnswer(m, reg.Lost, reg.Ended, reg.Cancel)
	}
	w.s.logf(w.id, "registered (resumed %v, lost %d, ended %d)", reg.Resumed, len(reg.Lost), len(reg.Ended))
	w.poll()
	w.heartbeatLater()
}

// poll sends a lease request for the free slots, unless one is outstanding.
func (w *worker) poll() {
	if !w.alive || w.session == "" || w.polling {
		return
	}
	w.expire()
	free := w.cap.Slots - len(w.held)
	if free <= 0 {
		return
	}
	w.polling = true
	w.send(&message{kind: "lease", lease: &engine.LeaseParams{Session: w.session, Max: free}})
}

// park keeps the answered poll open on the server, as the long poll does: it is sent again
// when the engine wakes the long polls (its Work channel) or after a while.
func (w *worker) park() {
	w.parked, w.parkedGen = w.s.eng.Work(), w.s.incarnation
	w.parkedUntil = w.s.clk.Now().Add(w.s.between(2*time.Minute, 10*time.Minute))
	gen, until := w.gen, w.parkedUntil
	w.s.at(until.Sub(w.s.clk.Now()), "poll ends", func() {
		if w.gen == gen && w.parked != nil && w.parkedUntil.Equal(until) {
			w.parked, w.polling = nil, false
			w.poll()
		}
	})
}

// wake sends a parked poll again when the server saw a change.
func (w *worker) wake() {
	if w.parked == nil || w.parkedGen != w.s.incarnation {
		return
	}
	select {
	case <-w.parked:
	default:
		return
	}
	w.parked, w.polling = nil, false
	w.poll()
}

// onLease applies a lease answer: new attempts start, pushed cancels and losses apply.
func (w *worker) onLease(m *message, res *engine.LeaseResult) {
	w.polling = false
	w.applyAnswer(m, res.Lost, nil, res.Cancel)
	for _, l := range res.Leases {
		w.startAttempt(m, l)
	}
	if len(res.Leases) == 0 {
		if w.s.up {
			w.polling = true
			w.park()
		}
		return
	}
	w.heartbeatLater()
	w.poll()
}

// startAttempt runs a leased run: its outcome and length are drawn now. A lease of a run
// the worker still holds replaces the old attempt, as in the agent: the server leased the
// run again, so the old lease is gone (killed if it runs, its completion dropped).
func (w *worker) startAttempt(m *message, l *model.Lease) {
	now := w.s.clk.Now()
	if i := slices.IndexFunc(w.held, func(a *attempt) bool { return a.run == l.Run.ID }); i >= 0 {
		if old := w.held[i]; old.end.IsZero() {
			w.kill(old, "the server leased its run again")
		}
		w.held = slices.Delete(w.held, i, i+1)
	}
	a := &attempt{run: l.Run.ID, token: l.Token, n: l.Run.Attempt, start: now, renewed: m.sent}
	w.s.checks.attemptStarts(w, a)
	w.held = append(w.held, a)
	dur := w.s.exp(8 * time.Second)
	if w.s.chance(0.05) {
		dur = w.s.between(time.Minute, 4*time.Minute)
	}
	status, exit := model.AttemptSucceeded, (*int)(nil)
	switch r := w.s.rng.Float64(); {
	case w.s.quiescing:
		dur = w.s.between(time.Millisecond, 5*time.Second)
	case r < 0.7:
	case r < 0.88:
		status, exit = model.AttemptFailed, intp(1)
	case r < 0.94:
		status, exit = model.AttemptFailed, intp(3+w.s.rng.IntN(2)) // 3: final for some jobs, 4: always retried by some
	default:
		status = "" // hangs until stopped
	}
	if l.Spec.Timeout > 0 && (status == "" || dur > l.Spec.Timeout) {
		status, exit, dur = model.AttemptTimedOut, nil, l.Spec.Timeout
	}
	w.s.logf(w.id, "starts %s attempt %d (%s)", a.run, a.n, outcomeWords(status, exit, dur))
	if status != "" {
		w.endAt(a, dur, status, exit)
	}
}

func intp(v int) *int { return &v }

func outcomeWords(status model.AttemptStatus, exit *int, d time.Duration) string {
	switch {
	case status == "":
		return "hangs"
	case exit != nil:
		return fmt.Sprintf("%s exit %d in %s", status, *exit, d.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s in %s", status, d.Round(time.Millisecond))
}

// endAt ends attempt a's process after d with status, unless something stops it first.
func (w *worker) endAt(a *attempt, d time.Duration, status model.AttemptStatus, exit *int) {
	gen := w.gen
	w.s.at(d, "attempt ends", func() {
		if w.gen != gen || !w.alive {
			return
		}
		w.expire()
		if !a.end.IsZero() || !slices.Contains(w.held, a) {
			return
		}
		a.end = w.s.clk.Now()
		c := store.Completion{RunID: a.run, Token: a.token, Status: status, ExitCode: exit}
		if status != model.AttemptSucceeded {
			c.Error = string(status)
		}
		a.done = &c
		w.s.logf(w.id, "%s attempt %d ends %s", a.run, a.n, status)
		w.sendCompletions()
	})
}

// sendCompletions sends every unanswered completion in one request.
func (w *worker) sendCompletions() {
	var cs []store.Completion
	for _, a := range w.held {
		if a.done != nil {
			cs = append(cs, *a.done)
		}
	}
	if len(cs) > 0 {
		w.send(&message{kind: "complete", complete: cs})
	}
}

// resendLater sends the unanswered completions again after a backoff.
func (w *worker) resendLater() {
	if w.resendOn {
		return
	}
	w.resendOn = true
	gen := w.gen
	w.s.at(w.backoff(), "resend completions", func() {
		if w.gen != gen || !w.alive {
			return
		}
		w.resendOn = false
		w.sendCompletions()
	})
}

// onComplete applies the answer to completions: accepted or refused, the lease is done.
func (w *worker) onComplete(res []store.CompletionResult, sent []store.Completion) {
	for i, r := range res {
		c := sent[i]
		if r.Err != nil && !errors.Is(r.Err, model.ErrLeaseLost) {
			w.s.fail("completion of %s refused with %v, want accepted or lease lost", c.RunID, r.Err)
		}
		at := slices.IndexFunc(w.held, func(a *attempt) bool { return a.run == c.RunID && a.token == c.Token })
		if at >= 0 {
			w.held = slices.Delete(w.held, at, at+1)
		}
	}
	w.poll()
}

// heartbeatLater starts the heartbeat timer if it is not running.
func (w *worker) heartbeatLater() {
	if w.hbOn || !w.alive {
		return
	}
	w.hbOn = true
	gen := w.gen
	w.s.at(heartbeatInt, "heartbeat "+w.id, func() {
		if w.gen != gen {
			return
		}
		w.hbOn = false
		if !w.alive || w.session == "" {
			return
		}
		w.expire()
		if len(w.held) == 0 {
			return
		}
		w.send(&message{kind: "heartbeat", heartbeat: &engine.HeartbeatParams{Session: w.session, Held: w.refs()}})
		w.heartbeatLater()
	})
}

// onHeartbeat applies a heartbeat's answer: the leases it did not report are renewed as of
// the heartbeat's sending.
func (w *worker) onHeartbeat(m *message, res *engine.HeartbeatResult) {
	w.applyAnswer(m, res.Lost, res.Ended, res.Cancel)
}

// applyAnswer applies what an answer to request m says of the leases: Lost ones are killed
// (or, ended already, forgotten once their completion is answered), Ended ones forgotten,
// cancelled ones stopped; every other lease m named was renewed when m was sent.
func (w *worker) applyAnswer(m *message, lost, ended, cancel []string) {
	w.expire()
	var named []store.LeaseRef
	switch {
	case m.heartbeat != nil:
		named = m.heartbeat.Held
	case m.register != nil:
		named = m.register.Held
	}
	keep := w.held[:0]
	for _, a := range w.held {
		switch {
		case slices.Contains(ended, a.run):
			w.s.logf(w.id, "forgets %s: its end is recorded", a.run)
			continue
		case slices.Contains(lost, a.run) && a.end.IsZero():
			w.kill(a, "the server says its lease is lost")
			continue
		case slices.Contains(lost, a.run):
			// ended: its completion is on its way and will be refused
		case slices.Contains(cancel, a.run) && a.end.IsZero() && !a.stop:
			a.stop = true
			w.endAt(a, w.s.between(0, 3*time.Second), model.AttemptCancelled, nil)
		}
		if slices.ContainsFunc(named, func(r store.LeaseRef) bool { return r.RunID == a.run && r.Token == a.token }) && m.sent.After(a.renewed) {
			a.renewed = m.sent
		}
		keep = append(keep, a)
	}
	clear(w.held[len(keep):])
	w.held = keep
}

// kill stops an attempt's process at once, reporting nothing.
func (w *worker) kill(a *attempt, why string) {
	if a.end.IsZero() {
		a.end = w.s.clk.Now()
	}
	w.s.stats.Lost++
	w.s.logf(w.id, "kills %s attempt %d: %s", a.run, a.n, why)
}

// expire kills the attempts whose lease the worker could not renew for a whole TTL (the
// agent's rule: the server may have given the run to another worker since). It is applied
// lazily, before anything the worker does or anything that depends on what it runs: the
// kill happened at renewed+TTL.
func (w *worker) expire() {
	if !w.alive {
		return
	}
	keep := w.held[:0]
	for _, a := range w.held {
		if a.end.IsZero() && !w.s.clk.Now().Before(a.renewed.Add(leaseTTL)) {
			a.end = a.renewed.Add(leaseTTL)
			w.s.stats.Lost++
			w.s.logf(w.id, "kills %s attempt %d: lease not renewed since %s", a.run, a.n, a.renewed.UTC().Format("15:04:05.000"))
			continue
		}
		keep = append(keep, a)
	}
	clear(w.held[len(keep):])
	w.held = keep
}

// running reports whether the worker's process runs an attempt of run now.
func (w *worker) running(run string) *attempt {
	if !w.alive {
		return nil
	}
	w.expire()
	for _, a := range w.held {
		if a.run == run && a.end.IsZero() {
			return a
		}
	}
	return nil
}

// deliver hands request m to the server (dup: it is a duplicate the network made) and its
// answer, if any arrives, to its worker.
func (s *sim) deliver(m *message, dup bool) {
	w := m.w
	if dup {
		s.stats.Duplicates++
	}
	tag := fmt.Sprintf("%s #%d from %s", m.kind, m.id, w.id)
	if dup {
		tag += " (duplicate)"
	}
	if m.sent.Add(leaseTTL).Before(s.clk.Now()) {
		tag += fmt.Sprintf(" (sent %s ago)", s.clk.Now().Sub(m.sent).Round(time.Millisecond))
	}
	var apply func()
	var err error
	switch m.kind {
	case "register":
		var reg *engine.Registration
		err = s.call(func() error {
			var err error
			reg, err = s.eng.Register(s.ctx, m.register)
			return err
		})
		if err == nil {
			s.logf("server", "%s: session resumed %v, lost %v, ended %v, cancel %v", tag, reg.Resumed, reg.Lost, reg.Ended, reg.Cancel)
			apply = func() { w.onRegister(m, reg) }
		}
	case "lease":
		var res *engine.LeaseResult
		err = s.call(func() error {
			var err error
			res, err = s.eng.Lease(s.ctx, w.id, m.lease)
			return err
		})
		if err == nil {
			s.logf("server", "%s: %s", tag, leaseWords(res))
			s.checks.leased(w, res)
			apply = func() { w.onLease(m, res) }
		}
	case "heartbeat":
		before := s.checks.readRuns(refIDs(m.heartbeat.Held))
		var res *engine.HeartbeatResult
		err = s.call(func() error {
			var err error
			res, err = s.eng.Heartbeat(s.ctx, w.id, m.heartbeat)
			return err
		})
		if err == nil {
			s.logf("server", "%s: %d held, lost %v, ended %v, cancel %v", tag, len(m.heartbeat.Held), res.Lost, res.Ended, res.Cancel)
			s.checks.heartbeat(w, m.heartbeat, before, res)
			apply = func() { w.onHeartbeat(m, res) }
		}
	case "complete":
		ids := make([]string, len(m.complete))
		for i, c := range m.complete {
			ids[i] = c.RunID
		}
		before := s.checks.readRuns(ids)
		var res []store.CompletionResult
		err = s.call(func() error {
			var err error
			res, err = s.eng.Complete(s.ctx, m.complete)
			return err
		})
		if err == nil {
			s.stats.Completions += len(res)
			s.logf("server", "%s: %s", tag, completionWords(m.complete, res))
			s.checks.completed(m.complete, before, res)
			apply = func() { w.onComplete(res, m.complete) }
		}
	}
	switch {
	case unreachable(err):
		s.logf("net", "%s: no answer (%v)", tag, err)
		w.noAnswer(m)
		return
	case errors.Is(err, engine.ErrUnknownWorker):
		s.logf("server", "%s: unknown worker", tag)
		apply = func() {
			if m.kind == "lease" {
				w.polling = false
			}
			w.register(true)
		}
	case m.kind == "register" && errors.Is(err, model.ErrConflict):
		// Its earlier registration took the id and the answer was lost: the session it does
		// not know is live, so the id is refused until that session goes silent for a
		// lease TTL. The agent waits and registers again, as here.
		s.logf("server", "%s: refused, the id is held by a live session (%v)", tag, err)
		w.noAnswer(m)
		return
	case err != nil:
		s.fail("%s: the server answered %v", tag, err)
		return
	}
	if !s.quiescing && s.chance(0.02) {
		s.logf("net", "%s: the answer is lost", tag)
		w.noAnswer(m)
		return
	}
	if w.gen != m.gen || !w.alive || !w.answered(m.id) {
		return // a dead process's or a duplicate's answer: nobody reads it
	}
	w.failures = 0
	apply()
}

func refIDs(refs []store.LeaseRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.RunID
	}
	return out
}

func leaseWords(res *engine.LeaseResult) string {
	var b strings.Builder
	if len(res.Leases) == 0 {
		b.WriteString("nothing")
	}
	for i, l := range res.Leases {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s attempt %d", l.Run.ID, l.Run.Attempt)
	}
	if len(res.Cancel) > 0 {
		fmt.Fprintf(&b, "; cancel %v", res.Cancel)
	}
	if len(res.Lost) > 0 {
		fmt.Fprintf(&b, "; lost %v", res.Lost)
	}
	return b.String()
}

func completionWords(cs []store.Completion, res []store.CompletionResult) string {
	var b strings.Builder
	for i, r := range res {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s -> ", cs[i].RunID, cs[i].Status)
		if r.Err != nil {
			b.WriteString("refused (stale)")
			continue
		}
		b.WriteString(runLine(r.Run))
	}
	return b.String()
}
