package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// workerConn is what this server knows of a worker session it serves: what it can run (a
// copy of the session in the store, loaded when the worker registered with another server)
// and what to push to its next long poll. Guarded by Engine.mu.
type workerConn struct {
	session   string
	handlers  []string
	commands  bool
	cancel    []string
	lost      []string // runs whose lease expired: the worker kills them and does not complete them
	drain     bool
	events    *broadcast
	lastLease time.Time // when its last lease transaction began
	lastFull  bool      // its last lease took all it asked for: more work may be waiting
}

// ErrUnknownWorker answers Lease and Heartbeat from a worker whose session neither this
// server nor the store knows (or, from a worker that names no session, one that has not
// registered with this server): the worker registers again. It is a model.ErrNotFound.
var ErrUnknownWorker = fmt.Errorf("unknown worker: %w", model.ErrNotFound)

// RegisterParams is what a worker tells the server about itself when it registers.
type RegisterParams struct {
	ID       string
	Labels   map[string]string
	Capacity model.Capacity
	Handlers []string // the handler kinds it runs
	Commands bool     // whether it runs commands
	// Resume is the session the worker had, when it re-attaches without having restarted
	// (its server died or forgot it), and Held the leases it holds. When Resume is the
	// store's session for the worker, the worker keeps it: the leases of Held that are
	// still its own are renewed, and its other attempts are left to expire (a lease answer
	// may be on its way to it); otherwise Register starts a new session as for a new
	// process, and the attempts of the old one end lost.
	Resume string
	Held   []store.LeaseRef
	// Takeover says the caller proved it is this worker (a token bound to its id, an admin,
	// or the server's own local worker): a new session then replaces one that is still live.
	// Without it, an id whose session heartbeated within the lease TTL is refused
	// (model.ErrConflict, scheduler.SessionHeld): another process may not end its attempts.
	Takeover bool
}

// Registration answers Register: the worker's row and the terms of its session.
type Registration struct {
	Worker            *model.Worker
	Session           string
	HeartbeatInterval time.Duration
	LeaseTTL          time.Duration
	// Resumed says the worker kept its session (RegisterParams.Resume). Lost then lists the
	// held leases it did not keep (kill those attempts), Ended those whose end was already
	// recorded, and Cancel those asked to cancel.
	Resumed bool
	Lost    []string
	Ended   []string
	Cancel  []string
}

// Register records a worker and starts a new session for it, or keeps its session when it
// re-attaches (see RegisterParams.Resume). Attempts held by an earlier session of the same
// worker id are ended as lost at once: that process is gone. A live earlier session is
// replaced only with RegisterParams.Takeover.
func (e *Engine) Register(ctx context.Context, p *RegisterParams) (*Registration, error) {
	now := e.clock.Now()
	w, rescued, err := e.store.RegisterWorker(ctx, &store.RegisterWorkerParams{
		ID:        p.ID,
		Session:   id.Token(),
		Labels:    p.Labels,
		Capacity:  p.Capacity,
		Handlers:  p.Handlers,
		Commands:  p.Commands,
		Resume:    p.Resume,
		LiveSince: now.Add(-e.cfg.LeaseTTL),
		Takeover:  p.Takeover,
		Now:       now,
		Rand:      e.cfg.Rand,
	})
	if err != nil {
		return nil, fmt.Errorf("register worker %s: %w", p.ID, err)
	}
	reg := &Registration{
		Worker:            w,
		Session:           w.Session,
		HeartbeatInterval: e.cfg.HeartbeatInterval,
		LeaseTTL:          e.cfg.LeaseTTL,
		Resumed:           p.Resume != "" && w.Session == p.Resume,
	}
	if reg.Resumed && len(p.Held) > 0 {
		// Renew the kept leases now, and tell the worker which of the others to kill.
		hb, err := e.beat(ctx, store.Beat{WorkerID: p.ID, Session: w.Session, Held: p.Held})
		if err != nil {
			return nil, fmt.Errorf("register worker %s: renew held leases: %w", p.ID, err)
		}
		reg.Lost, reg.Ended, reg.Cancel = hb.Lost, hb.Ended, hb.Cancel
	}
	e.attach(w)
	if len(rescued) > 0 { // a new session: a re-attach ends no attempt
		e.obs.WorkerRestarted(rescued)
		e.obs.Ended(rescued)
		e.log.Warn("worker restarted: its attempts were lost", "worker", p.ID, "runs", len(rescued))
		e.wakeFor(rescued)
	}
	if reg.Resumed {
		e.log.Info("worker re-attached", "worker", p.ID, "kept", len(p.Held)-len(reg.Lost)-len(reg.Ended), "lost", len(reg.Lost))
	}
	return reg, nil
}

// attach makes this server serve w's session, replacing what it held of the worker.
func (e *Engine) attach(w *model.Worker) *workerConn {
	c := &workerConn{
		session:  w.Session,
		handlers: slices.Clone(w.Handlers),
		commands: w.Commands,
		drain:    w.State == model.WorkerDraining,
		events:   newBroadcast(),
	}
	e.mu.Lock()
	old := e.workers[w.ID]
	e.workers[w.ID] = c
	e.mu.Unlock()
	if old != nil {
		old.events.Notify() // release a long poll of the previous session
	}
	return c
}

// conn returns the session this server serves for workerID. A worker that names its
// session is served whichever server it registered with: a session this server does not
// hold (or holds an older one of) is loaded from the store. ErrUnknownWorker when the
// session is not the worker's current one, or when the worker names none and did not
// register here.
func (e *Engine) conn(ctx context.Context, workerID, session string) (*workerConn, error) {
	e.mu.Lock()
	c := e.workers[workerID]
	e.mu.Unlock()
	if c != nil && (session == "" || c.session == session) {
		return c, nil
	}
	if session == "" {
		return nil, ErrUnknownWorker
	}
	w, err := e.store.GetWorker(ctx, &store.GetWorkerParams{ID: workerID})
	if errors.Is(err, model.ErrNotFound) || err == nil && (w.Session != session || w.State == model.WorkerDrained) {
		return nil, ErrUnknownWorker // a session that left (Leave) is over too
	}
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	e.log.Info("serving a worker session registered elsewhere", "worker", workerID)
	return e.attach(w), nil
}

// LeaseParams is one long poll of a worker.
type LeaseParams struct {
	// Session is the worker's session (empty: the one it registered with this server).
	Session string
	Max     int // runs the worker can take now; zero asks only for pushes (cancel, lost, drain)
	// Wait is how long to hold the poll while there is nothing to answer, at most
	// Config.MaxLeaseWait (LongestLeaseWait: that long). Zero answers at once.
	Wait time.Duration
}

// LongestLeaseWait as LeaseParams.Wait holds a poll for as long as the engine allows.
const LongestLeaseWait time.Duration = math.MaxInt64

// LeaseResult answers Lease: the runs leased and what is pushed to the worker.
type LeaseResult struct {
	Leases []*model.Lease
	Cancel []string // runs asked to cancel: stop them and complete them as cancelled
	Lost   []string // runs whose lease expired: kill them and do not complete them
	Drain  bool     // the worker was asked to drain
}

// Lease hands a worker up to p.Max runs, holding the request until work is there, the
// worker has something pushed to it, or the wait ends.
func (e *Engine) Lease(ctx context.Context, workerID string, p *LeaseParams) (*LeaseResult, error) {
	w, err := e.conn(ctx, workerID, p.Session)
	if err != nil {
		return nil, fmt.Errorf("lease for %s: %w", workerID, err)
	}
	wait := min(p.Wait, e.cfg.MaxLeaseWait)
	var deadline <-chan time.Time
	if wait > 0 {
		t := e.clock.NewTimer(wait)
		defer t.Stop()
		deadline = t.C()
	}
	resp := &LeaseResult{}
	for {
		var held time.Time // see store.Leased.HeldUntil
		workCh := e.work.Wait()
		e.mu.Lock()
		if e.workers[workerID] != w { // re-registered: this poll belongs to a dead session
			e.mu.Unlock()
			return resp, nil
		}
		evCh := w.events.Wait()
		resp.Cancel, w.cancel = w.cancel, nil
		resp.Lost, w.lost = w.lost, nil
		resp.Drain = w.drain
		handlers, commands := w.handlers, w.commands
		e.mu.Unlock()

		if p.Max > 0 && !resp.Drain {
			if d := e.leaseSpacing(w); d > 0 && wait > 0 {
				// Leased a moment ago: let more work arrive, and take it in one transaction.
				t := e.clock.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return resp, nil
				case <-e.stop:
					t.Stop()
					return resp, nil
				case <-t.C():
				}
			}
			now := e.clock.Now()
			leased, err := e.store.LeaseRuns(ctx, &store.LeaseRunsParams{
				WorkerID:    workerID,
				Max:         p.Max,
				LeaseTTL:    e.cfg.LeaseTTL,
				Handlers:    handlers,
				Commands:    commands,
				Now:         now,
				BestFitHold: e.cfg.BestFitHold,
				LiveSince:   now.Add(-e.cfg.LeaseTTL),
			})
			if err != nil {
				return nil, fmt.Errorf("lease for %s: %w", workerID, err)
			}
			if len(leased.Leases) < p.Max && e.rateQueues.Load() {
				e.timers.Notify() // a rate-limited queue may have run out of turns: see service.Releaser
			}
			if ctx.Err() != nil && len(leased.Leases) > 0 {
				// The poll's client went away (its worker died or hung up) while these were
				// leased: its answer will reach nobody. End them now, as lost, rather than a
				// lease TTL later.
				e.undelivered(ctx, leased.Leases)
				return nil, fmt.Errorf("lease for %s: %w", workerID, ctx.Err())
			}
			e.mu.Lock()
			w.lastFull = len(leased.Leases) >= p.Max
			e.mu.Unlock()
			resp.Leases = append(resp.Leases, leased.Leases...)
			e.obs.Leased(leased.Leases, now)
			if len(leased.Leases) > 0 {
				e.changes.Notify()
			}
			held = leased.HeldUntil
		}
		if len(resp.Lost) > 0 {
			resp.Lost = e.stillLost(ctx, workerID, resp.Lost)
		}
		if len(resp.Leases) > 0 || len(resp.Cancel) > 0 || len(resp.Lost) > 0 || resp.Drain || wait <= 0 {
			return resp, nil
		}
		// A run left for a better-fitting worker is this worker's too once its hold ends,
		// and nothing else wakes the poll then.
		var heldTimer clock.Timer
		var heldCh <-chan time.Time
		if !held.IsZero() {
			heldTimer = e.clock.NewTimerAt(held)
			heldCh = heldTimer.C()
		}
		e.TestSignals.Parked.Signal(workerID)
		woken := true
		select {
		case <-ctx.Done():
			woken = false
		case <-e.stop:
			woken = false
		case <-deadline:
			woken = false
		case <-workCh:
		case <-evCh:
		case <-heldCh:
		}
		if heldTimer != nil {
			heldTimer.Stop()
		}
		if !woken {
			return resp, nil
		}
	}
}

// undelivered ends, as lost, attempts whose leases were granted to a poll that is gone.
// Ending them is a disruption (see scheduler.Decide): the runs are queued again at once
// without spending their retries.
func (e *Engine) undelivered(ctx context.Context, leases []*model.Lease) {
	cs := make([]store.Completion, len(leases))
	for i, l := range leases {
		cs[i] = store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptLost, Error: scheduler.LeaseUndelivered}
	}
	if _, err := e.Complete(context.WithoutCancel(ctx), cs); err != nil {
		e.log.Warn("ending undelivered leases: they end when their lease runs out", "runs", len(cs), "err", err)
		return
	}
	e.log.Info("leases never delivered: their runs are queued again", "runs", len(cs))
}

// leaseSpacing returns how long w's next lease transaction should wait so that it begins
// LeaseLinger after the previous one, and records that it begins then.
func (e *Engine) leaseSpacing(w *workerConn) time.Duration {
	if e.cfg.LeaseLinger <= 0 {
		return 0
	}
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	d := max(w.lastLease.Add(e.cfg.LeaseLinger).Sub(now), 0)
	if w.lastFull {
		d = 0 // a backlog: nothing to gather by waiting
	}
	w.lastLease = now.Add(d)
	return d
}

// HeartbeatParams are one heartbeat of a worker.
type HeartbeatParams struct {
	// Session is the worker's session. Empty: the one it registered with this server,
	// which must then hold it.
	Session string
	Held    []store.LeaseRef // the leases it holds
}

// HeartbeatResult answers Heartbeat: what the worker is to stop or forget.
type HeartbeatResult struct {
	store.HeartbeatResult
	Drain bool // the worker was asked to drain
}

// Heartbeat renews the leases the worker holds and tells it which to stop. A heartbeat that
// names its session is served from the store alone, whichever server the worker registered
// with; a store error is returned as such (the worker retries), never as a lost lease.
func (e *Engine) Heartbeat(ctx context.Context, workerID string, p *HeartbeatParams) (*HeartbeatResult, error) {
	var local *workerConn
	if p.Session == "" {
		e.mu.Lock()
		local = e.workers[workerID]
		e.mu.Unlock()
		if local == nil {
			return nil, fmt.Errorf("heartbeat from %s: %w", workerID, ErrUnknownWorker)
		}
	}
	res, err := e.beat(ctx, store.Beat{WorkerID: workerID, Session: p.Session, Held: p.Held})
	if errors.Is(err, model.ErrNotFound) {
		return nil, fmt.Errorf("heartbeat from %s: %w", workerID, ErrUnknownWorker)
	}
	if err != nil {
		return nil, fmt.Errorf("heartbeat from %s: %w", workerID, err)
	}
	drain := res.Draining
	if local != nil {
		e.mu.Lock()
		drain = drain || local.drain
		e.mu.Unlock()
	}
	return &HeartbeatResult{HeartbeatResult: *res, Drain: drain}, nil
}

// beat records one heartbeat, group-committed with those of other workers (see
// Config.HeartbeatLinger); an unknown worker or session is model.ErrNotFound.
func (e *Engine) beat(ctx context.Context, b store.Beat) (*store.HeartbeatResult, error) {
	res, err := e.beats.do(ctx, e.stop, []store.Beat{b})
	if err != nil {
		return nil, err
	}
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	return &res[0], nil
}

func (e *Engine) flushHeartbeats(ctx context.Context, beats []store.Beat) ([]store.HeartbeatResult, error) {
	return e.store.Heartbeat(ctx, &store.HeartbeatParams{Beats: beats, LeaseTTL: e.cfg.LeaseTTL, Now: e.clock.Now()})
}

// Leave ends a worker's session at its clean exit: the worker becomes drained, takes no
// more work, and no pending reason counts it. Its attempts still held (a drain that timed
// out) are left to expire and be rescued. ErrUnknownWorker when session is not the
// worker's current one (it registered again since).
func (e *Engine) Leave(ctx context.Context, workerID, session string) error {
	err := e.store.SetWorkerState(ctx, &store.SetWorkerStateParams{ID: workerID, State: model.WorkerDrained, Session: session})
	if errors.Is(err, model.ErrNotFound) {
		return fmt.Errorf("leave of %s: %w", workerID, ErrUnknownWorker)
	}
	if err != nil {
		return fmt.Errorf("leave of %s: %w", workerID, err)
	}
	e.mu.Lock()
	c := e.workers[workerID]
	if c != nil && c.session == session {
		delete(e.workers, workerID)
	}
	e.mu.Unlock()
	if c != nil {
		c.events.Notify() // release a lease poll still held
	}
	return nil
}

// AppendLogs stores log chunks, group-committed, stamped with the time they arrived. It
// returns an error per chunk, in order: nil when stored (or dropped for taking its attempt
// past Config.MaxLogBytes), model.ErrLeaseLost (or model.ErrNotFound) when refused because
// its writer does not hold the attempt's lease (see store.Store.AppendLogs); the other
// chunks are stored.
func (e *Engine) AppendLogs(ctx context.Context, chunks []model.LogChunk) ([]error, error) {
	now := e.clock.Now()
	for i := range chunks {
		chunks[i].CreatedAt = now
	}
	refused, err := e.logs.do(ctx, e.stop, chunks)
	if err != nil {
		return nil, fmt.Errorf("log chunks: %w", err) // the store's error says "append logs"
	}
	return refused, nil
}

func (e *Engine) flushLogs(ctx context.Context, chunks []model.LogChunk) ([]error, error) {
	refused, err := e.store.AppendLogs(ctx, &store.AppendLogsParams{Chunks: chunks, MaxAttemptBytes: e.cfg.MaxLogBytes})
	if err != nil {
		return nil, err
	}
	e.changes.Notify()
	return refused, nil
}

// Complete records the ends of attempts, group-committed; the results are in the order of
// cs. A completion with a stale lease token is refused (its result's Err is
// model.ErrLeaseLost) and changes nothing.
func (e *Engine) Complete(ctx context.Context, cs []store.Completion) ([]store.CompletionResult, error) {
	res, err := e.completes.do(ctx, e.stop, cs)
	if err != nil {
		return nil, fmt.Errorf("complete: %w", err)
	}
	return res, nil
}

func (e *Engine) flushCompletions(ctx context.Context, cs []store.Completion) ([]store.CompletionResult, error) {
	res, err := e.store.CompleteAttempts(ctx, &store.CompleteAttemptsParams{Completions: cs, Now: e.clock.Now(), Rand: e.cfg.Rand})
	if err != nil {
		return nil, err
	}
	var requeued, ended, admitted []*model.Run
	for _, r := range res {
		if r.Err == nil && r.Run != nil {
			ended = append(ended, r.Run)
			if !r.Run.Status.Final() {
				requeued = append(requeued, r.Run)
			}
		}
		requeued = append(requeued, r.Admitted...)
		admitted = append(admitted, r.Admitted...)
	}
	e.wakeFor(requeued)
	e.capacityFreed(ended)
	e.obs.Retried(ended)
	e.obs.Ended(ended)
	e.obs.Ended(admitted) // dependants it skipped
	e.changes.Notify()
	return res, nil
}

// capacityFreed wakes the workers' long polls when attempts that booked capacity ended:
// queued runs that did not fit their worker may fit now, and a worker that still has free
// slots does not ask again on its own.
func (e *Engine) capacityFreed(ended []*model.Run) {
	for _, r := range ended {
		if r.Requirements.CPU > 0 || r.Requirements.MemoryMB > 0 || r.Requirements.GPU > 0 {
			e.work.Notify()
			return
		}
	}
}

// stillLost returns the runs of lost (whose leases the rescuer ended, to push to workerID)
// that workerID does not hold again. A run leased to it once more since, in this answer or
// an earlier one, is running there under a new attempt: the push is about the old attempt,
// and a worker that applied it by run id would kill the new one. A run the store cannot say
// is pushed as before.
func (e *Engine) stillLost(ctx context.Context, workerID string, lost []string) []string {
	out := lost[:0]
	for _, id := range lost {
		r, err := e.store.GetRun(ctx, &store.GetRunParams{ID: id})
		if err == nil && r.Status == model.RunRunning && r.WorkerID == workerID {
			continue
		}
		out = append(out, id)
	}
	return out
}
