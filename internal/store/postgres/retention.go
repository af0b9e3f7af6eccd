package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/store"
)

// Retention: deleting history in small batches (store.Store.PruneRuns and the others).

// pruneGuard holds of a final run r that may go (store.Store.PruneRuns): its end is
// resolved, its dependants are final, and the pipeline run it is a step of (if any) has
// every step final and, when $1 is set, finished before $1, so a pipeline run goes whole.
const pruneGuard = `r.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
	AND NOT EXISTS (SELECT 1 FROM dep_outbox o WHERE o.run_id = r.id)
	AND (NOT r.has_dependants OR NOT EXISTS (SELECT 1 FROM run_deps d JOIN runs x ON x.id = d.run_id
		WHERE d.upstream_run_id = r.id AND x.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped')))
	AND NOT EXISTS (SELECT 1 FROM pipeline_run_steps s
		JOIN pipeline_run_steps s2 ON s2.pipeline_run_id = s.pipeline_run_id
		JOIN runs y ON y.id = s2.run_id
		WHERE s.run_id = r.id AND (y.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped')
			OR $1::timestamptz IS NOT NULL AND NOT y.finished_at < $1))`

// Candidates of the two rules, locked (a run another transaction holds is left for the
// next batch). The age rule walks runs_finished oldest first and spares a run when fewer
// than $2 finished runs of its job are newer (runs_job), unless the run is anonymous (its
// spec is set: the job is that one run, and sparing it would keep every one-off job for
// ever); the count rule walks each job's
// finished runs newest first (runs_job) past its $2 newest.
const (
	pruneAgeSQL = `SELECT r.id FROM runs r
		WHERE r.finished_at < $1 AND ` + pruneGuard + `
		  AND (r.spec IS NOT NULL OR (SELECT count(*) FROM (SELECT 1 FROM runs n WHERE n.job_id = r.job_id AND n.id > r.id
				AND n.status IN ('succeeded', 'failed', 'cancelled', 'skipped') LIMIT $2) k) >= $2)
		ORDER BY r.finished_at LIMIT $3 FOR UPDATE OF r SKIP LOCKED`
	pruneCountSQL = `SELECT r.id FROM jobs j
		CROSS JOIN LATERAL (SELECT x.id FROM runs x
			WHERE x.job_id = j.id AND x.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
			ORDER BY x.id DESC OFFSET $2) c
		JOIN runs r ON r.id = c.id
		WHERE ` + pruneGuard + `
		LIMIT $3 FOR UPDATE OF r SKIP LOCKED`
)

// PruneRuns deletes a batch of finished runs past retention with what belongs to them.
func (s *Store) PruneRuns(ctx context.Context, p *store.PruneRunsParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.DefaultPruneLimit
	}
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		n = 0
		// The store's connections run without JIT (Open): the candidates' estimated cost
		// passes jit_above_cost on a big store, and compiling took 1.7 to 3.4 s of CPU per
		// batch for a statement that runs in 2 ms (BENCHMARKS.md, "Retention").
		var ids []string
		if !p.Before.IsZero() {
			rows, err := tx.Query(ctx, pruneAgeSQL, utc(p.Before), p.KeepPerJob, limit)
			if err != nil {
				return fmt.Errorf("runs past age: %w", err)
			}
			if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return fmt.Errorf("runs past age: %w", err)
			}
		}
		if p.MaxPerJob > 0 && len(ids) < limit {
			rows, err := tx.Query(ctx, pruneCountSQL, nil, p.MaxPerJob, limit-len(ids))
			if err != nil {
				return fmt.Errorf("runs past count: %w", err)
			}
			more, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return fmt.Errorf("runs past count: %w", err)
			}
			ids = append(ids, more...)
		}
		if len(ids) == 0 {
			return nil
		}
		// The pipeline runs whose last step goes go too; then the runs' own rows.
		if _, err := tx.Exec(ctx, `WITH s AS (DELETE FROM pipeline_run_steps WHERE run_id = ANY($1::text[])
				RETURNING pipeline_run_id)
			DELETE FROM pipeline_runs p WHERE p.id IN (SELECT pipeline_run_id FROM s)
				AND NOT EXISTS (SELECT 1 FROM pipeline_run_steps k
					WHERE k.pipeline_run_id = p.id AND k.run_id <> ALL($1::text[]))`, ids); err != nil {
			return fmt.Errorf("delete pipeline runs: %w", err)
		}
		for _, q := range []string{
			`DELETE FROM log_chunks WHERE run_id = ANY($1::text[])`,
			`DELETE FROM attempts WHERE run_id = ANY($1::text[])`,
			`DELETE FROM run_slots WHERE run_id = ANY($1::text[])`,
			`DELETE FROM run_deps WHERE run_id = ANY($1::text[])`,
			`DELETE FROM run_deps WHERE upstream_run_id = ANY($1::text[])`,
		} {
			if _, err := tx.Exec(ctx, q, ids); err != nil {
				return fmt.Errorf("delete what belongs to the runs: %w", err)
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM runs WHERE id = ANY($1::text[])`, ids)
		if err != nil {
			return fmt.Errorf("delete runs: %w", err)
		}
		n = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return 0, translate(err, "prune runs")
	}
	return n, nil
}

// PruneWorkers deletes departed workers past retention.
func (s *Store) PruneWorkers(ctx context.Context, p *store.PruneWorkersParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.DefaultPruneLimit
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM workers WHERE id IN (
		SELECT w.id FROM workers w WHERE w.last_heartbeat < $1
			AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.worker_id = w.id AND r.status = 'running')
		LIMIT $2 FOR UPDATE SKIP LOCKED)`, utc(p.Before), limit)
	if err != nil {
		return 0, translate(err, "prune workers")
	}
	return int(tag.RowsAffected()), nil
}

// PruneRateLimits deletes rate-limit rows whose turn is long past. A row is read and written
// under its key's lock (lockKey), which this does not take: the DELETE's condition is
// checked again on the row as it is once its lock is free, so a tat just moved ahead stays.
func (s *Store) PruneRateLimits(ctx context.Context, p *store.PruneRateLimitsParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.DefaultPruneLimit
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM rate_limits WHERE key IN (
		SELECT key FROM rate_limits WHERE tat < $1 LIMIT $2 FOR UPDATE SKIP LOCKED) AND tat < $1`, utc(p.Before), limit)
	if err != nil {
		return 0, translate(err, "prune rate limits")
	}
	return int(tag.RowsAffected()), nil
}
