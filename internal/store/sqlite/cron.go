package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// NextFire returns the earliest next fire among enabled jobs (index jobs_next_fire).
func (s *Store) NextFire(ctx context.Context, p *store.NextFireParams) (time.Time, bool, error) {
	after := p.After
	var v sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT min(x) FROM (
		SELECT min(next_fire_at) AS x FROM jobs INDEXED BY jobs_next_fire
			WHERE next_fire_at IS NOT NULL AND enabled = 1 AND next_fire_at > ?1
		UNION ALL
		SELECT min(next_fire_at) FROM pipelines INDEXED BY pipelines_next_fire
			WHERE next_fire_at IS NOT NULL AND enabled = 1 AND next_fire_at > ?1)`, afterMicros(after)).Scan(&v)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next fire: %w", err)
	}
	if !v.Valid {
		return time.Time{}, false, nil
	}
	return fromMicros(v.Int64), true, nil
}

// afterMicros is the lower bound of a "later than after" query: no bound for a zero time.
func afterMicros(after time.Time) int64 {
	if after.IsZero() {
		return math.MinInt64
	}
	return micros(after)
}

// DueJobs returns the enabled jobs whose next fire is due, earliest first.
func (s *Store) DueJobs(ctx context.Context, p *store.DueJobsParams) ([]*model.Job, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+jobCols+` FROM jobs INDEXED BY jobs_next_fire
		WHERE next_fire_at IS NOT NULL AND enabled = 1 AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ?`,
		micros(p.Now), limit)
	if err != nil {
		return nil, fmt.Errorf("due jobs: %w", err)
	}
	defer rows.Close()
	var out []*model.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("due jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("due jobs: %w", err)
	}
	return out, nil
}

// advanceJobSQL moves a job's next fire on if it still is where the caller read it, and
// returns what its runs copy from it.
const advanceJobSQL = `UPDATE jobs SET next_fire_at = ? WHERE id = ? AND enabled = 1 AND next_fire_at = ?
	RETURNING ` + jobInfoCols

// FireJobs records cron fires: per fire, a compare-and-set of the job's next fire, then its
// runs, all in one transaction.
func (s *Store) FireJobs(ctx context.Context, p *store.FireJobsParams) ([]store.FireResult, error) {
	for _, f := range p.Fires {
		if err := store.CheckInstants(f.Runs...); err != nil {
			return nil, fmt.Errorf("fire jobs: %w", err)
		}
	}
	out := make([]store.FireResult, len(p.Fires))
	err := s.write(ctx, func(t *wtx) error {
		clear(out)
		if err := t.checkTerm(p.Term, micros(p.Now)); err != nil {
			return err
		}
		ins := t.stmt(t.ws.insertRun)
		adv, err := t.batch("advanceJob", 1, func(int) string { return advanceJobSQL })
		if err != nil {
			return err
		}
		queues := map[string]bool{}
		for i, f := range p.Fires {
			ji, err := scanJobInfo(adv.QueryRowContext(t.ctx, nullMicros(f.Next), f.JobID, micros(f.Expect)))
			if errors.Is(err, sql.ErrNoRows) {
				out[i].Stale = true
				continue
			}
			if err != nil {
				return fmt.Errorf("advance job %s: %w", f.JobID, err)
			}
			out[i].Runs = make([]store.CreateRunResult, len(f.Runs))
			for k, r := range f.Runs {
				if out[i].Runs[k], err = t.createRun(ins, r, ji, p.Now); err != nil {
					return err
				}
				if out[i].Runs[k].Err == nil && !out[i].Runs[k].Existing {
					queues[r.Queue] = true
				}
			}
		}
		return t.ensureQueues(queues, p.Now)
	})
	if err != nil {
		return nil, fmt.Errorf("fire jobs: %w", err)
	}
	return out, nil
}

// createRun inserts one run of a known job, admitting it under its concurrency limit. A
// run that duplicates an idempotency key or a cron instant is answered with the existing
// one.
func (t *wtx) createRun(ins *sql.Stmt, r *model.Run, ji jobInfo, now time.Time) (store.CreateRunResult, error) {
	if r.Concurrency == nil {
		unmet := 0
		if len(r.DependsOn) > 0 {
			var err error
			if unmet, err = t.prepareDeps(r, now); errors.Is(err, model.ErrNotFound) {
				return store.CreateRunResult{Err: err}, nil
			} else if err != nil {
				return store.CreateRunResult{}, err
			}
		}
		// The common case: insert, and look for what it clashed with only if it did.
		stored, ok, err := t.insertRun(ins, r, ji)
		switch {
		case err != nil:
			return store.CreateRunResult{}, err
		case ok && len(r.DependsOn) > 0:
			return store.CreateRunResult{Run: stored}, t.insertDeps(r, unmet)
		case ok:
			return store.CreateRunResult{Run: stored}, nil
		}
		prev, err := t.existingRun(r)
		switch {
		case err != nil:
			return store.CreateRunResult{}, err
		case prev != nil:
			return store.CreateRunResult{Run: prev, Existing: true}, nil
		}
		return store.CreateRunResult{Err: fmt.Errorf("run %s: id taken: %w", r.ID, model.ErrConflict)}, nil
	}
	if len(r.DependsOn) > 0 {
		return store.CreateRunResult{}, fmt.Errorf("run %s: dependencies and a concurrency limit together are not supported", r.ID)
	}
	// Under a limit, duplicates are found first: a run that is not created must not have
	// cancelled anything (policy replace).
	if prev, err := t.existingRun(r); err != nil {
		return store.CreateRunResult{}, err
	} else if prev != nil {
		return store.CreateRunResult{Run: prev, Existing: true}, nil
	}
	replaced, release, err := store.AdmitNew(slotTx{t: t}, r, now)
	if err != nil {
		return store.CreateRunResult{}, err
	}
	// The runs it cancelled ended: their dependants are skipped (or released, for those
	// that only wait for them to finish).
	if _, err := store.Resolve(depTx{t}, replaced, now); err != nil {
		return store.CreateRunResult{}, err
	}
	stored, ok, err := t.insertRun(ins, r, ji)
	if err != nil {
		return store.CreateRunResult{}, err
	}
	if !ok {
		return store.CreateRunResult{Err: fmt.Errorf("run %s: id taken: %w", r.ID, model.ErrConflict)}, nil
	}
	if err := t.insertSlot(r, release); err != nil {
		return store.CreateRunResult{}, err
	}
	return store.CreateRunResult{Run: stored, Replaced: replaced}, nil
}

// SetWebhookSecret creates or replaces a job's webhook secret.
func (s *Store) SetWebhookSecret(ctx context.Context, p *store.SetWebhookSecretParams) error {
	err := s.write(ctx, func(t *wtx) error {
		if _, err := t.materialize(p.JobID); err != nil {
			return err
		}
		var one int
		if err := t.tx.QueryRowContext(t.ctx, `SELECT 1 FROM jobs WHERE id = ?1 UNION ALL SELECT 1 FROM pipelines WHERE id = ?1`,
			p.JobID).Scan(&one); err != nil {
			return mapErr(err)
		}
		_, err := t.tx.ExecContext(t.ctx, `INSERT INTO job_secrets (job_id, secret, created_at) VALUES (?1, ?2, ?3)
			ON CONFLICT (job_id) DO UPDATE SET secret = ?2, created_at = ?3`, p.JobID, p.Secret, micros(p.Now))
		return err
	})
	if err != nil {
		return fmt.Errorf("set webhook secret of job %s: %w", p.JobID, err)
	}
	return nil
}

// WebhookSecret returns a job's webhook secret.
func (s *Store) WebhookSecret(ctx context.Context, p *store.WebhookSecretParams) (string, error) {
	var secret string
	if err := s.r.QueryRowContext(ctx, `SELECT secret FROM job_secrets WHERE job_id = ?`, p.JobID).Scan(&secret); err != nil {
		return "", fmt.Errorf("webhook secret of job %s: %w", p.JobID, mapErr(err))
	}
	return secret, nil
}

// FiredInstants returns the instants of a job's cron runs in a range (index runs_cron_instant).
func (s *Store) FiredInstants(ctx context.Context, p *store.FiredInstantsParams) ([]time.Time, error) {
	rows, err := s.r.QueryContext(ctx, firedInstantsSQL, p.JobID, micros(p.From), micros(p.To))
	if err != nil {
		return nil, fmt.Errorf("fired instants of job %s: %w", p.JobID, err)
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("fired instants of job %s: %w", p.JobID, err)
		}
		out = append(out, fromMicros(v))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fired instants of job %s: %w", p.JobID, err)
	}
	return out, nil
}
