package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// nextFireSQL is the earliest next fire among enabled jobs and pipelines, later than $1
// when it is not NULL (indexes jobs_next_fire, pipelines_next_fire).
const nextFireSQL = `SELECT least(
	(SELECT min(next_fire_at) FROM jobs
		WHERE next_fire_at IS NOT NULL AND enabled AND ($1::timestamptz IS NULL OR next_fire_at > $1)),
	(SELECT min(next_fire_at) FROM pipelines
		WHERE next_fire_at IS NOT NULL AND enabled AND ($1::timestamptz IS NULL OR next_fire_at > $1)))`

// dueJobsSQL lists at most $2 enabled jobs whose next fire is due at $1, earliest first.
const dueJobsSQL = `SELECT ` + jobCols + ` FROM jobs
	WHERE next_fire_at IS NOT NULL AND enabled AND next_fire_at <= $1 ORDER BY next_fire_at LIMIT $2`

// NextFire returns the earliest next fire among enabled jobs (index jobs_next_fire).
func (s *Store) NextFire(ctx context.Context, p *store.NextFireParams) (time.Time, bool, error) {
	after := p.After
	var t *time.Time
	if err := s.pool.QueryRow(ctx, nextFireSQL, afterTime(after)).Scan(&t); err != nil {
		return time.Time{}, false, translate(err, "next fire")
	}
	if t == nil {
		return time.Time{}, false, nil
	}
	return t.UTC(), true, nil
}

// afterTime is the lower bound of a "later than after" query: nil (none) for a zero time.
func afterTime(after time.Time) *time.Time {
	if after.IsZero() {
		return nil
	}
	a := utc(after)
	return &a
}

// DueJobs returns the enabled jobs whose next fire is due, earliest first.
func (s *Store) DueJobs(ctx context.Context, p *store.DueJobsParams) ([]*model.Job, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, dueJobsSQL, utc(p.Now), limit)
	if err != nil {
		return nil, translate(err, "due jobs")
	}
	defer rows.Close()
	var out []*model.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, translate(err, "due jobs")
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err, "due jobs")
	}
	return out, nil
}

// FireJobs records cron fires in one transaction, in a few statements whatever their
// number: the jobs are locked in id order (two servers firing the same jobs cannot
// deadlock), their next fires set by one compare-and-set UPDATE, and the runs of the fires
// that applied inserted by one statement (runs under a limit one by one, as admission
// needs).
func (s *Store) FireJobs(ctx context.Context, p *store.FireJobsParams) ([]store.FireResult, error) {
	out := make([]store.FireResult, len(p.Fires))
	now := utc(p.Now)
	ids := make([]string, len(p.Fires))
	expect := make([]time.Time, len(p.Fires))
	next := make([]*time.Time, len(p.Fires))
	for i, f := range p.Fires {
		ids[i], expect[i], next[i] = f.JobID, utc(f.Expect), utcPtr(f.Next)
		if err := store.CheckInstants(f.Runs...); err != nil {
			return nil, fmt.Errorf("fire jobs: %w", err)
		}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		clear(out)
		if err := checkTerm(ctx, tx, p.Term); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT id FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids); err != nil {
			return fmt.Errorf("lock jobs: %w", err)
		}
		rows, err := tx.Query(ctx, `UPDATE jobs j SET next_fire_at = f.next
			FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) AS f(id, expect, next)
			WHERE j.id = f.id AND j.enabled AND j.next_fire_at = f.expect
			RETURNING j.id`, ids, expect, next)
		if err != nil {
			return fmt.Errorf("advance jobs: %w", err)
		}
		advanced, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("advance jobs: %w", err)
		}
		applied := make(map[string]bool, len(advanced))
		for _, id := range advanced {
			applied[id] = true
		}
		type at struct{ fire, run int }
		var free []*model.Run
		var freeAt []at
		for i, f := range p.Fires {
			if !applied[f.JobID] {
				out[i].Stale = true
				continue
			}
			out[i].Runs = make([]store.CreateRunResult, len(f.Runs))
			for k, r := range f.Runs {
				if r.Concurrency != nil {
					if out[i].Runs[k], err = createRunTx(ctx, tx, r, now); err != nil {
						return err
					}
					continue
				}
				free = append(free, r)
				freeAt = append(freeAt, at{i, k})
			}
		}
		if len(free) == 0 {
			return nil
		}
		res, err := createRunsBatch(ctx, tx, free, now)
		if err != nil {
			return err
		}
		for j, a := range freeAt {
			out[a.fire].Runs[a.run] = res[j]
		}
		return nil
	})
	if err != nil {
		return nil, translate(err, "fire jobs")
	}
	return out, nil
}

// existingRunSQL finds the run a new one duplicates: same idempotency key ($1, when not
// empty), or, for a cron run ($2), same job ($3) and instant ($4).
const existingRunSQL = `SELECT ` + runCols + ` FROM runs r
	WHERE ($1 <> '' AND r.idempotency_key = $1)
	   OR ($2 AND r.trigger_kind = 'cron' AND r.job_id = $3 AND ` + cronInstantR + ` = $4)
	LIMIT 1`

// createRunTx inserts one run of an existing job inside tx, admitting it under its
// concurrency limit. A run that duplicates an idempotency key or a cron instant is
// answered with the existing one.
func createRunTx(ctx context.Context, tx pgx.Tx, r *model.Run, now time.Time) (store.CreateRunResult, error) {
	r = normalizeRun(r)
	prev, err := scanRun(tx.QueryRow(ctx, existingRunSQL, r.IdempotencyKey, r.Trigger == model.TriggerCron, r.JobID, r.Instant))
	switch {
	case err == nil:
		return store.CreateRunResult{Run: &prev.Run, Existing: true}, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return store.CreateRunResult{}, fmt.Errorf("run %s: find existing: %w", r.ID, err)
	}
	var (
		replaced []*model.Run
		release  time.Time
		unmet    int
	)
	if len(r.DependsOn) > 0 {
		if r.Concurrency != nil {
			return store.CreateRunResult{}, fmt.Errorf("run %s: dependencies and a concurrency limit together are not supported", r.ID)
		}
		if unmet, err = prepareDeps(ctx, tx, r, now); errors.Is(err, model.ErrNotFound) {
			return store.CreateRunResult{Err: err}, nil
		} else if err != nil {
			return store.CreateRunResult{}, err
		}
	}
	if r.Concurrency != nil {
		if replaced, release, err = store.AdmitNew(slotTx{ctx, tx}, r, now); err != nil {
			return store.CreateRunResult{}, err
		}
		// The runs it cancelled ended: their dependants are skipped (or released, for
		// those that only wait for them to finish).
		if _, err := store.Resolve(depTx{ctx, tx}, replaced, now); err != nil {
			return store.CreateRunResult{}, err
		}
	}
	var in runInput
	in.add(r, "", model.Requirements{})
	inserted, err := insertRuns(ctx, tx, &in, now)
	if err != nil {
		return store.CreateRunResult{}, fmt.Errorf("insert run %s: %w", r.ID, err)
	}
	if inserted[r.ID] == nil {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1)`, r.JobID).Scan(&exists); err != nil {
			return store.CreateRunResult{}, fmt.Errorf("run %s: job: %w", r.ID, err)
		}
		if !exists {
			return store.CreateRunResult{Err: fmt.Errorf("create run %s: job %s: %w", r.ID, r.JobID, model.ErrNotFound)}, nil
		}
		return store.CreateRunResult{Err: fmt.Errorf("create run %s: id taken: %w", r.ID, model.ErrConflict)}, nil
	}
	if r.Concurrency != nil {
		if err := insertSlot(ctx, tx, r, release); err != nil {
			return store.CreateRunResult{}, err
		}
	}
	r.Requirements = *inserted[r.ID]
	if len(r.DependsOn) > 0 {
		if err := insertDeps(ctx, tx, r, unmet); err != nil {
			return store.CreateRunResult{}, err
		}
	}
	return store.CreateRunResult{Run: r, Replaced: replaced}, nil
}

// SetWebhookSecret creates or replaces a job's webhook secret. An anonymous job first gets
// its jobs row.
func (s *Store) SetWebhookSecret(ctx context.Context, p *store.SetWebhookSecretParams) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := materialize(ctx, tx, p.JobID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO job_secrets (job_id, secret, created_at)
			SELECT id, $2, $3 FROM (SELECT id FROM jobs WHERE id = $1 UNION ALL SELECT id FROM pipelines WHERE id = $1) o
			ON CONFLICT (job_id) DO UPDATE SET secret = $2, created_at = $3`, p.JobID, p.Secret, utc(p.Now))
		if err != nil {
			return translate(err, "set webhook secret of job %s", p.JobID)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("set webhook secret of job %s: %w", p.JobID, model.ErrNotFound)
		}
		return nil
	})
}

// WebhookSecret returns a job's webhook secret.
func (s *Store) WebhookSecret(ctx context.Context, p *store.WebhookSecretParams) (string, error) {
	var secret string
	if err := s.pool.QueryRow(ctx, `SELECT secret FROM job_secrets WHERE job_id = $1`, p.JobID).Scan(&secret); err != nil {
		return "", translate(err, "webhook secret of job %s", p.JobID)
	}
	return secret, nil
}

// firedInstantsSQL lists the instants of job $1's cron runs in [$2, $3] (index runs_cron_instant).
const firedInstantsSQL = `SELECT ` + cronInstant + ` AS instant FROM runs
	WHERE job_id = $1 AND ` + cronInstant + ` BETWEEN $2 AND $3 AND trigger_kind = 'cron' ORDER BY 1`

// FiredInstants returns the instants of a job's cron runs in a range (index runs_cron_instant).
func (s *Store) FiredInstants(ctx context.Context, p *store.FiredInstantsParams) ([]time.Time, error) {
	rows, err := s.pool.Query(ctx, firedInstantsSQL, p.JobID, utc(p.From), utc(p.To))
	if err != nil {
		return nil, translate(err, "fired instants of job %s", p.JobID)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (time.Time, error) {
		var t time.Time
		err := row.Scan(&t)
		return t.UTC(), err
	})
	if err != nil {
		return nil, translate(err, "fired instants of job %s", p.JobID)
	}
	return out, nil
}
