package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// Defaults for the Config fields left zero.
const (
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultLeaseTTL          = 30 * time.Second
	DefaultPollWait          = 30 * time.Second
	DefaultLeaseGather       = 50 * time.Millisecond
	DefaultDrainTimeout      = 30 * time.Second
	DefaultKillGrace         = 10 * time.Second
	DefaultFlushTimeout      = 10 * time.Second
	DefaultLogChunkBytes     = 64 << 10
	DefaultLogCap            = 10 << 20
	DefaultLogFlushInterval  = 200 * time.Millisecond
)

// Config configures an Agent. Server is required, and so is something to run: Commands or at
// least one handler kind. Zero durations and sizes take the defaults above.
type Config struct {
	Server Server
	// ID names the worker; it stays the same when the agent registers again. Empty: the host
	// name and a random suffix.
	ID     string
	Labels map[string]string
	// Capacity is what the worker offers. Capacity.Slots is how many attempts run at once
	// (default: the number of CPUs); the server fits cpu, memory and gpu to the rest.
	// Capacity.GPU, when GPUs names devices, is their number (0 sets it; another value is an
	// error).
	Capacity apitype.Capacity
	// GPUs are the GPU devices the worker offers, as CUDA_VISIBLE_DEVICES names them (the
	// indices nvidia-smi lists, such as "0" and "1", or GPU UUIDs). Empty: "0" to
	// Capacity.GPU-1. An attempt whose lease needs k GPUs gets the first k free devices in this
	// order for as long as it runs; see the package documentation.
	GPUs []string
	// Handlers maps handler kinds to the Go functions that run them.
	Handlers map[string]Handler
	// Commands says the worker runs command and shell jobs as processes. The fields below up
	// to Guard say how; see Commands in the package documentation.
	Commands bool
	// PassEnv names the variables of the worker's own environment that commands get, beyond
	// PATH and HOME, as names or path.Match patterns of names ("LANG", "LC_*"). Commands
	// start from a clean environment otherwise. Variables starting STINT_ never pass (the
	// worker's and server's tokens are among them), and an entry naming them is an error.
	PassEnv []string
	// AllowCommands, when not empty, are the only executables commands may run: absolute
	// paths or path.Match patterns of them ("/usr/bin/python3", "/opt/jobs/*"), or bare
	// names looked up in the worker's PATH when New is called. A shell job runs /bin/sh. A
	// command outside the list fails its attempt at once, before anything starts.
	AllowCommands []string
	// RunAs names the user (or numeric uid) commands run as, with that user's primary and
	// supplementary groups and HOME. New fails unless the process runs as root and the user
	// exists. Empty: commands run as the worker's user.
	RunAs string
	// WorkDir is where every command attempt gets an empty working directory of its own
	// (its current directory unless the job names one, and its TMPDIR and STINT_WORK_DIR),
	// emptied when the attempt ends: removed with whatever is in it, or kept for a later
	// attempt when left empty. Empty: a temporary directory Run makes and removes.
	WorkDir string
	// Limits applies a job's cpu and memory requirements to its processes where the host
	// allows: see Limits in the package documentation.
	Limits bool
	// Cgroup is a cgroup v2 directory (Linux) in which every command attempt gets a cgroup
	// of its own: its processes are all killed when it ends, including those that left its
	// process group, and with Limits its memory.max and cpu.max are set. The directory must
	// be writable and hold no processes (a delegated, empty cgroup). Empty: none.
	Cgroup string
	// Guard is the command of a guard process, started by Run, that kills the attempts'
	// processes and removes their working directories if this process dies without doing so
	// (see RunGuard). Empty: none, and only the process each attempt started dies with the
	// agent (Linux: Pdeathsig), not what it started.
	Guard []string

	Logger *slog.Logger
	// Now tells the time (default time.Now); timers use the time package.
	Now func() time.Time

	// HeartbeatInterval and LeaseTTL are used when the server's RegisterResponse does not give
	// them.
	HeartbeatInterval time.Duration
	LeaseTTL          time.Duration
	// PollWait is how long the server may hold a lease poll when nothing is due.
	PollWait time.Duration
	// LeaseGather is how long a worker whose slots were all taken, with runs waiting for it
	// (its last poll got all it asked for), waits for an eighth of its slots to free before
	// it leases for fewer: one lease of many runs costs the server and the store far less a
	// run than many leases of a few (see gatheringLocked). It delays a run by at most this,
	// and only while every slot but a few is busy; meanwhile completion calls are spaced as
	// much (see completionWait). Negative: no wait. Workers with fewer than 16 slots never
	// wait.
	LeaseGather time.Duration
	// DrainTimeout is how long Run lets running attempts finish after its context is done
	// before it stops them; negative waits for ever.
	DrainTimeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL for a process that is stopped, and how
	// long a stopped handler may take to return before its attempt is reported anyway.
	KillGrace time.Duration
	// FlushTimeout bounds how long Run keeps trying to deliver completions once attempts are
	// stopped at the end of a drain.
	FlushTimeout time.Duration

	// LogChunkBytes is the size at which output is cut into a chunk and shipped.
	LogChunkBytes int
	// LogCap is how much output one attempt may ship (default 10 MiB; negative: no cap). The
	// rest is dropped and counted in a marker line.
	LogCap int64
	// LogFlushInterval is how long output may wait in a partial chunk.
	LogFlushInterval time.Duration

	// OnCompleted, when set, is called once for each attempt whose end the server has
	// acknowledged: its completion is accepted, so the run's outcome is durable. It is not
	// called for a completion the server refused (the lease was lost meanwhile: its run went
	// on without this attempt) nor for one the agent could not deliver. Completions are sent
	// in batches, so calls come in bursts, on the goroutine that sends them: keep it short
	// (count, signal) and do not call the agent from it.
	OnCompleted func(Completion)
}

// Completion is the end of an attempt as the server acknowledged it (Config.OnCompleted).
type Completion struct {
	RunID   string
	JobID   string
	JobName string
	Attempt int // 1 for the first attempt of the run
	// Status is how the attempt ended: succeeded, failed, timed_out, cancelled or lost.
	Status   string
	ExitCode *int   // a command's exit code, when it exited
	Error    string // why it did not succeed
}

// Agent is a worker: it registers with a Server, leases runs, executes them, streams their
// output, heartbeats their leases and reports their outcomes. See the package documentation.
type Agent struct {
	cfg   Config
	srv   Server
	log   *slog.Logger
	now   func() time.Time
	kinds []string
	slots int
	gpus  *gpuPool

	// How commands run: set by New (allow, runAs) and by Run before the first attempt.
	allow    *allowList
	runAs    *credential
	work     *workDirs
	starters *starters
	devNull  *os.File // every command's stdin, opened once
	paths    *pathCache
	cgroup   *cgroupParent
	guard    *guard

	regMu      sync.Mutex    // serialises registering
	regGen     atomic.Uint64 // bumped by every successful registration
	id         atomic.Pointer[string]
	session    atomic.Pointer[string] // the session of the last registration (nil before)
	hbInterval atomic.Int64           // time.Duration
	leaseTTL   atomic.Int64           // time.Duration

	mu sync.Mutex
	// attemptParent is the parent of every attempt's context: Run's context without its
	// cancellation, so that a drain lets attempts finish.
	attemptParent context.Context
	attempts      map[string]*attempt // held leases by run id
	used          int                 // slots taken by attempts whose goroutines run
	backlog       []*attempt          // leased beyond the free slots: start when a slot frees
	draining      bool
	poll          pollState
	gather        gatherState

	changed   chan struct{} // cap 1: a lease or slot was released
	stopLease chan struct{} // closed when leasing stops
	drainReq  chan struct{} // closed when the server asks the worker to drain
	drainOnce sync.Once
	stopOnce  sync.Once
	fatal     chan error // cap 1

	killing  atomic.Bool // the drain is over: stop attempts as they arrive
	readBufs sync.Pool   // *[]byte for copying process output
	ship     shipper
	started  atomic.Bool
}

// gatherState is what gatheringLocked keeps between polls.
type gatherState struct {
	room     int         // the room a poll waits for (an eighth of the slots), at least 1
	lastFull bool        // the last answered poll got every run it asked for
	timer    *time.Timer // armed while a poll waits for room
	over     bool        // the timer fired: poll for the room there is
}

// pollState is the outstanding lease poll.
type pollState struct {
	cancel context.CancelFunc // nil when no poll is outstanding
	max    int
	// aborted: cut short to send another (for room) or to drain; kept once the poll
	// returned, until the next one replaces it.
	aborted bool
	began   time.Time // when it was sent (the agent's clock)
}

// New checks cfg and returns an agent ready to Run.
func New(cfg Config) (*Agent, error) {
	if cfg.Server == nil {
		return nil, errors.New("new worker: Server is required")
	}
	if !cfg.Commands && len(cfg.Handlers) == 0 {
		return nil, errors.New("new worker: nothing to run: set Commands or at least one handler")
	}
	kinds := make([]string, 0, len(cfg.Handlers))
	for kind, h := range cfg.Handlers {
		if kind == "" {
			return nil, errors.New("new worker: handler kind must not be empty")
		}
		if h == nil {
			return nil, fmt.Errorf("new worker: handler for kind %q is nil", kind)
		}
		kinds = append(kinds, kind)
	}
	slices.Sort(kinds)
	if cfg.Capacity.Slots < 0 {
		return nil, errors.New("new worker: Capacity.Slots must not be negative")
	}
	if cfg.Capacity.Slots == 0 {
		cfg.Capacity.Slots = runtime.NumCPU()
	}
	gpus, n, err := gpuDevices(slices.Clone(cfg.GPUs), cfg.Capacity.GPU)
	if err != nil {
		return nil, fmt.Errorf("new worker: %w", err)
	}
	cfg.GPUs, cfg.Capacity.GPU = gpus, n
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"HeartbeatInterval", &cfg.HeartbeatInterval, DefaultHeartbeatInterval},
		{"LeaseTTL", &cfg.LeaseTTL, DefaultLeaseTTL},
		{"PollWait", &cfg.PollWait, DefaultPollWait},
		{"KillGrace", &cfg.KillGrace, DefaultKillGrace},
		{"FlushTimeout", &cfg.FlushTimeout, DefaultFlushTimeout},
		{"LogFlushInterval", &cfg.LogFlushInterval, DefaultLogFlushInterval},
	} {
		if *d.v < 0 {
			return nil, fmt.Errorf("new worker: %s must not be negative", d.name)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if cfg.LeaseGather == 0 {
		cfg.LeaseGather = DefaultLeaseGather
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.LogChunkBytes < 0 {
		return nil, errors.New("new worker: LogChunkBytes must not be negative")
	}
	if cfg.LogChunkBytes == 0 {
		cfg.LogChunkBytes = DefaultLogChunkBytes
	}
	switch {
	case cfg.LogCap == 0:
		cfg.LogCap = DefaultLogCap
	case cfg.LogCap < 0:
		cfg.LogCap = math.MaxInt64
	}
	if err := checkPassEnv(cfg.PassEnv); err != nil {
		return nil, fmt.Errorf("new worker: %w", err)
	}
	allow, err := newAllowList(cfg.AllowCommands)
	if err != nil {
		return nil, fmt.Errorf("new worker: %w", err)
	}
	var runAs *credential
	if cfg.RunAs != "" {
		if runAs, err = lookupRunAs(cfg.RunAs); err != nil {
			return nil, fmt.Errorf("new worker: %w", err)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ID == "" {
		cfg.ID = defaultID()
	}
	a := &Agent{
		cfg:       cfg,
		srv:       cfg.Server,
		log:       cfg.Logger,
		now:       cfg.Now,
		kinds:     kinds,
		slots:     cfg.Capacity.Slots,
		gather:    gatherState{room: max(1, min(cfg.Capacity.Slots/8, apitype.MaxLeaseBatch))},
		gpus:      newGPUPool(cfg.GPUs),
		allow:     allow,
		runAs:     runAs,
		attempts:  make(map[string]*attempt),
		changed:   make(chan struct{}, 1),
		stopLease: make(chan struct{}),
		drainReq:  make(chan struct{}),
		fatal:     make(chan error, 1),
	}
	a.ship.init()
	id := cfg.ID
	a.id.Store(&id)
	a.hbInterval.Store(int64(cfg.HeartbeatInterval))
	a.leaseTTL.Store(int64(cfg.LeaseTTL))
	return a, nil
}

// defaultID is the host name and a random suffix, so that two agents on one host differ.
func defaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// ID returns the worker's id (as the server registered it, once Run has registered).
func (a *Agent) ID() string { return *a.id.Load() }

// Session returns the worker's session: "" before it registered.
func (a *Agent) Session() string {
	if s := a.session.Load(); s != nil {
		return *s
	}
	return ""
}

// heldRefs returns the leases the agent holds, and their attempts in the same order.
func (a *Agent) heldRefs() ([]apitype.LeaseRef, []*attempt) {
	a.mu.Lock()
	defer a.mu.Unlock()
	refs := make([]apitype.LeaseRef, 0, len(a.attempts))
	ats := make([]*attempt, 0, len(a.attempts))
	for _, at := range a.attempts {
		refs = append(refs, apitype.LeaseRef{RunID: at.lease.RunID, Token: at.lease.Token})
		ats = append(ats, at)
	}
	return refs, ats
}

// Run registers the worker and serves until ctx is done, the server asks the worker to drain,
// or a fatal error occurs. Either way it drains before it returns: it stops leasing, lets
// running attempts finish (for at most DrainTimeout once ctx is done), stops those still
// running and reports them as lost, and delivers the outstanding logs and completions (for at
// most FlushTimeout after that). It returns nil after a drain, or the fatal error: a
// registration the server refused for good. Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("run worker: Run was already called")
	}
	if a.cfg.Commands {
		if err := a.openCommands(); err != nil {
			return fmt.Errorf("run worker: %w", err)
		}
		defer a.closeCommands()
	}
	if err := a.register(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.mu.Lock()
	a.attemptParent = context.WithoutCancel(ctx)
	a.mu.Unlock()
	// The loops outlive ctx: a draining worker still heartbeats its leases and ships what its
	// attempts produce.
	rpc, stopRPC := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { a.heartbeatLoop(rpc) })
	wg.Go(func() { a.expireLoop(rpc) })
	wg.Go(func() { a.shipLoop(rpc) })
	wg.Go(func() { a.leaseLoop(rpc) })
	err := a.supervise(ctx)
	stopRPC()
	wg.Wait()
	a.leave(context.WithoutCancel(ctx))
	return err
}

// leave tells the server the session ends, so that the worker is listed as drained (not
// lost a lease TTL later) and no pending reason counts it meanwhile. One try, for at most
// FlushTimeout: a worker that cannot say so is called lost once its heartbeats stop.
func (a *Agent) leave(ctx context.Context) {
	session := a.Session()
	if session == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.FlushTimeout)
	defer cancel()
	if err := a.srv.Leave(ctx, a.ID(), &apitype.LeaveRequest{Session: session}); err != nil {
		a.log.Warn("could not tell the server the worker leaves", "err", err)
		return
	}
	a.log.Info("worker left")
}

// supervise waits for the reason to stop, then drains.
func (a *Agent) supervise(ctx context.Context) error {
	var fatal error
	ctxDone := ctx.Done()
	select {
	case <-ctxDone:
		a.log.Info("worker draining", "reason", "shutdown")
	case <-a.drainReq:
		a.log.Info("worker draining", "reason", "server request")
	case fatal = <-a.fatal:
		a.log.Error("worker stopping", "err", fatal)
	}
	a.stopLeasing()

	var drainDeadline, flushDeadline <-chan time.Time
	killed := false
	kill := func() {
		killed = true
		drainDeadline = nil
		a.killing.Store(true)
		a.stopAll(reasonShutdown)
		flushDeadline = time.After(a.cfg.KillGrace + a.cfg.FlushTimeout)
	}
	switch {
	case fatal != nil:
		kill()
	case ctx.Err() != nil:
		ctxDone = nil
		if a.cfg.DrainTimeout >= 0 {
			drainDeadline = time.After(a.cfg.DrainTimeout)
		}
	}
	for {
		if a.drained(killed) {
			a.log.Info("worker drained")
			return fatal
		}
		select {
		case <-a.changed:
		case <-ctxDone:
			// The server asked for a drain, and now the caller wants out too.
			ctxDone = nil
			if a.cfg.DrainTimeout >= 0 {
				drainDeadline = time.After(a.cfg.DrainTimeout)
			}
		case <-drainDeadline:
			a.log.Warn("drain timeout: stopping running attempts", "timeout", a.cfg.DrainTimeout)
			kill()
		case err := <-a.fatal:
			if fatal == nil {
				fatal = err
				a.log.Error("worker stopping", "err", err)
			}
			if !killed {
				kill()
			}
		case <-flushDeadline:
			a.mu.Lock()
			n := len(a.attempts)
			a.mu.Unlock()
			a.log.Error("giving up on undelivered completions", "leases", n)
			return fatal
		}
	}
}

// drained reports whether nothing is left to wait for: no lease held and, unless attempts
// were already stopped, no attempt still running.
func (a *Agent) drained(killed bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if killed {
		return len(a.attempts) == 0
	}
	return len(a.attempts) == 0 && a.used == 0
}

// requestDrain records the server's request to drain.
func (a *Agent) requestDrain() {
	a.drainOnce.Do(func() { close(a.drainReq) })
}

// failFatal hands a fatal error to Run.
func (a *Agent) failFatal(err error) {
	select {
	case a.fatal <- err:
	default:
	}
}

// stopLeasing stops the lease loop and aborts its outstanding poll.
func (a *Agent) stopLeasing() {
	a.stopOnce.Do(func() { close(a.stopLease) })
	a.mu.Lock()
	a.draining = true
	a.abortPollLocked()
	a.mu.Unlock()
	a.ship.signal() // completions held while gathering go now
}

// stopAll stops every attempt that holds a lease.
func (a *Agent) stopAll(r reason) {
	a.mu.Lock()
	ats := make([]*attempt, 0, len(a.attempts))
	for _, at := range a.attempts {
		ats = append(ats, at)
	}
	a.mu.Unlock()
	for _, at := range ats {
		at.stop(r)
	}
}

// signalChanged wakes supervise to check whether the drain is done.
func (a *Agent) signalChanged() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

func (a *Agent) abortPollLocked() {
	if a.poll.cancel != nil && !a.poll.aborted {
		a.poll.aborted = true
		a.poll.cancel()
	}
}

// roomLocked returns how many runs the next lease poll asks for: the free slots, but no more
// than keeps the leases held (running, waiting for a slot, or ended with their completions
// not yet delivered) within leaseBound times the slots and within apitype.MaxHeldLeases
// (what a heartbeat may list), and at most one lease batch. A slot frees when its attempt's
// goroutine returns, before the completion reaches the server, so that a short attempt's
// slot does not idle for the server's commit; the bound keeps a worker whose completions
// cannot be delivered from leasing ever more.
func (a *Agent) roomLocked() int {
	held := min(HeldLeasesPerSlot*a.slots, apitype.MaxHeldLeases)
	free := min(a.slots-a.used-len(a.backlog), held-len(a.attempts))
	return min(max(free, 0), apitype.MaxLeaseBatch)
}

// HeldLeasesPerSlot times its slots is how many leases a worker holds at most: running,
// waiting for a slot, or ended with their completions not yet delivered. Short attempts
// end a lease batch's worth of runs before the completions of the batch before are
// delivered: at twice its slots, a worker of 1,000 slots running no-op handlers waited
// for each completion call before it leased again, and a burst of 10,000 due runs started
// about 10% later (BENCHMARKS.md, "Room to lease ahead of completions").
const HeldLeasesPerSlot = 4

// wakePollLocked re-issues a lease poll that was sent with Max 0 now that there is room,
// unless it is gathering room (gatheringLocked).
func (a *Agent) wakePollLocked() {
	if a.poll.max != 0 || a.poll.cancel == nil {
		return
	}
	if room := a.roomLocked(); room > 0 && !a.gatheringLocked(room) {
		a.abortPollLocked()
	}
}

// gatheringLocked reports whether a poll for room runs waits for more room first, and arms
// the timer that ends the wait. A worker that had every slot taken with runs still waiting
// for it (its last poll got all it asked for) would otherwise lease as each slot frees, a
// few runs at a time, and the server's cost of a lease and of a completion is mostly per
// call: on PostgreSQL, 112 µs of the database's CPU a run in calls of 20 runs against 80 in
// calls of 100 (BenchmarkLeaseCompleteCPU). So it waits until an eighth of its slots are
// free, or Config.LeaseGather has passed.
func (a *Agent) gatheringLocked(room int) bool {
	g := &a.gather
	if room == 0 || room >= g.room || !g.lastFull || g.over || a.cfg.LeaseGather < 0 {
		return false
	}
	if g.timer == nil {
		g.timer = time.AfterFunc(a.cfg.LeaseGather, func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			g.timer, g.over = nil, true
			a.wakePollLocked()
		})
	}
	return true
}

// goroutineDone frees the slot of an attempt whose goroutine has returned, and starts
// backlogged attempts in it.
func (a *Agent) goroutineDone() {
	a.mu.Lock()
	a.used--
	for len(a.backlog) > 0 && a.used < a.slots {
		at := a.backlog[0]
		a.backlog[0] = nil
		a.backlog = a.backlog[1:]
		a.used++
		go at.run()
	}
	a.wakePollLocked()
	a.mu.Unlock()
	a.signalChanged()
}

// releaseLeases forgets the leases of ats: their completions were delivered, or the leases
// were lost.
func (a *Agent) releaseLeases(ats ...*attempt) {
	a.mu.Lock()
	for _, at := range ats {
		a.releaseLeaseLocked(at)
	}
	a.wakePollLocked()
	a.mu.Unlock()
	a.signalChanged()
}

// releaseLeaseLocked forgets at's lease, once.
func (a *Agent) releaseLeaseLocked(at *attempt) {
	if at.leaseReleased.CompareAndSwap(false, true) && a.attempts[at.lease.RunID] == at {
		delete(a.attempts, at.lease.RunID)
	}
}

// register registers the worker, retrying transient errors until ctx is done. A permanent
// error is returned.
func (a *Agent) register(ctx context.Context) error {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	return a.registerLocked(ctx)
}

// registerLocked registers, re-attaching with the session and the leases the agent holds
// when it has registered before (its process did not restart, so its attempts run on).
func (a *Agent) registerLocked(ctx context.Context) error {
	req := &apitype.RegisterRequest{
		ID:       a.ID(),
		Labels:   a.cfg.Labels,
		Capacity: a.cfg.Capacity,
		Handlers: a.kinds,
		Commands: a.cfg.Commands,
	}
	var b backoff
	for {
		var ats []*attempt
		if req.Session = a.Session(); req.Session != "" {
			req.Held, ats = a.heldRefs()
		}
		sent := a.now()
		// A registration once sent is let finish (for at most FlushTimeout): the server may
		// already have made the session, and a worker stopped meanwhile must know it to say
		// it leaves, or it is listed as active until its heartbeats are missed.
		call, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.FlushTimeout)
		resp, err := a.srv.Register(call, req)
		cancel()
		if err == nil {
			a.registered(resp)
			if resp.Resumed {
				a.applyLeaseAnswer(ats, resp.Lost, resp.Ended)
				a.applyPushes(nil, resp.Cancel, false)
				// The server renewed the leases it kept, no earlier than sent.
				a.renewed(ats, sent)
			} else if len(ats) > 0 {
				// A new session: the store ended what the old one held.
				a.log.Warn("registered with a new session: held attempts are lost", "leases", len(ats))
				lost := make([]string, len(ats))
				for i, at := range ats {
					lost[i] = at.lease.RunID
				}
				a.applyLeaseAnswer(ats, lost, nil)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isIDInUse(err) {
			// Another session of this id is live: this process is its restart (a killed
			// worker's session lasts a lease TTL) or a second process with the same id.
			// The server hands the id over once that session stops heartbeating.
			d := b.next()
			a.log.Warn("worker id in use by a live session; waiting for it to end (a token bound to this id takes it over at once)",
				"id", req.ID, "err", err, "in", d)
			if !sleep(ctx, d, nil) {
				return ctx.Err()
			}
			continue
		}
		if isPermanent(err) {
			return fmt.Errorf("register worker: %w", err)
		}
		d := b.next()
		a.log.Warn("register worker failed; retrying", "err", err, "in", d)
		if !sleep(ctx, d, nil) {
			return ctx.Err()
		}
	}
}

func (a *Agent) registered(resp *apitype.RegisterResponse) {
	if resp.Worker != nil && resp.Worker.ID != "" {
		id := resp.Worker.ID
		a.id.Store(&id)
	}
	hb, ttl := resp.HeartbeatInterval.Std(), resp.LeaseTTL.Std()
	if hb <= 0 {
		hb = a.cfg.HeartbeatInterval
	}
	if ttl <= 0 {
		ttl = a.cfg.LeaseTTL
	}
	if ttl <= hb {
		a.log.Warn("lease TTL is not longer than the heartbeat interval", "lease_ttl", ttl, "heartbeat_interval", hb)
	}
	a.hbInterval.Store(int64(hb))
	a.leaseTTL.Store(int64(ttl))
	session := resp.Session
	a.session.Store(&session)
	a.regGen.Add(1)
	if resp.Resumed {
		a.log.Info("worker re-attached", "id", a.ID(), "session", resp.Session, "lost", len(resp.Lost))
		return
	}
	a.log.Info("worker registered", "id", a.ID(), "session", resp.Session,
		"heartbeat_interval", hb, "lease_ttl", ttl, "slots", a.slots, "gpus", a.cfg.GPUs)
}

// reregister registers again after the server said it does not know the worker, unless
// another loop did so since gen was read. A permanent error is fatal.
func (a *Agent) reregister(ctx context.Context, gen uint64) {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	if a.regGen.Load() != gen {
		return
	}
	a.log.Warn("server does not know this worker; registering again", "id", a.ID())
	if err := a.registerLocked(ctx); err != nil && ctx.Err() == nil {
		a.failFatal(err)
	}
}

// applyLeaseAnswer acts on a heartbeat's (or a re-attach's) answer about the leases of ats
// it listed: a lost lease's attempt is killed; an ended one (its completion was recorded)
// is forgotten. An answer about a run whose attempt is not one of ats (it was re-leased
// since) changes nothing.
func (a *Agent) applyLeaseAnswer(ats []*attempt, lost, ended []string) {
	if len(lost) == 0 && len(ended) == 0 {
		return
	}
	byRun := make(map[string]*attempt, len(ats))
	for _, at := range ats {
		byRun[at.lease.RunID] = at
	}
	for _, id := range lost {
		if at := byRun[id]; at != nil && a.held(id) == at {
			a.log.Warn("lease lost: killing attempt", "run_id", id, "attempt", at.lease.Attempt)
			at.markLost()
		}
	}
	for _, id := range ended {
		if at := byRun[id]; at != nil && at.completed.Load() {
			a.releaseLeases(at) // the completion's answer may still be on its way
		}
	}
}

// applyPushes acts on what the server pushed on a lease poll or a heartbeat answer.
func (a *Agent) applyPushes(lost, cancel []string, drain bool) {
	if len(lost) > 0 || len(cancel) > 0 {
		for _, id := range lost {
			if at := a.held(id); at != nil {
				a.log.Warn("lease lost: killing attempt", "run_id", id, "attempt", at.lease.Attempt)
				at.markLost()
			}
		}
		for _, id := range cancel {
			if at := a.held(id); at != nil {
				at.stop(reasonCancel)
			}
		}
	}
	if drain {
		a.requestDrain()
	}
}

func (a *Agent) held(runID string) *attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.attempts[runID]
}
