package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// Concurrency slots and rate limits (the store package doc, "Concurrency limits"), kept in
// run_slots and rate_limits.

// holders counts the runs of key that hold a slot.
func (t *wtx) holders(key string) (int, error) {
	var n int
	if err := t.tx.QueryRowContext(t.ctx, `SELECT count(*) FROM run_slots WHERE key = ? AND state = 'active'`, key).Scan(&n); err != nil {
		return 0, fmt.Errorf("count slots of %q: %w", key, err)
	}
	return n, nil
}

// rateTAT reads a rate-limited key's theoretical arrival time (zero: never used).
func (t *wtx) rateTAT(key string) (time.Time, error) {
	var tat int64
	err := t.tx.QueryRowContext(t.ctx, `SELECT tat FROM rate_limits WHERE key = ?`, key).Scan(&tat)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("rate limit of %q: %w", key, err)
	}
	return fromMicros(tat), nil
}

// setRateTAT writes a rate-limited key's theoretical arrival time.
func (t *wtx) setRateTAT(key string, tat time.Time) error {
	if _, err := t.tx.ExecContext(t.ctx, `INSERT INTO rate_limits (key, tat) VALUES (?1, ?2)
		ON CONFLICT (key) DO UPDATE SET tat = ?2`, key, micros(tat)); err != nil {
		return fmt.Errorf("rate limit of %q: %w", key, err)
	}
	return nil
}

// reserve takes the next turn of key under rate limit r and returns when it starts.
func (t *wtx) reserve(key string, r *model.RateLimit, now time.Time) (time.Time, error) {
	tat, err := t.rateTAT(key)
	if err != nil {
		return time.Time{}, err
	}
	at, next := scheduler.Reserve(tat, now, r)
	if err := t.setRateTAT(key, next); err != nil {
		return time.Time{}, err
	}
	return norm(at), nil
}

// slotTx is the writer transaction as the store package's admission logic sees it.
type slotTx struct{ t *wtx }

var _ store.SlotTx = slotTx{}

// LockKey is a no-op: SQLite has one writer.
func (slotTx) LockKey(string) error { return nil }

func (s slotTx) Holders(key string) (int, error) { return s.t.holders(key) }

func (s slotTx) Replace(r *model.Run, holding int, now time.Time) ([]*model.Run, int, error) {
	return s.t.replace(r, holding, now)
}

func (s slotTx) Reserve(key string, r *model.RateLimit, now time.Time) (time.Time, error) {
	return s.t.reserve(key, r, now)
}

func (s slotTx) NextHeld(key string, now time.Time) (*store.HeldSlot, error) {
	var (
		h    store.HeldSlot
		rate int
		per  int64
		rel  sql.NullInt64
	)
	err := s.t.tx.QueryRowContext(s.t.ctx, `SELECT run_id, max, rate, per_us, release_at FROM run_slots
		WHERE key = ? AND state = 'held' AND (release_at IS NULL OR release_at <= ?) ORDER BY run_id LIMIT 1`,
		key, micros(now)).Scan(&h.RunID, &h.Max, &rate, &per, &rel)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("held runs of %q: %w", key, err)
	}
	h.Rate = store.RateFromColumns(rate, per)
	h.Reserved = rel.Valid
	return &h, nil
}

func (s slotTx) HeldRun(runID string) (*model.Run, error) {
	rr, err := scanRun(s.t.tx.QueryRowContext(s.t.ctx, `SELECT `+runCols+` FROM runs WHERE id = ?`, runID))
	if err != nil {
		return nil, mapErr(err)
	}
	return rr.run, nil
}

func (s slotTx) SetRun(r *model.Run) error {
	if _, err := s.t.tx.ExecContext(s.t.ctx, `UPDATE runs SET status = ?, pending_code = ?, pending_reason = ? WHERE id = ?`,
		string(r.Status), string(r.PendingCode), r.PendingReason, r.ID); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	return nil
}

func (s slotTx) SetSlot(runID, state string, release *time.Time) error {
	var rel any
	if release != nil {
		rel = micros(*release)
	}
	if _, err := s.t.tx.ExecContext(s.t.ctx, `UPDATE run_slots SET state = ?, release_at = ? WHERE run_id = ?`, state, rel, runID); err != nil {
		return fmt.Errorf("slot of run %s: %w", runID, err)
	}
	return nil
}

// replace cancels the oldest holders of r's key so that r fits, and returns them and how
// many holders are left.
func (t *wtx) replace(r *model.Run, holding int, now time.Time) ([]*model.Run, int, error) {
	c := r.Concurrency
	rows, err := t.tx.QueryContext(t.ctx, `SELECT run_id FROM run_slots WHERE key = ? AND state = 'active' ORDER BY run_id LIMIT ?`,
		c.Key, holding-c.Max+1)
	if err != nil {
		return nil, 0, fmt.Errorf("slots of %q: %w", c.Key, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("slots of %q: %w", c.Key, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	var replaced, ended []*model.Run
	for _, id := range ids {
		v, err := t.cancelRun(id, scheduler.ReplacedReason(r.ID), now)
		if err != nil {
			return nil, 0, err
		}
		if v == nil {
			continue
		}
		replaced = append(replaced, v)
		if v.Status.Final() {
			ended = append(ended, v)
		}
	}
	// The slots of runs that ended here are free: r takes one before any held run of the
	// key (it replaces, it does not queue).
	if _, err := t.doneKeys(ended); err != nil {
		return nil, 0, err
	}
	return replaced, holding - len(ended), nil
}

// insertSlot records r's place under its limit, as admit left r (release: when a run held
// by the rate limit starts).
func (t *wtx) insertSlot(r *model.Run, release time.Time) error {
	state := store.SlotState(r)
	c := r.Concurrency
	rate, per := store.RateColumns(c.Rate)
	var rel any
	if !release.IsZero() {
		rel = micros(release)
	}
	if _, err := t.tx.ExecContext(t.ctx, `INSERT INTO run_slots (run_id, key, max, policy, state, rate, per_us, release_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.ID, c.Key, c.Max, string(c.Policy), state, rate, per, rel); err != nil {
		return fmt.Errorf("slot of run %s: %w", r.ID, err)
	}
	t.ws.slotsUsed.Store(true)
	return nil
}

// doneKeys marks the slots of runs as done and returns their keys, in first-seen order.
func (t *wtx) doneKeys(runs []*model.Run) ([]string, error) {
	var keys []string
	for _, r := range runs {
		var key string
		err := t.tx.QueryRowContext(t.ctx, `UPDATE run_slots SET state = 'done' WHERE run_id = ? AND state != 'done' RETURNING key`,
			r.ID).Scan(&key)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("free slot of run %s: %w", r.ID, err)
		}
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// freeSlots frees the slots of the runs among runs that are final, and admits the held
// runs those slots make room for, returning them as they are after. It costs nothing while
// no run was ever created under a limit.
func (t *wtx) freeSlots(runs []*model.Run, now time.Time) ([]*model.Run, error) {
	if !t.ws.slotsUsed.Load() {
		return nil, nil
	}
	var final []*model.Run
	for _, r := range runs {
		if r != nil && r.Status.Final() {
			final = append(final, r)
		}
	}
	keys, err := t.doneKeys(final)
	if err != nil {
		return nil, err
	}
	return t.admitKeys(keys, now)
}

// admitKeys runs admitHeld for each key.
func (t *wtx) admitKeys(keys []string, now time.Time) ([]*model.Run, error) {
	var admitted []*model.Run
	for _, key := range keys {
		rs, err := store.AdmitHeld(slotTx{t: t}, key, now)
		if err != nil {
			return nil, err
		}
		admitted = append(admitted, rs...)
	}
	return admitted, nil
}

// readmit gives a reopened run (manual retry) back to its limit: it waits as a held run,
// and takes a slot now if one is free.
func (t *wtx) readmit(r *model.Run, now time.Time) (*model.Run, error) {
	var key string
	err := t.tx.QueryRowContext(t.ctx, `UPDATE run_slots SET state = 'held', release_at = NULL WHERE run_id = ? RETURNING key`,
		r.ID).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("slot of run %s: %w", r.ID, err)
	}
	r.Concurrency = &model.RunConcurrency{Key: key}
	scheduler.Hold(r, 0)
	st := slotTx{t: t}
	if err := st.SetRun(r); err != nil {
		return nil, err
	}
	if _, err := store.AdmitHeld(st, key, now); err != nil {
		return nil, err
	}
	rr, err := scanRun(t.tx.QueryRowContext(t.ctx, `SELECT `+runCols+` FROM runs WHERE id = ?`, r.ID))
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return rr.run, nil
}

// AdmitHeld admits the held runs of every key that has a free slot. Every end of a run
// admits in its own transaction here, so this finds work only if that rule was broken.
func (s *Store) AdmitHeld(ctx context.Context, p *store.AdmitHeldParams) ([]*model.Run, error) {
	return s.admitWhere(ctx, "admit held runs", `SELECT DISTINCT key FROM run_slots WHERE state = 'held'`, p.Now)
}

// ReleaseDue admits the held runs whose turn under a rate limit has come.
func (s *Store) ReleaseDue(ctx context.Context, p *store.ReleaseDueParams) ([]*model.Run, error) {
	return s.admitWhere(ctx, "release rate-limited runs", `SELECT DISTINCT key FROM run_slots INDEXED BY run_slots_release
		WHERE state = 'held' AND release_at IS NOT NULL AND release_at <= ?`, p.Now, micros(p.Now))
}

// NextRelease returns the earliest turn a rate-limited held run waits for.
func (s *Store) NextRelease(ctx context.Context) (time.Time, bool, error) {
	return s.earliest(ctx, "next release", `SELECT min(release_at) FROM run_slots WHERE state = 'held' AND release_at IS NOT NULL`)
}

// admitWhere runs admitHeld, in one transaction, for the keys that query lists.
func (s *Store) admitWhere(ctx context.Context, what, query string, now time.Time, args ...any) ([]*model.Run, error) {
	var out []*model.Run
	err := s.write(ctx, func(t *wtx) error {
		rows, err := t.tx.QueryContext(t.ctx, query, args...)
		if err != nil {
			return err
		}
		var keys []string
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return err
			}
			keys = append(keys, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		out, err = t.admitKeys(keys, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// NextQueueTurn returns the earliest next turn after After of a rate-limited queue that has
// queued runs, or scheduled runs due at Now.
func (s *Store) NextQueueTurn(ctx context.Context, p *store.NextQueueTurnParams) (time.Time, bool, error) {
	// A queue without a rate_limits row was never leased: its turns are free.
	rows, err := s.r.QueryContext(ctx, `SELECT q.rate, q.rate_per_us, l.tat FROM queues q
		JOIN rate_limits l ON l.key = 'queue:' || q.name
		WHERE q.rate > 0 AND q.paused = 0
		  AND (EXISTS (SELECT 1 FROM runs r INDEXED BY runs_queued WHERE r.status = 'queued' AND r.queue = q.name)
		    OR EXISTS (SELECT 1 FROM runs r INDEXED BY runs_due WHERE r.status = 'scheduled' AND r.queue = q.name AND r.scheduled_for <= ?))`, micros(p.Now))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next queue turn: %w", err)
	}
	defer rows.Close()
	var next time.Time
	for rows.Next() {
		var (
			rate     int
			per, tat int64
		)
		if err := rows.Scan(&rate, &per, &tat); err != nil {
			return time.Time{}, false, fmt.Errorf("next queue turn: %w", err)
		}
		turn := scheduler.TurnAt(fromMicros(tat), store.RateFromColumns(rate, per))
		if turn.After(p.After) && (next.IsZero() || turn.Before(next)) {
			next = turn
		}
	}
	if err := rows.Err(); err != nil {
		return time.Time{}, false, fmt.Errorf("next queue turn: %w", err)
	}
	return next, !next.IsZero(), nil
}
