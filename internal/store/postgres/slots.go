package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
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

// lockKeysOf takes, in key order, the locks of the limits that the runs runIDs, or the
// active runs of job jobID, count against. A transaction that ends or changes runs under a
// limit takes these before it locks the runs: admission takes the key first and the runs
// after, and the same order everywhere keeps the two from deadlocking.
func lockKeysOf(ctx context.Context, tx pgx.Tx, runIDs []string, jobID string) error {
	rows, err := tx.Query(ctx, `SELECT DISTINCT s.key FROM run_slots s
		WHERE s.run_id = ANY($1::text[])
		   OR s.state <> 'done' AND s.run_id IN (SELECT r.id FROM runs r
				WHERE r.job_id = $2 AND r.status IN ('waiting', 'scheduled', 'queued', 'running'))
		ORDER BY 1`, runIDs, jobID)
	if err != nil {
		return fmt.Errorf("limits of the runs: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("limits of the runs: %w", err)
	}
	for _, k := range keys {
		if err := lockKey(ctx, tx, k); err != nil {
			return err
		}
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

// rateTAT reads a rate-limited key's theoretical arrival time (zero: never used). The
// caller holds the key's lock.
func rateTAT(ctx context.Context, tx pgx.Tx, key string) (time.Time, error) {
	var tat time.Time
	err := tx.QueryRow(ctx, `SELECT tat FROM rate_limits WHERE key = $1`, key).Scan(&tat)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("rate limit of %q: %w", key, err)
	}
	return tat, nil
}

// setRateTAT writes a rate-limited key's theoretical arrival time.
func setRateTAT(ctx context.Context, tx pgx.Tx, key string, tat time.Time) error {
	if _, err := tx.Exec(ctx, `INSERT INTO rate_limits (key, tat) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET tat = $2`, key, utc(tat)); err != nil {
		return fmt.Errorf("rate limit of %q: %w", key, err)
	}
	return nil
}

// reserve takes the next turn of key under rate limit r and returns when it starts. The
// caller holds the key's lock.
func reserve(ctx context.Context, tx pgx.Tx, key string, r *model.RateLimit, now time.Time) (time.Time, error) {
	tat, err := rateTAT(ctx, tx, key)
	if err != nil {
		return time.Time{}, err
	}
	at, next := scheduler.Reserve(tat, now, r)
	if err := setRateTAT(ctx, tx, key, next); err != nil {
		return time.Time{}, err
	}
	return utc(at), nil
}

// slotTx is a transaction as the store package's admission logic sees it.
type slotTx struct {
	ctx context.Context
	tx  pgx.Tx
}

var _ store.SlotTx = slotTx{}

func (s slotTx) LockKey(key string) error { return lockKey(s.ctx, s.tx, key) }

func (s slotTx) Holders(key string) (int, error) { return holders(s.ctx, s.tx, key) }

func (s slotTx) Replace(r *model.Run, holding int, now time.Time) ([]*model.Run, int, error) {
	return replace(s.ctx, s.tx, r, holding, now)
}

func (s slotTx) Reserve(key string, r *model.RateLimit, now time.Time) (time.Time, error) {
	return reserve(s.ctx, s.tx, key, r, now)
}

func (s slotTx) NextHeld(key string, now time.Time) (*store.HeldSlot, error) {
	var (
		h    store.HeldSlot
		rate int
		per  int64
		rel  *time.Time
	)
	err := s.tx.QueryRow(s.ctx, `SELECT run_id, max, rate, per_us, release_at FROM run_slots
		WHERE key = $1 AND state = 'held' AND (release_at IS NULL OR release_at <= $2) ORDER BY run_id LIMIT 1`,
		key, now).Scan(&h.RunID, &h.Max, &rate, &per, &rel)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("held runs of %q: %w", key, err)
	}
	h.Rate = store.RateFromColumns(rate, per)
	h.Reserved = rel != nil
	return &h, nil
}

func (s slotTx) HeldRun(runID string) (*model.Run, error) {
	rr, err := scanRun(s.tx.QueryRow(s.ctx, `SELECT `+runCols+` FROM runs r WHERE r.id = $1 FOR UPDATE`, runID))
	if err != nil {
		return nil, err
	}
	return &rr.Run, nil
}

func (s slotTx) SetRun(r *model.Run) error {
	if _, err := s.tx.Exec(s.ctx, `UPDATE runs SET status = $1, pending_code = $2, pending_reason = $3 WHERE id = $4`,
		string(r.Status), string(r.PendingCode), r.PendingReason, r.ID); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	return nil
}

func (s slotTx) SetSlot(runID, state string, release *time.Time) error {
	if _, err := s.tx.Exec(s.ctx, `UPDATE run_slots SET state = $1, release_at = $2 WHERE run_id = $3`, state, release, runID); err != nil {
		return fmt.Errorf("slot of run %s: %w", runID, err)
	}
	return nil
}

// replace cancels the oldest holders of r's key so that r fits, and returns them and how
// many holders are left.
func replace(ctx context.Context, tx pgx.Tx, r *model.Run, holding int, now time.Time) ([]*model.Run, int, error) {
	c := r.Concurrency
	rows, err := tx.Query(ctx, `SELECT run_id FROM run_slots WHERE key = $1 AND state = 'active' ORDER BY run_id LIMIT $2`,
		c.Key, holding-c.Max+1)
	if err != nil {
		return nil, 0, fmt.Errorf("slots of %q: %w", c.Key, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, 0, fmt.Errorf("slots of %q: %w", c.Key, err)
	}
	replaced, err := cancelRuns(ctx, tx, &store.CancelRunsParams{RunIDs: ids, Reason: scheduler.ReplacedReason(r.ID), Now: now})
	if err != nil {
		return nil, 0, err
	}
	ended := slices.DeleteFunc(slices.Clone(replaced), func(v *model.Run) bool { return !v.Status.Final() })
	// The slots of runs that ended here are free: r takes one before any held run of the
	// key (it replaces, it does not queue).
	if _, err := doneKeys(ctx, tx, ended); err != nil {
		return nil, 0, err
	}
	return replaced, holding - len(ended), nil
}

// insertSlot records r's place under its limit, as admit left r (release: when a run held
// by the rate limit starts).
func insertSlot(ctx context.Context, tx pgx.Tx, r *model.Run, release time.Time) error {
	state := store.SlotState(r)
	c := r.Concurrency
	rate, per := store.RateColumns(c.Rate)
	var rel *time.Time
	if !release.IsZero() {
		rel = &release
	}
	if _, err := tx.Exec(ctx, `INSERT INTO run_slots (run_id, key, max, policy, state, rate, per_us, release_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, r.ID, c.Key, c.Max, string(c.Policy), state, rate, per, rel); err != nil {
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
	return admitKeysTx(ctx, tx, keys, now)
}

// admitKeysTx runs admitHeld for each key, in sorted order (as keys are locked).
func admitKeysTx(ctx context.Context, tx pgx.Tx, keys []string, now time.Time) ([]*model.Run, error) {
	keys = slices.Sorted(slices.Values(keys))
	var admitted []*model.Run
	for _, key := range slices.Compact(keys) {
		rs, err := store.AdmitHeld(slotTx{ctx, tx}, key, now)
		if err != nil {
			return nil, err
		}
		admitted = append(admitted, rs...)
	}
	return admitted, nil
}

// readmit gives a reopened run (manual retry) back to its limit: it waits as a held run,
// and takes a slot now if one is free.
func readmit(ctx context.Context, tx pgx.Tx, r *model.Run, now time.Time) (*model.Run, error) {
	var key string
	err := tx.QueryRow(ctx, `UPDATE run_slots SET state = 'held', release_at = NULL WHERE run_id = $1 RETURNING key`, r.ID).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("slot of run %s: %w", r.ID, err)
	}
	r.Concurrency = &model.RunConcurrency{Key: key}
	scheduler.Hold(r, 0)
	st := slotTx{ctx, tx}
	if err := st.SetRun(r); err != nil {
		return nil, err
	}
	if _, err := store.AdmitHeld(st, key, now); err != nil {
		return nil, err
	}
	rr, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM runs r WHERE r.id = $1`, r.ID))
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return &rr.Run, nil
}

// hasLimit reports whether any of runs is created under a concurrency limit: such batches
// are written run by run in one transaction (admission counts and locks per key).
func hasLimit(runs []*model.Run) bool {
	return slices.ContainsFunc(runs, func(r *model.Run) bool { return !store.Plain(r) })
}

// createRunsTx is CreateRuns for batches with limits or dependencies.
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
	tag, err := tx.Exec(ctx, `INSERT INTO jobs (`+jobInsertCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) ON CONFLICT DO NOTHING`,
		j.ID, j.Namespace, j.Name, spec, j.Spec.Queue, j.Spec.Handler, j.Spec.Requirements.CPU, j.Spec.Requirements.MemoryMB,
		j.Spec.Requirements.GPU, labelsDoc(j.Spec.Requirements.Labels), j.Enabled, j.NextFireAt, nullString(j.IdempotencyKey), j.RequestHash, j.CreatedAt, j.UpdatedAt)
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
		if rr.Err != nil {
			return store.CreateJobResult{Err: rr.Err}, nil
		}
		return store.CreateJobResult{Err: fmt.Errorf("run %s: id or idempotency key taken: %w", e.Run.ID, model.ErrConflict)}, nil
	}
	out.Run, out.Replaced = rr.Run, rr.Replaced
	return out, nil
}

// admitWhere admits, in one transaction, the held runs of the keys that query lists.
func (s *Store) admitWhere(ctx context.Context, what, query string, now time.Time, args ...any) ([]*model.Run, error) {
	now = utc(now)
	var out []*model.Run
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		out, err = admitKeysTx(ctx, tx, keys, now)
		return err
	})
	if err != nil {
		return nil, translate(err, "%s", what)
	}
	return out, nil
}

// admitKeys admits the held runs of keys, in one transaction.
func (s *Store) admitKeys(ctx context.Context, keys []string, now time.Time) ([]*model.Run, error) {
	var out []*model.Run
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = admitKeysTx(ctx, tx, keys, utc(now))
		return err
	})
	if err != nil {
		return nil, translate(err, "admit held runs")
	}
	return out, nil
}

// AdmitHeld admits the held runs of every key that has a free slot.
func (s *Store) AdmitHeld(ctx context.Context, p *store.AdmitHeldParams) ([]*model.Run, error) {
	return s.admitWhere(ctx, "admit held runs", `SELECT DISTINCT key FROM run_slots WHERE state = 'held'`, p.Now)
}

// The releaser's statements: the keys with held runs whose turn under a rate limit came
// at $1, and the earliest such turn (index run_slots_release).
const (
	releaseDueSQL = `SELECT DISTINCT key FROM run_slots
		WHERE state = 'held' AND release_at IS NOT NULL AND release_at <= $1`
	nextReleaseSQL = `SELECT min(release_at) FROM run_slots WHERE state = 'held' AND release_at IS NOT NULL`
)

// ReleaseDue admits the held runs whose turn under a rate limit has come.
func (s *Store) ReleaseDue(ctx context.Context, p *store.ReleaseDueParams) ([]*model.Run, error) {
	return s.admitWhere(ctx, "release rate-limited runs", releaseDueSQL, p.Now, utc(p.Now))
}

// NextRelease returns the earliest turn a rate-limited held run waits for.
func (s *Store) NextRelease(ctx context.Context) (time.Time, bool, error) {
	return s.minTime(ctx, nextReleaseSQL, "next release")
}

// NextQueueTurn returns the earliest next turn after After of a rate-limited queue that has
// queued runs, or scheduled runs due at Now.
func (s *Store) NextQueueTurn(ctx context.Context, p *store.NextQueueTurnParams) (time.Time, bool, error) {
	// A queue without a rate_limits row was never leased: its turns are free.
	rows, err := s.pool.Query(ctx, `SELECT q.rate, q.rate_per_us, l.tat FROM queues q
		JOIN rate_limits l ON l.key = 'queue:' || q.name
		WHERE q.rate > 0 AND NOT q.paused
		  AND (EXISTS (SELECT 1 FROM runs r WHERE r.status = 'queued' AND r.queue = q.name)
		    OR EXISTS (SELECT 1 FROM runs r WHERE r.status = 'scheduled' AND r.queue = q.name AND r.scheduled_for <= $1))`, utc(p.Now))
	if err != nil {
		return time.Time{}, false, translate(err, "next queue turn")
	}
	defer rows.Close()
	var next time.Time
	for rows.Next() {
		var (
			rate int
			per  int64
			tat  time.Time
		)
		if err := rows.Scan(&rate, &per, &tat); err != nil {
			return time.Time{}, false, translate(err, "next queue turn")
		}
		turn := scheduler.TurnAt(tat.UTC(), store.RateFromColumns(rate, per))
		if turn.After(p.After) && (next.IsZero() || turn.Before(next)) {
			next = turn
		}
	}
	if err := rows.Err(); err != nil {
		return time.Time{}, false, translate(err, "next queue turn")
	}
	return next, !next.IsZero(), nil
}
