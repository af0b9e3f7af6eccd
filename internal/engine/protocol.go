package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/worker"
)

// workerConn is what this server knows of a worker that registered with it: what it can run
// and what to push to its next long poll. Guarded by Engine.mu.
type workerConn struct {
	handlers  []string
	commands  bool
	cancel    []string
	lost      []string // runs whose lease expired: the worker kills them and does not complete them
	drain     bool
	events    *broadcast
	lastLease time.Time // when its last lease transaction began
}

// ErrUnknownWorker answers protocol calls from a worker that has not registered with this
// server; the worker registers again.
// It is both worker.ErrUnknownWorker (the agent's cue) and model.ErrNotFound (a 404).
var ErrUnknownWorker = fmt.Errorf("%w: %w", worker.ErrUnknownWorker, model.ErrNotFound)

// Register records a worker and starts a new session for it. Attempts held by an earlier
// session of the same worker id are ended as lost at once: that process is gone.
func (e *Engine) Register(ctx context.Context, req *apitype.RegisterRequest) (*apitype.RegisterResponse, error) {
	if req.ID == "" {
		return nil, fmt.Errorf("register worker: %w", &FieldError{Field: "id", Message: "is required"})
	}
	now := e.clock.Now()
	session := id.Token()
	w, rescued, err := e.store.RegisterWorker(ctx, &store.RegisterWorkerParams{
		ID:      req.ID,
		Session: session,
		Labels:  req.Labels,
		Capacity: model.Capacity{
			CPU: req.Capacity.CPU, MemoryMB: req.Capacity.MemoryMB, GPU: req.Capacity.GPU, Slots: req.Capacity.Slots,
		},
		Now:  now,
		Rand: e.cfg.Rand,
	})
	if err != nil {
		return nil, fmt.Errorf("register worker %s: %w", req.ID, err)
	}
	e.mu.Lock()
	old := e.workers[req.ID]
	e.workers[req.ID] = &workerConn{handlers: slices.Clone(req.Handlers), commands: req.Commands, events: newBroadcast()}
	e.mu.Unlock()
	if old != nil {
		old.events.Notify() // release a long poll of the previous session
	}
	if len(rescued) > 0 {
		e.log.Warn("worker restarted: its attempts were lost", "worker", req.ID, "runs", len(rescued))
		e.wakeFor(rescued)
	}
	return &apitype.RegisterResponse{
		Worker:            WorkerToAPI(w),
		Session:           session,
		HeartbeatInterval: apitype.Duration(e.cfg.HeartbeatInterval),
		LeaseTTL:          apitype.Duration(e.cfg.LeaseTTL),
	}, nil
}

// Lease hands a worker up to req.Max runs, holding the request until work is there, the
// worker has something pushed to it, or the wait ends.
func (e *Engine) Lease(ctx context.Context, workerID string, req *apitype.LeaseRequest) (*apitype.LeaseResponse, error) {
	e.mu.Lock()
	w := e.workers[workerID]
	e.mu.Unlock()
	if w == nil {
		return nil, fmt.Errorf("lease for %s: %w", workerID, ErrUnknownWorker)
	}
	wait := e.cfg.MaxLeaseWait
	if req.Wait != nil && req.Wait.Std() < wait {
		wait = req.Wait.Std()
	}
	var deadline <-chan time.Time
	if wait > 0 {
		t := e.clock.NewTimer(wait)
		defer t.Stop()
		deadline = t.C()
	}
	resp := &apitype.LeaseResponse{Leases: []apitype.Lease{}}
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

		if req.Max > 0 && !resp.Drain {
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
				Max:         req.Max,
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
			if len(leased.Leases) < req.Max && e.rateQueues.Load() {
				e.timers.Notify() // a rate-limited queue may have run out of turns: see releaseLoop
			}
			for _, l := range leased.Leases {
				resp.Leases = append(resp.Leases, LeaseToAPI(l))
			}
			if len(leased.Leases) > 0 {
				e.changes.Notify()
			}
			held = leased.HeldUntil
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
	w.lastLease = now.Add(d)
	return d
}

// Heartbeat renews every lease the worker holds and tells it which to stop.
func (e *Engine) Heartbeat(ctx context.Context, workerID string, req *apitype.HeartbeatRequest) (*apitype.HeartbeatResponse, error) {
	held := make([]store.LeaseRef, len(req.Held))
	for i, h := range req.Held {
		held[i] = store.LeaseRef{RunID: h.RunID, Token: h.Token}
	}
	res, err := e.store.Heartbeat(ctx, &store.HeartbeatParams{
		WorkerID: workerID, Held: held, LeaseTTL: e.cfg.LeaseTTL, Now: e.clock.Now(),
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat from %s: %w", workerID, err)
	}
	resp := &apitype.HeartbeatResponse{Lost: res.Lost, Cancel: res.Cancel}
	e.mu.Lock()
	if w := e.workers[workerID]; w != nil {
		resp.Drain = w.drain
	} else {
		e.mu.Unlock()
		return nil, fmt.Errorf("heartbeat from %s: %w", workerID, ErrUnknownWorker)
	}
	e.mu.Unlock()
	return resp, nil
}

// AppendLogs stores log chunks, group-committed.
func (e *Engine) AppendLogs(ctx context.Context, req *apitype.LogChunksRequest) error {
	chunks := make([]model.LogChunk, len(req.Chunks))
	now := e.clock.Now()
	for i, c := range req.Chunks {
		stream := model.LogStream(c.Stream)
		if stream != model.Stdout && stream != model.Stderr {
			return fmt.Errorf("append logs: %w", &FieldError{Field: fmt.Sprintf("chunks[%d].stream", i), Message: "must be stdout or stderr"})
		}
		chunks[i] = model.LogChunk{RunID: c.RunID, Attempt: c.Attempt, Seq: c.Seq, Stream: stream, Data: []byte(c.Data), CreatedAt: now}
	}
	if _, err := e.logs.do(ctx, e.stop, chunks); err != nil {
		return fmt.Errorf("log chunks: %w", err) // the store's error says "append logs"
	}
	return nil
}

func (e *Engine) flushLogs(ctx context.Context, chunks []model.LogChunk) ([]struct{}, error) {
	if err := e.store.AppendLogs(ctx, chunks); err != nil {
		return nil, err
	}
	e.changes.Notify()
	return make([]struct{}, len(chunks)), nil
}

// Complete records the ends of attempts, group-committed. A completion with a stale lease
// token is refused (Accepted false) and changes nothing.
func (e *Engine) Complete(ctx context.Context, req *apitype.CompleteRequest) (*apitype.CompleteResponse, error) {
	cs := make([]store.Completion, len(req.Completions))
	for i, c := range req.Completions {
		st := model.AttemptStatus(c.Status)
		if !st.Valid() {
			return nil, fmt.Errorf("complete: %w", &FieldError{
				Field:   fmt.Sprintf("completions[%d].status", i),
				Message: "must be one of succeeded, failed, timed_out, lost, cancelled",
			})
		}
		cs[i] = store.Completion{RunID: c.RunID, Token: c.Token, Status: st, ExitCode: c.ExitCode, Error: c.Error}
	}
	res, err := e.completes.do(ctx, e.stop, cs)
	if err != nil {
		return nil, fmt.Errorf("complete: %w", err)
	}
	out := &apitype.CompleteResponse{Results: make([]apitype.CompletionResult, len(res))}
	for i, r := range res {
		out.Results[i] = apitype.CompletionResult{RunID: cs[i].RunID, Accepted: r.Err == nil}
		if r.Err != nil {
			out.Results[i].Error = r.Err.Error()
		}
	}
	return out, nil
}

func (e *Engine) flushCompletions(ctx context.Context, cs []store.Completion) ([]store.CompletionResult, error) {
	res, err := e.store.CompleteAttempts(ctx, &store.CompleteAttemptsParams{Completions: cs, Now: e.clock.Now(), Rand: e.cfg.Rand})
	if err != nil {
		return nil, err
	}
	var requeued, ended []*model.Run
	for _, r := range res {
		if r.Err == nil && r.Run != nil {
			ended = append(ended, r.Run)
			if !r.Run.Status.Final() {
				requeued = append(requeued, r.Run)
			}
		}
		requeued = append(requeued, r.Admitted...)
	}
	e.wakeFor(requeued)
	e.capacityFreed(ended)
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

// FieldError is a bad field in a protocol request; the API answers it with 400.
type FieldError struct {
	Field   string
	Message string
}

func (f *FieldError) Error() string { return f.Field + ": " + f.Message }
