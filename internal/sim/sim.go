package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// Config says what a simulation runs on and how long.
type Config struct {
	// Open opens the store a server process uses: the first call gets an empty database,
	// each later one (a restart after a crash) the same database again, after the store
	// the previous call returned was closed.
	Open func(ctx context.Context) (store.Store, error)
	// Requests is how many requests the clients send before the simulation quiesces.
	// Default DefaultRequests.
	Requests int
	// Tail is how many of the trace's last lines a Result keeps. Default 60.
	Tail int
	// Trace, when set, receives every line of the trace as it is written.
	Trace io.Writer
}

// DefaultRequests is Config.Requests' default.
const DefaultRequests = 25

// Timing of the simulated cluster. The lease TTL is short against the simulated hours so
// that leases expire often; the leader lease is long, so that a server keeps its lead
// across the simulation's big clock jumps (it takes it back at once after a restart: it
// keeps its id).
const (
	leaseTTL     = time.Minute
	heartbeatInt = leaseTTL / 5
	cronLead     = 2 * time.Second
	misfireGrace = time.Minute
	leaderTTL    = time.Hour
)

// Result is what one seed did.
type Result struct {
	Seed uint64
	// Hash is the SHA-256 of the whole trace: the same seed gives the same hash.
	Hash  string
	Lines int      // lines of trace
	Tail  []string // its last lines
	Stats Stats
	// Err is the first invariant that broke (or the simulation's own failure); nil when
	// every check passed.
	Err error
}

// Stats count what a seed exercised.
type Stats struct {
	Events       int
	SimTime      time.Duration // how far the clock moved
	Writes       int           // store writes, over every server process
	Crashes      int           // server crashes
	WorkerDeaths int
	Runs         int // runs in the store at the end
	CronRuns     int
	Accepted     int // runs whose creation a client was told of
	Completions  int // completions delivered to a server
	Refused      int // of which refused as stale (fencing)
	Duplicates   int // messages delivered twice
	Lost         int // attempts that ended lost
	LateFires    int // cron instants fired later than the grace (misfires recovered)
}

// Run simulates one seed: see the package doc.
func Run(ctx context.Context, seed uint64, cfg Config) *Result {
	if cfg.Requests <= 0 {
		cfg.Requests = DefaultRequests
	}
	if cfg.Tail <= 0 {
		cfg.Tail = 60
	}
	s := newSim(ctx, seed, cfg)
	s.run()
	res := &Result{Seed: seed, Hash: s.trace.sum(), Lines: s.trace.lines, Tail: s.trace.tailLines(), Stats: s.stats, Err: s.err}
	res.Stats.SimTime = s.clk.Now().Sub(s.start)
	return res
}

// sim is one simulation: the clock, the event queue, the server (an engine in Stepped
// mode over a crashStore), the workers and the clients, and what the checks remember.
type sim struct {
	ctx   context.Context
	cfg   Config
	seed  uint64
	rng   *rand.Rand // every decision of the simulation
	erng  *rand.Rand // the engine's retry jitter
	clk   *clock.Fake
	zone  *time.Location // the zone the run starts near a DST change of
	start time.Time

	events eventQueue
	seq    uint64
	ids    int // the ids of everything, the engine's included: one counter, so they sort by creation
	msgs   int // request ids

	// The server process: up, or down until a restart event.
	st          *crashStore
	eng         *engine.Engine
	up          bool
	incarnation int
	writesDone  int // writes of the processes before this one
	lastChecked int // total writes when the invariants were last checked

	workers []*worker
	client  client
	checks  checker

	quiescing  bool
	forceCheck bool // the current event is a client's request: check after it
	trace      tracer
	stats      Stats
	err        error
}

func newSim(ctx context.Context, seed uint64, cfg Config) *sim {
	s := &sim{
		ctx:  ctx,
		cfg:  cfg,
		seed: seed,
		rng:  rand.New(rand.NewPCG(seed, 0x5157)),
		erng: rand.New(rand.NewPCG(seed, 0x6a17)),
	}
	s.trace = newTracer(cfg.Trace, cfg.Tail)
	s.zone, s.start = s.pickStart()
	s.clk = clock.NewFake(s.start)
	s.client.s = s
	s.checks.init(s)
	return s
}

// pickStart chooses a zone and a start up to an hour before one of its DST changes in
// 2026, so that cron schedules in that zone cross a spring-forward or a fall-back.
func (s *sim) pickStart() (*time.Location, time.Time) {
	changes := []struct {
		zone string
		at   time.Time // UTC
	}{
		{"America/New_York", time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)},  // 02:00 EST -> 03:00 EDT
		{"America/New_York", time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC)}, // 02:00 EDT -> 01:00 EST
		{"Europe/London", time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)},    // 01:00 GMT -> 02:00 BST
		{"Europe/London", time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC)},   // 02:00 BST -> 01:00 GMT
	}
	c := changes[s.rng.IntN(len(changes))]
	loc, err := time.LoadLocation(c.zone)
	if err != nil {
		panic(fmt.Sprintf("sim: time zone %s: %v", c.zone, err)) // the zone database is embedded in the test binary
	}
	return loc, c.at.Add(-s.between(time.Millisecond, time.Hour))
}

// fail records the first broken invariant; the run stops at the next event.
func (s *sim) fail(format string, args ...any) {
	if s.err != nil {
		return
	}
	s.err = fmt.Errorf(format, args...)
	s.logf("FAIL", "%v", s.err)
}

// logf writes a line of the trace, stamped with the clock.
func (s *sim) logf(who, format string, args ...any) {
	now := s.clk.Now()
	s.trace.line(fmt.Sprintf("%s %-8s %s", now.UTC().Format("01-02T15:04:05.000"), who, fmt.Sprintf(format, args...)))
}

// newID returns the next id of kind ("j" job, "r" run).
func (s *sim) newID(kind string) string {
	s.ids++
	return fmt.Sprintf("%s%06d", kind, s.ids)
}

// draw helpers.
func (s *sim) chance(p float64) bool { return s.rng.Float64() < p }

// between draws a duration in [lo, hi), in whole microseconds: the store's precision, so
// that what it stores is what the simulation meant.
func (s *sim) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return (lo + time.Duration(s.rng.Int64N(int64(hi-lo)))).Truncate(time.Microsecond)
}

// exp draws an exponentially distributed duration of mean mean, in whole microseconds.
func (s *sim) exp(mean time.Duration) time.Duration {
	return time.Duration(s.rng.ExpFloat64() * float64(mean)).Truncate(time.Microsecond)
}

// run is the whole simulation: start, events, quiesce, final checks.
func (s *sim) run() {
	s.logf("sim", "seed %d, zone %s, start %s (local %s)", s.seed, s.zone, s.start.UTC().Format(time.RFC3339), s.start.In(s.zone).Format("2006-01-02 15:04 MST"))
	s.startServer()
	for i := range 2 + s.rng.IntN(2) {
		w := s.newWorker(i)
		s.at(s.between(0, 2*time.Second), "start "+w.id, w.start)
	}
	s.client.schedule()
	for s.err == nil && s.client.requests < s.cfg.Requests && s.events.Len() > 0 {
		s.step()
	}
	if s.err == nil {
		s.quiesce()
	}
	if s.err == nil {
		s.checks.atEnd()
	}
	s.stats.Writes = s.writes()
}

// step runs the next event: the services run first at every instant up to it.
func (s *sim) step() {
	ev := heap.Pop(&s.events).(*event)
	s.advance(ev.at)
	if s.err != nil {
		return
	}
	s.stats.Events++
	var changed <-chan struct{}
	if s.up {
		changed = s.eng.Changes()
	}
	s.forceCheck = false
	ev.do()
	s.afterCall()
	s.checkAfter(changed, s.forceCheck)
	for _, w := range s.workers {
		w.wake()
	}
}

// at schedules do after d, in the order of scheduling among equal instants.
func (s *sim) at(d time.Duration, name string, do func()) {
	s.seq++
	heap.Push(&s.events, &event{at: s.clk.Now().Add(max(d, 0)), seq: s.seq, name: name, do: do})
}

// advance moves the clock to t. While the server is up, its services run first at every
// instant they are due by t, as their loops would have (sometimes a little late, as a busy
// process runs them).
func (s *sim) advance(t time.Time) {
	for s.up && s.err == nil {
		next := s.settle()
		if !s.up || s.err != nil || next.After(t) {
			break
		}
		switch r := s.rng.Float64(); { // a service that runs late, within the misfire grace
		case r < 0.1:
			next = next.Add(s.between(0, 3*time.Second))
		case r < 0.13:
			next = next.Add(s.between(3*time.Second, 30*time.Second))
		}
		if next.After(t) {
			next = t
		}
		s.clk.Set(next)
	}
	s.clk.Set(t)
}

// settle runs the services' rounds due at the clock's reading, and those they wake, and
// returns when the next is due. The invariants are checked after each step whose rounds
// changed a run (the engine's Changes fired: every service tells of what it changed
// through it): a round that changed nothing, such as the idle rescuer's every lease TTL,
// still writes (and may crash), but leaves nothing new to check.
func (s *sim) settle() time.Time {
	for range 200 {
		changed := s.eng.Changes()
		next, err := s.eng.Step(s.ctx)
		if s.afterCall() {
			return time.Time{}
		}
		if err != nil {
			s.fail("a service round failed: %v", err)
			return time.Time{}
		}
		s.checkAfter(changed, false)
		if next.After(s.clk.Now()) {
			s.checks.settled(s.clk.Now())
			return next
		}
	}
	s.fail("the services never settle: one of them is due again after every round")
	return time.Time{}
}

// writes counts the store writes of every server process so far.
func (s *sim) writes() int {
	if s.st == nil {
		return s.writesDone
	}
	return s.writesDone + s.st.writes
}

// checkAfter checks the invariants after a step that wrote to the store, when the engine
// told of a change to a run (changed, its Changes channel taken before the step, fired) or
// when force (a client's request) says so. A step that wrote without changing a run (a
// heartbeat, an empty lease poll, an idle service round) leaves nothing new to check; the
// next check sees whatever it did.
func (s *sim) checkAfter(changed <-chan struct{}, force bool) {
	w := s.writes()
	if !s.up || w == s.lastChecked || s.err != nil {
		return
	}
	if !force && changed != nil {
		select {
		case <-changed:
		default:
			return
		}
	}
	s.lastChecked = w
	s.checks.check()
}

// afterCall notices a crash at the last engine call (whatever the engine answered) and
// takes the process down; it reports whether it did.
func (s *sim) afterCall() bool {
	if s.st == nil || !s.st.dead || !s.up {
		return false
	}
	s.crash()
	return true
}

// startServer starts a server process: a store opened on the database, a crash point, an
// engine, and its first services' rounds (which win the lead and repair).
func (s *sim) startServer() {
	if s.up {
		return // quiescing restarted it already
	}
	inner, err := s.cfg.Open(s.ctx)
	if err != nil {
		s.fail("open the store: %v", err)
		return
	}
	s.incarnation++
	cs := &crashStore{inner: inner}
	if !s.quiescing {
		cs.crashAt = 1 + s.rng.IntN(400)
		cs.mode = crashMode(s.rng.IntN(2))
	}
	s.st = cs
	s.eng = engine.New(engine.Config{
		Store:     cs,
		Clock:     s.clk,
		Logger:    slog.New(slog.DiscardHandler),
		LeaseTTL:  leaseTTL,
		Rand:      s.erng.Float64,
		CronLead:  cronLead,
		ServerID:  "sim-server",
		LeaderTTL: leaderTTL,
		Stepped:   true,
		NewID:     func(time.Time) string { return s.newID("r") },
	})
	if err := s.eng.Start(s.ctx); err != nil {
		s.fail("start the engine: %v", err)
		return
	}
	s.up = true
	if cs.crashAt > 0 {
		s.logf("server", "start #%d (crashes at its write %d, %s it commits)", s.incarnation, cs.crashAt, cs.mode)
	} else {
		s.logf("server", "start #%d (no crash)", s.incarnation)
	}
}

// crash ends the server process at its crash point: the engine and all it held are
// dropped, the store is closed, and a restart is scheduled.
func (s *sim) crash() {
	s.stats.Crashes++
	s.logf("server", "CRASH #%d at write %d (%s, %s it committed)", s.incarnation, s.st.writes, s.st.crashOp, s.st.mode)
	s.up = false
	s.checkWrites() // the write that crashed may have committed
	s.eng.Stop()
	if err := s.st.Close(); err != nil {
		s.fail("close the crashed store: %v", err)
	}
	s.writesDone += s.st.writes
	s.st, s.eng = nil, nil
	for _, w := range s.workers {
		w.serverDown()
	}
	var down time.Duration
	switch r := s.rng.Float64(); { // long ones make cron instants missed: misfires
	case r < 0.4:
		down = s.between(0, 5*time.Second)
	case r < 0.65:
		down = s.between(5*time.Second, 5*time.Minute)
	case r < 0.9:
		down = s.between(5*time.Minute, 40*time.Minute)
	default:
		down = s.between(40*time.Minute, 3*time.Hour)
	}
	s.at(down, "server restart", s.startServer)
}

// checkWrites checks the store as the crashed process left it, reading it directly.
func (s *sim) checkWrites() {
	if w := s.writes(); w != s.lastChecked && s.err == nil {
		s.lastChecked = w
		s.checks.check()
	}
}

// call runs an engine call for a client or worker: errCrashed (and a crash noticed) when
// the server process died at it, errDown when it is down.
func (s *sim) call(f func() error) error {
	if !s.up {
		return errDown
	}
	err := f()
	if s.afterCall() {
		return errCrashed
	}
	return err
}

// The failures a caller of the server sees when the process is gone: no answer.
var (
	errDown    = errors.New("server down: connection refused")
	errCrashed = errors.New("server died: connection reset")
)

// unreachable reports whether err is the server's absence rather than an answer.
func unreachable(err error) bool { return errors.Is(err, errDown) || errors.Is(err, errCrashed) }

// quiesce ends the chaos and lets everything finish: no more crashes, lost or duplicated
// messages, client requests or worker deaths; the server and every worker up, paused
// queues resumed, every attempt run to success; then the clock runs on until every run
// that existed when it began is final (or gives up after a simulated day).
func (s *sim) quiesce() {
	s.quiescing = true
	s.logf("sim", "QUIESCE: no more chaos")
	if s.up {
		s.st.crashAt = 0
	}
	s.client.quiesce()
	for _, w := range s.workers {
		w.quiesce()
	}
	if !s.up {
		s.startServer()
	}
	if s.err != nil {
		return
	}
	s.client.resumeQueues()
	pending := s.checks.activeRuns()
	deadline := s.clk.Now().Add(24 * time.Hour)
	for s.err == nil && len(pending) > 0 {
		if s.events.Len() == 0 || s.events[0].at.After(deadline) {
			s.advance(deadline)
			break
		}
		s.step()
		if s.stats.Events%50 == 0 {
			pending = s.checks.stillActive(pending)
		}
	}
	if s.err == nil {
		s.checks.quiesced(pending)
	}
}

// event is something that happens at an instant: a client request, a message's delivery, a
// worker's timer, a restart.
type event struct {
	at   time.Time
	seq  uint64
	name string
	do   func()
}

// eventQueue is a heap of events by instant, then by scheduling order.
type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// runLine describes a run's state for the trace.
func runLine(r *model.Run) string {
	if r == nil {
		return "<nil>"
	}
	out := fmt.Sprintf("%s %s", r.ID, r.Status)
	if r.PendingCode != "" {
		out += "(" + string(r.PendingCode) + ")"
	}
	if r.Attempt > 0 {
		out += fmt.Sprintf(" att %d/%d+%d", r.Attempt, r.MaxAttempts, r.Disruptions)
	}
	return out
}
