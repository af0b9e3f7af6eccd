package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/testsignal"
)

// DefaultLeaderTTL is the leader lease's default length: with renewals every quarter of it
// and followers trying as often, a dead leader is replaced in about 1.25 of it.
const DefaultLeaderTTL = time.Second

// ElectorStore is what the Elector asks of the store.
type ElectorStore interface {
	HeartbeatServer(ctx context.Context, p *store.HeartbeatServerParams) error
	TryLead(ctx context.Context, p *store.TryLeadParams) (*model.Leadership, error)
	ResignLead(ctx context.Context, p *store.ResignLeadParams) error
}

// ElectorConfig wires an Elector.
type ElectorConfig struct {
	Store  ElectorStore
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	// ID names this server (the lease's holder); Addr is where it is reached, StartedAt
	// when it started: its row in servers.
	ID        string
	Addr      string
	StartedAt time.Time
	// TTL is the lease's length. Default DefaultLeaderTTL.
	TTL time.Duration
	// RenewEvery is how often the leader renews and a follower tries. Default TTL/4.
	RenewEvery time.Duration
	// RenewDeadline is how long after its last successful renewal (started) the leader
	// keeps acting without another: it steps down on its own clock then, before the lease
	// can expire on the database's. Default TTL*3/4; at most TTL*3/4.
	RenewDeadline time.Duration
	// OnElected is called, on the elector's goroutine, when this server becomes the leader
	// with term; ctx ends when the elector stops.
	OnElected func(ctx context.Context, term int64)
	// OnDeposed is called, on the elector's goroutine, when it stops leading (lost the
	// lease, failed to renew it in time, or stopping).
	OnDeposed func(term int64)
}

// ElectorSignals are the Elector's test signals.
type ElectorSignals struct {
	Elected testsignal.Signal[int64]     // it became the leader with this term (OnElected returned)
	Deposed testsignal.Signal[int64]     // it stopped leading with this term
	Slept   testsignal.Signal[time.Time] // it sleeps until its next try
	Failed  testsignal.Signal[error]     // a store call failed
}

// Elector keeps this server's row in servers fresh and takes part in the election: every
// RenewEvery it asks the store for the leader lease (TryLead), which the leader thereby
// renews. It reports changes through OnElected and OnDeposed. A leader whose renewals fail
// steps down once RenewDeadline has passed since its last success, before its lease
// expires; one that stops resigns the lease so that a follower takes over at once.
type Elector struct {
	base
	TestSignals ElectorSignals

	store            ElectorStore
	id, addr         string
	startedAt        time.Time
	ttl, every, dead time.Duration
	onElected        func(context.Context, int64)
	onDeposed        func(int64)

	leading   bool
	term      int64
	renewed   time.Time // the start of the last successful renewal
	firstDone chan struct{}
}

// NewElector returns an Elector; call Start to run it.
func NewElector(cfg ElectorConfig) *Elector {
	e := &Elector{store: cfg.Store, id: cfg.ID, addr: cfg.Addr, startedAt: cfg.StartedAt,
		ttl: cfg.TTL, every: cfg.RenewEvery, dead: cfg.RenewDeadline,
		onElected: cfg.OnElected, onDeposed: cfg.OnDeposed, firstDone: make(chan struct{})}
	e.base = newBase(commonConfig{name: "elector", clock: cfg.Clock, log: cfg.Logger,
		slept: &e.TestSignals.Slept, failed: &e.TestSignals.Failed})
	if e.ttl <= 0 {
		e.ttl = DefaultLeaderTTL
	}
	if e.every <= 0 {
		e.every = e.ttl / 4
	}
	if limit := e.ttl * 3 / 4; e.dead <= 0 || e.dead > limit {
		e.dead = limit
	}
	if e.onElected == nil {
		e.onElected = func(context.Context, int64) {}
	}
	if e.onDeposed == nil {
		e.onDeposed = func(int64) {}
	}
	return e
}

// Start runs the elector until Stop or ctx's end. It returns once the first try is done,
// so that a server alone on its store leads when Start returns.
func (e *Elector) Start(ctx context.Context) error {
	if err := e.start(ctx, e.loop); err != nil {
		return err
	}
	select {
	case <-e.firstDone:
	case <-ctx.Done():
	}
	return nil
}

func (e *Elector) loop(ctx context.Context) {
	defer e.stop()
	first := true
	for ctx.Err() == nil {
		until, _ := e.Pass(ctx) // never fails: a failed try is logged, and the leader steps down in time
		if first {
			close(e.firstDone)
			first = false
		}
		if !e.sleepUntil(ctx, nil, until) {
			return
		}
	}
}

// Stepper drives the elector from the caller's goroutine instead of Start (see Stepper).
// Stepped, it neither waits for its first try nor resigns the lease: the caller's first Step
// makes the first try.
func (e *Elector) Stepper() *Stepper { return e.stepper(e.Pass) }

// Pass is one try of the elector's loop, in the caller's goroutine (see round), and returns
// when the next is due: RenewEvery after it began, or the leader's renewal deadline when
// that comes first. Its error is always nil: a failed try is logged and signalled.
func (e *Elector) Pass(ctx context.Context) (time.Time, error) {
	started := e.clock.Now()
	e.round(ctx, started)
	until := started.Add(e.every)
	if e.leading && e.renewed.Add(e.dead).Before(until) {
		until = e.renewed.Add(e.dead)
	}
	return until, nil
}

// round is one try: heartbeat the server's row, then ask for the lease.
func (e *Elector) round(ctx context.Context, now time.Time) {
	if e.leading && !now.Before(e.renewed.Add(e.dead)) {
		e.log.Warn("leader lease not renewed in time: stepping down", "term", e.term, "last_renewal", e.renewed)
		e.depose()
	}
	timeout := e.ttl
	if e.leading {
		timeout = e.renewed.Add(e.dead).Sub(now) // no later than the deadline
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := e.store.HeartbeatServer(cctx, &store.HeartbeatServerParams{ID: e.id, Addr: e.addr, StartedAt: e.startedAt, Now: now}); err != nil {
		e.fail(ctx, "server heartbeat", err)
	}
	l, err := e.store.TryLead(cctx, &store.TryLeadParams{Holder: e.id, TTL: e.ttl, Now: now})
	switch {
	case err != nil:
		e.fail(ctx, "try lead", err)
		if e.leading && !e.clock.Now().Before(e.renewed.Add(e.dead)) {
			e.log.Warn("leader lease not renewed in time: stepping down", "term", e.term, "err", err)
			e.depose()
		}
	case l.Holder == e.id:
		if e.leading && l.Term != e.term {
			e.depose() // lost it and won it again in between: a new term, new services
		}
		e.renewed = now
		if !e.leading {
			e.leading, e.term = true, l.Term
			e.log.Info("became leader", "server", e.id, "term", l.Term)
			e.onElected(ctx, l.Term)
			e.TestSignals.Elected.Signal(l.Term)
		}
	default:
		if e.leading {
			e.log.Warn("lost leadership", "server", e.id, "term", e.term, "leader", l.Holder, "leader_term", l.Term)
			e.depose()
		}
	}
}

func (e *Elector) fail(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	e.log.Error(what, "err", err)
	e.failed.Signal(err)
}

// depose stops leading.
func (e *Elector) depose() {
	term := e.term
	e.leading, e.term = false, 0
	e.onDeposed(term)
	e.TestSignals.Deposed.Signal(term)
}

// stop ends the elector's leadership, if any, and gives the lease up so that a follower
// takes over at once.
func (e *Elector) stop() {
	if !e.leading {
		return
	}
	e.depose()
	ctx, cancel := context.WithTimeout(context.Background(), e.ttl)
	defer cancel()
	if err := e.store.ResignLead(ctx, &store.ResignLeadParams{Holder: e.id, Now: e.clock.Now()}); err != nil {
		e.log.Warn("resign leadership", "err", err)
	}
}
