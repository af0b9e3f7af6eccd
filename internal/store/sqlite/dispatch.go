package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/placement"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// PromoteDue moves due scheduled runs to queued.
func (s *Store) PromoteDue(ctx context.Context, p *store.PromoteDueParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	var n int64
	err := s.write(ctx, func(t *wtx) error {
		res, err := t.tx.ExecContext(t.ctx, promoteDueSQL, micros(p.Now), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("promote due runs: %w", err)
	}
	return int(n), nil
}

// NextDue returns the earliest ScheduledFor after after among scheduled runs.
func (s *Store) NextDue(ctx context.Context, after time.Time) (time.Time, bool, error) {
	return s.earliest(ctx, "next due", nextDueSQL, micros(after))
}

// NextLeaseExpiry returns the earliest LeaseExpiresAt among running runs.
func (s *Store) NextLeaseExpiry(ctx context.Context) (time.Time, bool, error) {
	return s.earliest(ctx, "next lease expiry", nextLeaseExpirySQL)
}

func (s *Store) earliest(ctx context.Context, what, q string, args ...any) (time.Time, bool, error) {
	var v sql.NullInt64
	err := s.r.QueryRowContext(ctx, q, args...).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !v.Valid {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%s: %w", what, err)
	}
	return fromMicros(v.Int64), true, nil
}

// LeaseRuns hands queued runs to a worker, queue by queue in priority order, placing
// them by requirements (see store.Store).
func (s *Store) LeaseRuns(ctx context.Context, p *store.LeaseRunsParams) (*store.Leased, error) {
	if p.Max <= 0 {
		return &store.Leased{}, nil
	}
	st, err := s.ws.leaseStmt(ctx, len(p.Handlers), p.Commands)
	if err != nil {
		return nil, fmt.Errorf("lease runs: %w", err)
	}
	expires := micros(p.Now.Add(p.LeaseTTL))
	now := micros(p.Now)
	tokenPrefix := id.Token() + "."
	var (
		leased []runRow
		placer *store.Placer
	)
	err = s.write(ctx, func(t *wtx) error {
		leased = leased[:0]
		queues, err := t.leaseQueues()
		if err != nil {
			return err
		}
		if placer, err = t.placer(p); err != nil {
			return err
		}
		labels := store.LabelsColumn(placer.Self.Labels)
		if labels == "" {
			labels = "{}"
		}
		candidates := t.stmt(st)
		args := make([]any, 0, 6+len(p.Handlers))
		var picked []int64
		for _, q := range queues {
			want := p.Max - len(leased)
			if want <= 0 {
				break
			}
			if q.max > 0 {
				var running int
				if err := t.stmt(t.ws.runningCount).QueryRowContext(t.ctx, q.name).Scan(&running); err != nil {
					return fmt.Errorf("running in queue %q: %w", q.name, err)
				}
				if want = min(want, q.max-running); want <= 0 {
					continue
				}
			}
			var tat time.Time
			if q.rate != nil {
				if tat, err = t.rateTAT(store.QueueRateKey(q.name)); err != nil {
					return err
				}
				if want, _ = scheduler.TakeTurns(tat, p.Now, q.rate, want); want <= 0 {
					continue
				}
			}
			args = append(args[:0], q.name)
			for _, h := range p.Handlers {
				args = append(args, h)
			}
			free := placer.Self.Free
			args = append(args, free.CPU+1e-9, free.MemoryMB, free.GPU, labels, want, now)
			if picked, err = t.pick(candidates, args, placer, picked[:0]); err != nil {
				return fmt.Errorf("lease from queue %q: %w", q.name, err)
			}
			if len(picked) == 0 {
				continue
			}
			ids, err := json.Marshal(picked)
			if err != nil {
				return fmt.Errorf("lease from queue %q: %w", q.name, err)
			}
			got, err := scanLeased(t.stmt(t.ws.claim).QueryContext(t.ctx, p.WorkerID, tokenPrefix, expires, now, now, ids))
			if err != nil {
				return fmt.Errorf("lease from queue %q: %w", q.name, err)
			}
			// RETURNING follows no order: put the queue's runs in lease order.
			slices.SortFunc(got, func(a, b runRow) int {
				return cmp.Or(cmp.Compare(b.run.Priority, a.run.Priority),
					a.run.ScheduledFor.Compare(b.run.ScheduledFor), cmp.Compare(a.run.ID, b.run.ID))
			})
			leased = append(leased, got...)
			if q.rate != nil {
				_, next := scheduler.TakeTurns(tat, p.Now, q.rate, len(got))
				if err := t.setRateTAT(store.QueueRateKey(q.name), next); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lease runs: %w", err)
	}
	out := &store.Leased{Leases: make([]*model.Lease, len(leased)), HeldUntil: placer.HeldUntil}
	// Each distinct spec is decoded once: the runs of one job, and jobs submitted alike (a
	// batch of the same work), share it. A lease's args are its run's (model.Lease).
	decoded := map[string]model.JobSpec{}
	for i, rr := range leased {
		spec, ok := decoded[string(rr.spec)]
		if !ok {
			if len(rr.spec) > 0 {
				if err := json.Unmarshal(rr.spec, &spec); err != nil {
					return nil, fmt.Errorf("lease runs: decode spec of job %s: %w", rr.jobID, err)
				}
			}
			spec.Args = nil
			decoded[string(rr.spec)] = spec
		}
		out.Leases[i] = &model.Lease{Run: rr.run, Spec: spec, Token: rr.run.LeaseToken, ExpiresAt: *rr.run.LeaseExpiresAt}
	}
	return out, nil
}

// leaseQueue is a queue as LeaseRuns takes it.
type leaseQueue struct {
	name string
	max  int
	rate *model.RateLimit
}

// leaseQueues lists the queues that are not paused, in lease order.
func (t *wtx) leaseQueues() ([]leaseQueue, error) {
	var queues []leaseQueue
	rows, err := t.stmt(t.ws.leaseQueues).QueryContext(t.ctx)
	if err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			q    leaseQueue
			rate int
			per  int64
		)
		if err := rows.Scan(&q.name, &q.max, &rate, &per); err != nil {
			return nil, fmt.Errorf("queues: %w", err)
		}
		q.rate = store.RateFromColumns(rate, per)
		queues = append(queues, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	return queues, nil
}

// placer reads the asking worker's room: its labels and declared capacity (none when it is
// not registered) less what its running runs book.
func (t *wtx) placer(p *store.LeaseRunsParams) (*store.Placer, error) {
	var (
		labels   []byte
		declared model.Capacity
		used     model.Capacity
		lbls     map[string]string
	)
	err := t.stmt(t.ws.workerRoom).QueryRowContext(t.ctx, p.WorkerID).Scan(&labels, &declared.CPU, &declared.MemoryMB, &declared.GPU)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("worker %s: %w", p.WorkerID, err)
	default:
		if err := json.Unmarshal(labels, &lbls); err != nil {
			return nil, fmt.Errorf("decode labels of worker %s: %w", p.WorkerID, err)
		}
		if err := t.stmt(t.ws.workerBooked).QueryRowContext(t.ctx, p.WorkerID).Scan(&used.CPU, &used.MemoryMB, &used.GPU); err != nil {
			return nil, fmt.Errorf("capacity booked on worker %s: %w", p.WorkerID, err)
		}
	}
	return &store.Placer{
		Self:       store.NewRoom(p.WorkerID, lbls, declared, used),
		Hold:       p.BestFitHold,
		Now:        p.Now,
		LoadOthers: func() ([]placement.Room, error) { return t.liveRooms(p) },
	}, nil
}

// liveRooms reads the rooms of the live workers other than the asking one.
func (t *wtx) liveRooms(p *store.LeaseRunsParams) ([]placement.Room, error) {
	booked := map[string]model.Capacity{}
	rows, err := t.tx.QueryContext(t.ctx, bookedSQL)
	if err != nil {
		return nil, fmt.Errorf("capacity booked: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			c  model.Capacity
		)
		if err := rows.Scan(&id, &c.CPU, &c.MemoryMB, &c.GPU); err != nil {
			return nil, fmt.Errorf("capacity booked: %w", err)
		}
		booked[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("capacity booked: %w", err)
	}
	wrows, err := t.tx.QueryContext(t.ctx, liveWorkersSQL, micros(p.LiveSince), p.WorkerID)
	if err != nil {
		return nil, fmt.Errorf("live workers: %w", err)
	}
	defer wrows.Close()
	var out []placement.Room
	for wrows.Next() {
		var (
			id       string
			labels   []byte
			lbls     map[string]string
			declared model.Capacity
		)
		if err := wrows.Scan(&id, &labels, &declared.CPU, &declared.MemoryMB, &declared.GPU); err != nil {
			return nil, fmt.Errorf("live workers: %w", err)
		}
		if err := json.Unmarshal(labels, &lbls); err != nil {
			return nil, fmt.Errorf("decode labels of worker %s: %w", id, err)
		}
		out = append(out, store.NewRoom(id, lbls, declared, booked[id]))
	}
	return out, wrows.Err()
}

// pick runs the candidates statement with args and returns the rowids of the candidates
// the placer takes, appended to dst.
func (t *wtx) pick(candidates *sql.Stmt, args []any, placer *store.Placer, dst []int64) ([]int64, error) {
	rows, err := candidates.QueryContext(t.ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		rowids []int64
		cands  []placement.Candidate
	)
	for rows.Next() {
		var (
			rowid  int64
			c      placement.Candidate
			labels string
			since  int64
		)
		if err := rows.Scan(&rowid, &c.Req.CPU, &c.Req.MemoryMB, &c.Req.GPU, &labels, &since); err != nil {
			return nil, err
		}
		if c.Req.Labels, err = store.LabelsFromColumn(labels); err != nil {
			return nil, err
		}
		c.Since = fromMicros(since)
		rowids = append(rowids, rowid)
		cands = append(cands, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	take, err := placer.Pick(cands)
	if err != nil {
		return nil, err
	}
	for _, i := range take {
		dst = append(dst, rowids[i])
	}
	return dst, nil
}

// CompleteAttempts records the ends of attempts; see store.Store.
//
// Successes and cancellations (the bulk) go through one set-based UPDATE per chunk that
// fences and ends the runs at once; other outcomes need the job's retry policy and go one
// by one. A run named more than once in the batch goes one by one, in batch order, so that
// the first valid completion wins.
func (s *Store) CompleteAttempts(ctx context.Context, p *store.CompleteAttemptsParams) ([]store.CompletionResult, error) {
	out := make([]store.CompletionResult, len(p.Completions))
	cs := slices.Clone(p.Completions)
	seen := make(map[string]int, len(cs))
	for i, c := range cs {
		cs[i].Status = scheduler.RecordedStatus(c.Status)
		seen[c.RunID]++
	}
	var fast, slow []int
	for i, c := range cs {
		if seen[c.RunID] == 1 && !scheduler.NeedsRun(c.Status) {
			fast = append(fast, i)
		} else {
			slow = append(slow, i)
		}
	}
	err := s.write(ctx, func(t *wtx) error {
		clear(out)
		e := t.ender(p.Now, p.Rand)
		if err := t.finishBatch(e, cs, fast, out); err != nil {
			return err
		}
		active := t.stmt(t.ws.activeRun)
		spent := map[string]bool{}
		for _, i := range slow {
			c := cs[i]
			lost := fmt.Errorf("run %s: %w", c.RunID, model.ErrLeaseLost)
			if spent[c.RunID] {
				out[i].Err = lost
				continue
			}
			rr, err := scanRun(active.QueryRowContext(t.ctx, c.RunID, c.Token))
			if errors.Is(err, sql.ErrNoRows) {
				out[i].Err = lost
				continue
			}
			if err != nil {
				return fmt.Errorf("complete run %s: %w", c.RunID, err)
			}
			if out[i].Run, err = e.end(rr, c.Status, c.ExitCode, c.Error); err != nil {
				return fmt.Errorf("complete run %s: %w", c.RunID, err)
			}
			spent[c.RunID] = true
		}
		if err := e.flush(); err != nil {
			return err
		}
		for i := range out {
			if out[i].Run != nil && out[i].Run.Status.Final() {
				var err error
				if out[i].Admitted, err = t.settle([]*model.Run{out[i].Run}, p.Now); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("complete attempts: %w", err)
	}
	return out, nil
}

// finishBatch ends the runs of the completions at idx (each a success or a cancellation
// of a distinct run) with set-based UPDATEs, and fills their results.
func (t *wtx) finishBatch(e *ender, cs []store.Completion, idx []int, out []store.CompletionResult) error {
	byRun := make(map[string]int, len(idx))
	now := micros(e.now)
	vals := make([]any, 0, 4*min(len(idx), maxChunk))
	var args []any
	err := chunks(len(idx), func(lo, hi int) error {
		vals = vals[:0]
		for _, i := range idx[lo:hi] {
			c := cs[i]
			// The outcome of a success or a cancellation does not depend on the run.
			o := scheduler.Decide(scheduler.Ending{Status: c.Status, Error: c.Error}, e.now, 0.5)
			vals = append(vals, c.RunID, c.Token, string(o.Status), o.Error)
			byRun[c.RunID] = i
		}
		rows := bucket(hi - lo)
		// The id and the token differ from run to run.
		shared := sharedCols(vals, 4) &^ (1 << 1)
		st, err := t.batch(fmt.Sprintf("finish/%x", shared), rows, func(rows int) string { return finishBatchSQL(rows, shared) })
		if err != nil {
			return err
		}
		args = append(finishCols.args(args[:0], vals, shared, rows), now)
		done, err := scanRuns(st.QueryContext(t.ctx, args...))
		if err != nil {
			return fmt.Errorf("finish runs: %w", err)
		}
		for _, rr := range done {
			i := byRun[rr.run.ID]
			c := cs[i]
			e.addAttempt(rr, c.Status, c.ExitCode, c.Error)
			out[i].Run = store.Ended(rr.run)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, i := range idx {
		if out[i].Run == nil {
			out[i].Err = fmt.Errorf("run %s: %w", cs[i].RunID, model.ErrLeaseLost)
		}
	}
	return nil
}

// ender ends attempts inside one transaction: it caches the retry policies it loads and
// collects the ended attempts, which flush writes to the history in set-based INSERTs.
type ender struct {
	t        *wtx
	now      time.Time
	rand     func() float64
	policies map[string]model.RetryPolicy
	update   *sql.Stmt
	attempts []any // 8 values per ended attempt
}

func (t *wtx) ender(now time.Time, rand func() float64) *ender {
	return &ender{t: t, now: now, rand: rand, policies: map[string]model.RetryPolicy{},
		update: t.stmt(t.ws.endAttemptRun)}
}

// policy returns the retry policy of a job (the zero policy when the job is gone).
func (e *ender) policy(jobID string) (model.RetryPolicy, error) {
	if p, ok := e.policies[jobID]; ok {
		return p, nil
	}
	var b []byte
	err := e.t.stmt(e.t.ws.jobSpec).QueryRowContext(e.t.ctx, jobID).Scan(&b)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return model.RetryPolicy{}, fmt.Errorf("spec of job %s: %w", jobID, err)
	}
	var spec model.JobSpec
	if len(b) > 0 {
		if err := json.Unmarshal(b, &spec); err != nil {
			return model.RetryPolicy{}, fmt.Errorf("decode spec of job %s: %w", jobID, err)
		}
	}
	e.policies[jobID] = spec.Retry
	return spec.Retry, nil
}

// end ends the running attempt of rr (already fenced), writing the outcome that
// scheduler.Decide gives, and collects the attempt. It returns the run as store.Ended.
func (e *ender) end(rr runRow, status model.AttemptStatus, exit *int, errText string) (*model.Run, error) {
	r := rr.run
	ending := scheduler.Ending{Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, Disruptions: r.Disruptions,
		CancelRequested: r.CancelRequested, Status: status, ExitCode: exit, Error: errText}
	u := 0.5
	if scheduler.NeedsRun(status) {
		var err error
		if ending.Policy, err = e.policy(r.JobID); err != nil {
			return nil, err
		}
		u = store.Uniform(e.rand)
	}
	o := scheduler.Decide(ending, e.now, u)
	var sched any // nil keeps scheduled_for
	if !o.ScheduledFor.IsZero() {
		sched = micros(o.ScheduledFor)
	}
	out, err := scanRun(e.update.QueryRowContext(e.t.ctx, string(o.Status), string(o.PendingCode), o.PendingReason, sched,
		nullMicros(o.FinishedAt), o.Error, boolInt(r.CancelRequested), boolInt(o.Disrupted), r.ID))
	if err != nil {
		return nil, fmt.Errorf("end attempt: %w", err)
	}
	e.addAttempt(rr, status, exit, errText)
	return store.Ended(out.run), nil
}

// addAttempt collects the ended attempt of rr for the history.
func (e *ender) addAttempt(rr runRow, status model.AttemptStatus, exit *int, errText string) {
	var code any
	if exit != nil {
		code = *exit
	}
	e.attempts = append(e.attempts, rr.run.ID, rr.run.Attempt, rr.worker, string(status), code, errText,
		rr.attemptStarted, micros(e.now))
}

// flush writes the collected attempts.
func (e *ender) flush() error {
	k := len(attemptsInsert.cols)
	n := len(e.attempts) / k
	var args []any
	err := chunks(n, func(lo, hi int) error {
		rows := bucket(hi - lo)
		vals := e.attempts[lo*k : hi*k]
		shared := sharedCols(vals, k)
		st, err := e.t.batch(fmt.Sprintf("attempts/%x", shared), rows, func(rows int) string { return attemptsInsert.sql(rows, shared) })
		if err != nil {
			return err
		}
		args = attemptsInsert.args(args[:0], vals, shared, rows)
		if _, err := st.ExecContext(e.t.ctx, args...); err != nil {
			return fmt.Errorf("write attempts: %w", err)
		}
		return nil
	})
	e.attempts = e.attempts[:0]
	return err
}

// Heartbeat extends the worker's valid leases and says which to stop.
func (s *Store) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]store.HeartbeatResult, error) {
	out := make([]store.HeartbeatResult, len(p.Beats))
	err := s.write(ctx, func(t *wtx) error {
		for i := range p.Beats {
			res, err := t.heartbeat(&p.Beats[i], p.Now, p.LeaseTTL)
			if err != nil {
				return err
			}
			out[i] = *res
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat of %d workers: %w", len(p.Beats), err)
	}
	return out, nil
}

// heartbeat records one beat in t (see store.Store.Heartbeat): an unknown worker or another
// session is the result's Err.
func (t *wtx) heartbeat(b *store.Beat, now time.Time, ttl time.Duration) (*store.HeartbeatResult, error) {
	var state string
	err := t.tx.QueryRowContext(t.ctx, `UPDATE workers SET last_heartbeat = ?1
		WHERE id = ?2 AND (?3 = '' OR session = ?3) RETURNING state`, micros(now), b.WorkerID, b.Session).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return &store.HeartbeatResult{Err: fmt.Errorf("heartbeat from %s: worker: %w", b.WorkerID, model.ErrNotFound)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("worker %s: %w", b.WorkerID, err)
	}
	out := &store.HeartbeatResult{Draining: state == string(model.WorkerDraining)}
	extend := t.stmt(t.ws.extendLease)
	expires := micros(now.Add(ttl))
	for _, h := range b.Held {
		var cancel int
		err := extend.QueryRowContext(t.ctx, expires, h.RunID, h.Token, b.WorkerID).Scan(&cancel)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			var status string
			err := t.tx.QueryRowContext(t.ctx, `SELECT status FROM attempts WHERE run_id = ? AND worker_id = ?
				ORDER BY n DESC LIMIT 1`, h.RunID, b.WorkerID).Scan(&status)
			switch {
			case err == nil && status != string(model.AttemptLost):
				out.Ended = append(out.Ended, h.RunID)
			case err == nil || errors.Is(err, sql.ErrNoRows):
				out.Lost = append(out.Lost, h.RunID)
			default:
				return nil, fmt.Errorf("last attempt of run %s: %w", h.RunID, err)
			}
		case err != nil:
			return nil, fmt.Errorf("extend lease of run %s: %w", h.RunID, err)
		case cancel != 0:
			out.Cancel = append(out.Cancel, h.RunID)
		}
	}
	return out, nil
}

// RescueExpired ends attempts whose lease expired as lost.
func (s *Store) RescueExpired(ctx context.Context, p *store.RescueExpiredParams) ([]*model.Run, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	var out []*model.Run
	err := s.write(ctx, func(t *wtx) error {
		out = out[:0]
		expired, err := scanRuns(t.tx.QueryContext(t.ctx, expiredSQL, micros(p.Now), limit))
		if err != nil {
			return err
		}
		e := t.ender(p.Now, p.Rand)
		for _, rr := range expired {
			r, err := e.end(rr, model.AttemptLost, nil, scheduler.LeaseExpired)
			if err != nil {
				return fmt.Errorf("run %s: %w", rr.run.ID, err)
			}
			finished := norm(p.Now)
			r.Attempts = []model.Attempt{{RunID: r.ID, N: rr.run.Attempt, WorkerID: rr.worker, Status: model.AttemptLost,
				Error: scheduler.LeaseExpired, StartedAt: fromMicros(rr.attemptStarted), FinishedAt: &finished}}
			out = append(out, r)
		}
		if err := e.flush(); err != nil {
			return err
		}
		admitted, err := t.settle(out, p.Now)
		out = append(out, admitted...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rescue expired leases: %w", err)
	}
	return out, nil
}
