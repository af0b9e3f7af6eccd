package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stint-dev/stint/internal/store"
)

// Retention: deleting history in small batches (store.Store.PruneRuns and the others).

// pruneGuard holds of a final run r that may go (store.Store.PruneRuns): its dependants are
// final, and the pipeline run it is a step of (if any) has every step final and, when ?1
// is set, finished before ?1, so a pipeline run goes whole. SQLite resolves dependants in
// the transaction that ends their upstream, so no end waits for its resolution here.
const pruneGuard = `r.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
	AND (r.has_dependants = 0 OR NOT EXISTS (SELECT 1 FROM run_deps d JOIN runs x ON x.id = d.run_id
		WHERE d.upstream_run_id = r.id AND x.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped')))
	AND NOT EXISTS (SELECT 1 FROM pipeline_run_steps s
		JOIN pipeline_run_steps s2 ON s2.pipeline_run_id = s.pipeline_run_id
		JOIN runs y ON y.id = s2.run_id
		WHERE s.run_id = r.id AND (y.status NOT IN ('succeeded', 'failed', 'cancelled', 'skipped')
			OR ?1 IS NOT NULL AND NOT y.finished_at < ?1))`

// Candidates of the two rules. The age rule walks runs_finished oldest first and spares a
// run when fewer than ?2 finished runs of its job are newer (runs_job), unless the run is
// anonymous (its spec is set: the job is that one run, which the rule would keep for
// ever); the count rule
// walks each job's finished runs newest first (runs_job) past its ?2 newest.
const (
	pruneAgeSQL = `SELECT r.id FROM runs r INDEXED BY runs_finished
		WHERE r.finished_at < ?1 AND ` + pruneGuard + `
		  AND (r.spec IS NOT NULL OR (SELECT count(*) FROM (SELECT 1 FROM runs n INDEXED BY runs_job WHERE n.job_id = r.job_id AND n.id > r.id
				AND n.status IN ('succeeded', 'failed', 'cancelled', 'skipped') LIMIT ?2)) >= ?2)
		ORDER BY r.finished_at LIMIT ?3`
	pruneCountSQL = `SELECT r.id FROM jobs j
		JOIN runs r ON r.id IN (SELECT x.id FROM runs x INDEXED BY runs_job
			WHERE x.job_id = j.id AND x.status IN ('succeeded', 'failed', 'cancelled', 'skipped')
			ORDER BY x.id DESC LIMIT -1 OFFSET ?2)
		WHERE ` + pruneGuard + `
		LIMIT ?3`
)

// PruneRuns deletes a batch of finished runs past retention with what belongs to them.
func (s *Store) PruneRuns(ctx context.Context, p *store.PruneRunsParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.DefaultPruneLimit
	}
	var n int64
	err := s.write(ctx, func(t *wtx) error {
		var ids []string
		if !p.Before.IsZero() {
			got, err := t.ids(pruneAgeSQL, micros(p.Before), p.KeepPerJob, limit)
			if err != nil {
				return fmt.Errorf("runs past age: %w", err)
			}
			ids = got
		}
		if p.MaxPerJob > 0 && len(ids) < limit {
			got, err := t.ids(pruneCountSQL, nil, p.MaxPerJob, limit-len(ids))
			if err != nil {
				return fmt.Errorf("runs past count: %w", err)
			}
			ids = append(ids, got...)
		}
		if len(ids) == 0 {
			return nil
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return fmt.Errorf("encode run ids: %w", err)
		}
		// The pipeline runs whose last step goes go too; then the runs' own rows.
		for _, q := range []string{
			`DELETE FROM pipeline_runs WHERE id IN (SELECT pipeline_run_id FROM pipeline_run_steps
				WHERE run_id IN (SELECT value FROM json_each(?1)))
				AND NOT EXISTS (SELECT 1 FROM pipeline_run_steps k WHERE k.pipeline_run_id = pipeline_runs.id
					AND k.run_id NOT IN (SELECT value FROM json_each(?1)))`,
			`DELETE FROM pipeline_run_steps WHERE run_id IN (SELECT value FROM json_each(?1))`,
			`DELETE FROM log_chunks WHERE run_id IN (SELECT value FROM json_each(?1))`,
			`DELETE FROM attempts WHERE run_id IN (SELECT value FROM json_each(?1))`,
			`DELETE FROM run_slots WHERE run_id IN (SELECT value FROM json_each(?1))`,
			`DELETE FROM run_deps WHERE run_id IN (SELECT value FROM json_each(?1))`,
			`DELETE FROM run_deps WHERE upstream_run_id IN (SELECT value FROM json_each(?1))`,
		} {
			if _, err := t.tx.ExecContext(t.ctx, q, string(list)); err != nil {
				return fmt.Errorf("delete what belongs to the runs: %w", err)
			}
		}
		res, err := t.tx.ExecContext(t.ctx, `DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?1))`, string(list))
		if err != nil {
			return fmt.Errorf("delete runs: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune runs: %w", err)
	}
	return int(n), nil
}

// ids runs a query of one text column in the transaction and collects it.
func (t *wtx) ids(q string, args ...any) ([]string, error) {
	rows, err := t.tx.QueryContext(t.ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// PruneWorkers deletes departed workers past retention.
func (s *Store) PruneWorkers(ctx context.Context, p *store.PruneWorkersParams) (int, error) {
	return s.pruneWhere(ctx, "prune workers", `DELETE FROM workers WHERE id IN (
		SELECT w.id FROM workers w WHERE w.last_heartbeat < ?1
			AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.worker_id = w.id AND r.status = 'running')
		LIMIT ?2)`, micros(p.Before), p.Limit)
}

// PruneRateLimits deletes rate-limit rows whose turn is long past.
func (s *Store) PruneRateLimits(ctx context.Context, p *store.PruneRateLimitsParams) (int, error) {
	return s.pruneWhere(ctx, "prune rate limits", `DELETE FROM rate_limits WHERE key IN (
		SELECT key FROM rate_limits WHERE tat < ?1 LIMIT ?2)`, micros(p.Before), p.Limit)
}

// pruneWhere runs one DELETE of at most limit rows (<= 0: store.DefaultPruneLimit) before
// before, and returns how many rows it deleted.
func (s *Store) pruneWhere(ctx context.Context, what, q string, before int64, limit int) (int, error) {
	if limit <= 0 {
		limit = store.DefaultPruneLimit
	}
	var n int64
	err := s.write(ctx, func(t *wtx) error {
		res, err := t.tx.ExecContext(t.ctx, q, before, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return int(n), nil
}
