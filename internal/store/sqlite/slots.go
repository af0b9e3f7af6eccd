package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// Concurrency slots (the store package doc, "Concurrency limits"), kept in run_slots.

// holders counts the runs of key that hold a slot.
func (t *wtx) holders(key string) (int, error) {
	var n int
	if err := t.tx.QueryRowContext(t.ctx, `SELECT count(*) FROM run_slots WHERE key = ? AND state = 'active'`, key).Scan(&n); err != nil {
		return 0, fmt.Errorf("count slots of %q: %w", key, err)
	}
	return n, nil
}

// admit decides a new run's admission and prepares r for insertion accordingly; under
// policy replace it cancels the oldest holders first and returns them.
func (t *wtx) admit(r *model.Run, now time.Time) ([]*model.Run, error) {
	c := r.Concurrency
	holding, err := t.holders(c.Key)
	if err != nil {
		return nil, err
	}
	var replaced []*model.Run
	switch store.Admit(c, holding) {
	case store.AdmitRun:
	case store.SkipRun:
		store.Skip(r, holding, now)
	case store.HoldRun:
		store.Hold(r, holding)
	case store.ReplaceRuns:
		rows, err := t.tx.QueryContext(t.ctx, `SELECT run_id FROM run_slots WHERE key = ? AND state = 'active' ORDER BY run_id LIMIT ?`,
			c.Key, holding-c.Max+1)
		if err != nil {
			return nil, fmt.Errorf("slots of %q: %w", c.Key, err)
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("slots of %q: %w", c.Key, err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		var ended []*model.Run
		for _, id := range ids {
			v, err := t.cancelRun(id, store.ReplacedReason(r.ID), now)
			if err != nil {
				return nil, err
			}
			if v == nil {
				continue
			}
			replaced = append(replaced, v)
			if v.Status.Final() {
				ended = append(ended, v)
			}
		}
		// Slots of runs that ended here are free; held runs of the key stay behind r only
		// if they are younger, so r is admitted first (it replaces, it does not queue).
		if _, err := t.doneKeys(ended); err != nil {
			return nil, err
		}
		holding -= len(ended)
		if holding >= c.Max {
			store.Hold(r, holding)
		}
	}
	return replaced, nil
}

// insertSlot records r's place under its limit, as admit left r.
func (t *wtx) insertSlot(r *model.Run) error {
	state := "active"
	switch {
	case r.Status == model.RunWaiting:
		state = "held"
	case r.Status.Final():
		state = "done"
	}
	c := r.Concurrency
	if _, err := t.tx.ExecContext(t.ctx, `INSERT INTO run_slots (run_id, key, max, policy, state) VALUES (?, ?, ?, ?, ?)`,
		r.ID, c.Key, c.Max, string(c.Policy), state); err != nil {
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
	var admitted []*model.Run
	for _, key := range keys {
		rs, err := t.admitHeld(key, now)
		if err != nil {
			return nil, err
		}
		admitted = append(admitted, rs...)
	}
	return admitted, nil
}

// admitHeld gives free slots of key to its held runs, oldest first, stopping at the first
// that does not fit (its limit is its own Max).
func (t *wtx) admitHeld(key string, now time.Time) ([]*model.Run, error) {
	holding, err := t.holders(key)
	if err != nil {
		return nil, err
	}
	var out []*model.Run
	for {
		var (
			id  string
			max int
		)
		err := t.tx.QueryRowContext(t.ctx, `SELECT run_id, max FROM run_slots WHERE key = ? AND state = 'held' ORDER BY run_id LIMIT 1`,
			key).Scan(&id, &max)
		if errors.Is(err, sql.ErrNoRows) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("held runs of %q: %w", key, err)
		}
		if holding >= max {
			return out, nil
		}
		rr, err := scanRun(t.tx.QueryRowContext(t.ctx, `SELECT `+runCols+` FROM runs WHERE id = ?`, id))
		if err != nil {
			return nil, fmt.Errorf("held run %s: %w", id, mapErr(err))
		}
		r := rr.run
		if r.Status == model.RunWaiting && r.PendingCode == model.PendingConcurrencyLimit {
			store.Release(r, now)
			if _, err := t.tx.ExecContext(t.ctx, `UPDATE runs SET status = ?, pending_code = ?, pending_reason = ? WHERE id = ?`,
				string(r.Status), string(r.PendingCode), r.PendingReason, id); err != nil {
				return nil, fmt.Errorf("admit run %s: %w", id, err)
			}
			out = append(out, r)
		}
		state := "active"
		if r.Status.Final() {
			state = "done" // ended while held (cancelled): it takes no slot
		} else {
			holding++
		}
		if _, err := t.tx.ExecContext(t.ctx, `UPDATE run_slots SET state = ? WHERE run_id = ?`, state, id); err != nil {
			return nil, fmt.Errorf("admit run %s: %w", id, err)
		}
	}
}

// readmit gives a reopened run (manual retry) its slot back, or holds it until one frees.
func (t *wtx) readmit(r *model.Run) error {
	var c model.RunConcurrency
	err := t.tx.QueryRowContext(t.ctx, `SELECT key, max, policy FROM run_slots WHERE run_id = ?`, r.ID).Scan(&c.Key, &c.Max, &c.Policy)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("slot of run %s: %w", r.ID, err)
	}
	holding, err := t.holders(c.Key)
	if err != nil {
		return err
	}
	state := "active"
	if holding >= c.Max {
		state = "held"
		r.Concurrency = &c
		store.Hold(r, holding)
		if _, err := t.tx.ExecContext(t.ctx, `UPDATE runs SET status = ?, pending_code = ?, pending_reason = ? WHERE id = ?`,
			string(r.Status), string(r.PendingCode), r.PendingReason, r.ID); err != nil {
			return fmt.Errorf("hold run %s: %w", r.ID, err)
		}
	}
	if _, err := t.tx.ExecContext(t.ctx, `UPDATE run_slots SET state = ? WHERE run_id = ?`, state, r.ID); err != nil {
		return fmt.Errorf("slot of run %s: %w", r.ID, err)
	}
	return nil
}

// AdmitHeld admits the held runs of every key that has a free slot. Every end of a run
// admits in its own transaction here, so this finds work only if that rule was broken.
func (s *Store) AdmitHeld(ctx context.Context, now time.Time) ([]*model.Run, error) {
	var out []*model.Run
	err := s.write(ctx, func(t *wtx) error {
		out = nil
		rows, err := t.tx.QueryContext(t.ctx, `SELECT DISTINCT key FROM run_slots WHERE state = 'held'`)
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
		for _, key := range keys {
			rs, err := t.admitHeld(key, now)
			if err != nil {
				return err
			}
			out = append(out, rs...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("admit held runs: %w", err)
	}
	return out, nil
}
