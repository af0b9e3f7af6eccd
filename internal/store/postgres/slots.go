package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// Concurrency slots (the store package doc, "Concurrency limits"), kept in run_slots.

// lockKey serializes, until the end of tx, the transactions that count or change the slots
// of key.
func lockKey(ctx context.Context, tx pgx.Tx, key string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 7))`, key); err != nil {
		return fmt.Errorf("lock slots of %q: %w", key, err)
	}
	return nil
}

// holders counts the runs of key that hold a slot.
func holders(ctx context.Context, tx pgx.Tx, key string) (int, error) {
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM run_slots WHERE key = $1 AND state = 'active'`, key).Scan(&n); err != nil {
		return 0, fmt.Errorf("count slots of %q: %w", key, err)
	}
	return n, nil
}

// admit decides a new run's admission and prepares r for insertion accordingly; under
// policy replace it cancels the oldest holders first and returns them.
func admit(ctx context.Context, tx pgx.Tx, r *model.Run, now time.Time) ([]*model.Run, error) {
	c := r.Concurrency
	if err := lockKey(ctx, tx, c.Key); err != nil {
		return nil, err
	}
	holding, err := holders(ctx, tx, c.Key)
	if err != nil {
		return nil, err
	}
	switch store.Admit(c, holding) {
	case store.AdmitRun:
		return nil, nil
	case store.SkipRun:
		store.Skip(r, holding, now)
		return nil, nil
	case store.HoldRun:
		store.Hold(r, holding)
		return nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT run_id FROM run_slots WHERE key = $1 AND state = 'active' ORDER BY run_id LIMIT $2`,
		c.Key, holding-c.Max+1)
	if err != nil {
		return nil, fmt.Errorf("slots of %q: %w", c.Key, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("slots of %q: %w", c.Key, err)
	}
	replaced, err := cancelRuns(ctx, tx, &store.CancelRunsParams{RunIDs: ids, Reason: store.ReplacedReason(r.ID), Now: now})
	if err != nil {
		return nil, err
	}
	ended := slices.DeleteFunc(slices.Clone(replaced), func(v *model.Run) bool { return !v.Status.Final() })
	if _, err := doneKeys(ctx, tx, ended); err != nil {
		return nil, err
	}
	if holding -= len(ended); holding >= c.Max {
		store.Hold(r, holding)
	}
	return replaced, nil
}

// insertSlot records r's place under its limit, as admit left r.
func insertSlot(ctx context.Context, tx pgx.Tx, r *model.Run) error {
	state := "active"
	switch {
	case r.Status == model.RunWaiting:
		state = "held"
	case r.Status.Final():
		state = "done"
	}
	c := r.Concurrency
	if _, err := tx.Exec(ctx, `INSERT INTO run_slots (run_id, key, max, policy, state) VALUES ($1, $2, $3, $4, $5)`,
		r.ID, c.Key, c.Max, string(c.Policy), state); err != nil {
		return fmt.Errorf("slot of run %s: %w", r.ID, err)
	}
	return nil
}

// doneKeys marks the slots of runs as done and returns their keys, sorted.
func doneKeys(ctx context.Context, tx pgx.Tx, runs []*model.Run) ([]string, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	rows, err := tx.Query(ctx, `UPDATE run_slots SET state = 'done' WHERE run_id = ANY($1) AND state <> 'done' RETURNING key`, ids)
	if err != nil {
		return nil, fmt.Errorf("free slots: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("free slots: %w", err)
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

// freeSlots frees the slots of the final runs among runs and admits the held runs that
// the freed slots make room for, returning them as they are after.
func freeSlots(ctx context.Context, tx pgx.Tx, runs []*model.Run, now time.Time) ([]*model.Run, error) {
	var final []*model.Run
	for _, r := range runs {
		if r != nil && r.Status.Final() {
			final = append(final, r)
		}
	}
	keys, err := doneKeys(ctx, tx, final)
	if err != nil {
		return nil, err
	}
	var admitted []*model.Run
	for _, key := range keys {
		rs, err := admitHeld(ctx, tx, key, now)
		if err != nil {
			return nil, err
		}
		admitted = append(admitted, rs...)
	}
	return admitted, nil
}

// admitHeld gives free slots of key to its held runs, oldest first, stopping at the first
// that does not fit (its limit is its own max).
func admitHeld(ctx context.Context, tx pgx.Tx, key string, now time.Time) ([]*model.Run, error) {
	if err := lockKey(ctx, tx, key); err != nil {
		return nil, err
	}
	holding, err := holders(ctx, tx, key)
	if err != nil {
		return nil, err
	}
	var out []*model.Run
	for {
		var (
			id  string
			max int
		)
		err := tx.QueryRow(ctx, `SELECT run_id, max FROM run_slots WHERE key = $1 AND state = 'held' ORDER BY run_id LIMIT 1`,
			key).Scan(&id, &max)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && holding >= max {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("held runs of %q: %w", key, err)
		}
		rr, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM runs r WHERE r.id = $1 FOR UPDATE`, id))
		if err != nil {
			return nil, fmt.Errorf("held run %s: %w", id, err)
		}
		r := &rr.Run
		state := "done" // ended while held (cancelled): it takes no slot
		if r.Status == model.RunWaiting && r.PendingCode == model.PendingConcurrencyLimit {
			store.Release(r, now)
			if _, err := tx.Exec(ctx, `UPDATE runs SET status = $1, pending_code = $2, pending_reason = $3 WHERE id = $4`,
				string(r.Status), string(r.PendingCode), r.PendingReason, id); err != nil {
				return nil, fmt.Errorf("admit run %s: %w", id, err)
			}
			out = append(out, r)
		}
		if !r.Status.Final() {
			state = "active"
			holding++
		}
		if _, err := tx.Exec(ctx, `UPDATE run_slots SET state = $1 WHERE run_id = $2`, state, id); err != nil {
			return nil, fmt.Errorf("admit run %s: %w", id, err)
		}
	}
}

// readmit gives a reopened run (manual retry) its slot back, or holds it until one frees.
func readmit(ctx context.Context, tx pgx.Tx, r *model.Run) error {
	var c model.RunConcurrency
	err := tx.QueryRow(ctx, `SELECT key, max, policy FROM run_slots WHERE run_id = $1`, r.ID).Scan(&c.Key, &c.Max, &c.Policy)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("slot of run %s: %w", r.ID, err)
	}
	if err := lockKey(ctx, tx, c.Key); err != nil {
		return err
	}
	holding, err := holders(ctx, tx, c.Key)
	if err != nil {
		return err
	}
	state := "active"
	if holding >= c.Max {
		state = "held"
		r.Concurrency = &c
		store.Hold(r, holding)
		if _, err := tx.Exec(ctx, `UPDATE runs SET status = $1, pending_code = $2, pending_reason = $3 WHERE id = $4`,
			string(r.Status), string(r.PendingCode), r.PendingReason, r.ID); err != nil {
			return fmt.Errorf("hold run %s: %w", r.ID, err)
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE run_slots SET state = $1 WHERE run_id = $2`, state, r.ID); err != nil {
		return fmt.Errorf("slot of run %s: %w", r.ID, err)
	}
	return nil
}

// hasLimit reports whether any of runs is created under a concurrency limit: such batches
// are written run by run in one transaction (admission counts and locks per key).
func hasLimit(runs []*model.Run) bool {
	return slices.ContainsFunc(runs, func(r *model.Run) bool { return r != nil && r.Concurrency != nil })
}

// createRunsTx is CreateRuns for batches with limits.
func (s *Store) createRunsTx(ctx context.Context, p *store.CreateRunsParams) ([]store.CreateRunResult, error) {
	out := make([]store.CreateRunResult, len(p.Runs))
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for i, r := range p.Runs {
			if r == nil {
				out[i] = store.CreateRunResult{Err: errors.New("create run: nil run")}
				continue
			}
			var err error
			if out[i], err = createRunTx(ctx, tx, r, utc(p.Now)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, translate(err, "create runs")
	}
	return out, nil
}

// createJobsTx is CreateJobs for batches whose first runs have limits: entry by entry in
// one transaction, with the same answers as the batch path.
func (s *Store) createJobsTx(ctx context.Context, p *store.CreateJobsParams) ([]store.CreateJobResult, error) {
	out := make([]store.CreateJobResult, len(p.Jobs))
	now := utc(p.Now)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for i, e := range p.Jobs {
			if e.Job == nil {
				out[i] = store.CreateJobResult{Err: errors.New("create job: entry without a job")}
				continue
			}
			var err error
			if out[i], err = createJobTx(ctx, tx, e, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, translate(err, "create jobs")
	}
	return out, nil
}

// createJobTx writes one entry of createJobsTx.
func createJobTx(ctx context.Context, tx pgx.Tx, e store.NewJob, now time.Time) (store.CreateJobResult, error) {
	j := *e.Job
	j.CreatedAt, j.UpdatedAt, j.NextFireAt = utc(j.CreatedAt), utc(j.UpdatedAt), utcPtr(j.NextFireAt)
	j.Spec.Args = compactJSON(j.Spec.Args)
	spec, err := encodeSpec(&j.Spec)
	if err != nil {
		return store.CreateJobResult{}, err
	}
	tag, err := tx.Exec(ctx, `INSERT INTO jobs (id, namespace, name, spec, queue, handler, req_cpu, req_memory_mb, req_gpu,
			enabled, next_fire_at, idempotency_key, request_hash, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT DO NOTHING`,
		j.ID, j.Namespace, j.Name, spec, j.Spec.Queue, j.Spec.Handler, j.Spec.Requirements.CPU, j.Spec.Requirements.MemoryMB,
		j.Spec.Requirements.GPU, j.Enabled, j.NextFireAt, nullString(j.IdempotencyKey), j.RequestHash, j.CreatedAt, j.UpdatedAt)
	if err != nil {
		return store.CreateJobResult{}, fmt.Errorf("insert job %s: %w", j.ID, err)
	}
	if tag.RowsAffected() == 0 {
		if j.IdempotencyKey != "" {
			prev, err := scanJob(tx.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE namespace = $1 AND idempotency_key = $2`,
				j.Namespace, j.IdempotencyKey))
			switch {
			case err == nil:
				first, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM runs r WHERE r.job_id = $1 ORDER BY r.id LIMIT 1`, prev.ID))
				var run *model.Run
				switch {
				case err == nil:
					run = &first.Run
				case !errors.Is(err, pgx.ErrNoRows):
					return store.CreateJobResult{}, fmt.Errorf("first run of %s: %w", prev.ID, err)
				}
				return store.CreateJobResult{Job: prev, Run: run, Existing: true, Conflict: prev.RequestHash != j.RequestHash}, nil
			case !errors.Is(err, pgx.ErrNoRows):
				return store.CreateJobResult{}, fmt.Errorf("job by key: %w", err)
			}
		}
		return store.CreateJobResult{Err: fmt.Errorf("job %s/%s: name or id taken: %w", j.Namespace, j.Name, model.ErrConflict)}, nil
	}
	out := store.CreateJobResult{Job: &j}
	if e.Run == nil {
		return out, nil
	}
	rr, err := createRunTx(ctx, tx, e.Run, now)
	if err != nil {
		return store.CreateJobResult{}, err
	}
	if rr.Err != nil || rr.Existing {
		if _, err := tx.Exec(ctx, `DELETE FROM jobs WHERE id = $1`, j.ID); err != nil {
			return store.CreateJobResult{}, fmt.Errorf("undo job %s: %w", j.ID, err)
		}
		return store.CreateJobResult{Err: fmt.Errorf("run %s: id or idempotency key taken: %w", e.Run.ID, model.ErrConflict)}, nil
	}
	out.Run, out.Replaced = rr.Run, rr.Replaced
	return out, nil
}

// admitKeys admits the held runs of keys, in one transaction.
func (s *Store) admitKeys(ctx context.Context, keys []string, now time.Time) ([]*model.Run, error) {
	var out []*model.Run
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = nil
		for _, key := range keys {
			rs, err := admitHeld(ctx, tx, key, utc(now))
			if err != nil {
				return err
			}
			out = append(out, rs...)
		}
		return nil
	})
	if err != nil {
		return nil, translate(err, "admit held runs")
	}
	return out, nil
}

// AdmitHeld admits the held runs of every key that has a free slot.
func (s *Store) AdmitHeld(ctx context.Context, now time.Time) ([]*model.Run, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT key FROM run_slots WHERE state = 'held'`)
	if err != nil {
		return nil, translate(err, "keys with held runs")
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate(err, "keys with held runs")
	}
	slices.Sort(keys)
	return s.admitKeys(ctx, keys, now)
}
