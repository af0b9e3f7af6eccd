package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

const pipelineCols = `id, namespace, name, spec, enabled, next_fire_at, created_at, updated_at`

// scanPipeline reads pipelineCols, then extra.
func scanPipeline(row pgx.Row, extra ...any) (*model.Pipeline, error) {
	var (
		p    model.Pipeline
		spec []byte
	)
	dest := append([]any{&p.ID, &p.Namespace, &p.Name, &spec, &p.Enabled, &p.NextFireAt, &p.CreatedAt, &p.UpdatedAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(spec, &p.Spec); err != nil {
		return nil, fmt.Errorf("decode spec of pipeline %s: %w", p.ID, err)
	}
	p.NextFireAt = utcPtr(p.NextFireAt)
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return &p, nil
}

// PutPipeline creates or replaces a pipeline by namespace and name; see store.Store.
func (s *Store) PutPipeline(ctx context.Context, p *store.PutPipelineParams) (*model.Pipeline, bool, error) {
	pl := p.Pipeline
	spec, err := json.Marshal(pl.Spec)
	if err != nil {
		return nil, false, fmt.Errorf("put pipeline %q: encode spec: %w", pl.Name, err)
	}
	var created bool
	// xmax is 0 for a row the statement inserted, not for one it updated.
	out, err := scanPipeline(s.pool.QueryRow(ctx, `INSERT INTO pipelines (`+pipelineCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
		ON CONFLICT (namespace, name) DO UPDATE SET spec = $4, enabled = $5, next_fire_at = $6, updated_at = $7
		RETURNING `+pipelineCols+`, (xmax = 0)`,
		pl.ID, pl.Namespace, pl.Name, spec, pl.Enabled, utcPtr(pl.NextFireAt), utc(p.Now)), &created)
	if err != nil {
		return nil, false, translate(err, "put pipeline %s/%s", pl.Namespace, pl.Name)
	}
	return out, created, nil
}

// GetPipeline finds a pipeline by id, then by name in the namespace.
func (s *Store) GetPipeline(ctx context.Context, p *store.GetPipelineParams) (*model.Pipeline, error) {
	ns := p.Namespace
	if ns == "" {
		ns = model.DefaultNamespace
	}
	pl, err := scanPipeline(s.pool.QueryRow(ctx, `SELECT `+pipelineCols+` FROM pipelines
		WHERE id = $1 OR (namespace = $2 AND name = $1) ORDER BY (id = $1) DESC LIMIT 1`, p.IDOrName, ns))
	if err != nil {
		return nil, translate(err, "get pipeline %q", p.IDOrName)
	}
	return pl, nil
}

// ListPipelines lists a namespace's pipelines (all when empty) by name.
func (s *Store) ListPipelines(ctx context.Context, p *store.ListPipelinesParams) ([]*model.Pipeline, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+pipelineCols+` FROM pipelines WHERE $1 = '' OR namespace = $1 ORDER BY name, namespace`, p.Namespace)
	if err != nil {
		return nil, translate(err, "list pipelines")
	}
	return collectPipelines(rows)
}

func collectPipelines(rows pgx.Rows) ([]*model.Pipeline, error) {
	defer rows.Close()
	var out []*model.Pipeline
	for rows.Next() {
		pl, err := scanPipeline(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, pl)
	}
	return out, rows.Err()
}

// DeletePipeline deletes a pipeline; its runs stay.
func (s *Store) DeletePipeline(ctx context.Context, p *store.DeletePipelineParams) error {
	id := p.ID
	var n int
	err := s.pool.QueryRow(ctx, `WITH d AS (DELETE FROM pipelines WHERE id = $1 RETURNING id),
		s AS (DELETE FROM job_secrets WHERE job_id IN (SELECT id FROM d))
		SELECT count(*) FROM d`, id).Scan(&n)
	if err != nil {
		return translate(err, "delete pipeline %s", id)
	}
	if n == 0 {
		return fmt.Errorf("delete pipeline %s: %w", id, model.ErrNotFound)
	}
	return nil
}

// DuePipelines returns the enabled pipelines due to fire at Now.
func (s *Store) DuePipelines(ctx context.Context, p *store.DuePipelinesParams) ([]*model.Pipeline, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+pipelineCols+` FROM pipelines
		WHERE next_fire_at IS NOT NULL AND enabled AND next_fire_at <= $1 ORDER BY next_fire_at LIMIT $2`, utc(p.Now), limit)
	if err != nil {
		return nil, translate(err, "due pipelines")
	}
	out, err := collectPipelines(rows)
	if err != nil {
		return nil, translate(err, "due pipelines")
	}
	return out, nil
}

// SetPipelineNextFire moves a pipeline's next fire if it is still Expect.
func (s *Store) SetPipelineNextFire(ctx context.Context, p *store.SetPipelineNextFireParams) (bool, error) {
	var moved bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := checkTerm(ctx, tx, p.Term); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE pipelines SET next_fire_at = $1 WHERE id = $2 AND enabled AND next_fire_at = $3`,
			utcPtr(p.Next), p.ID, utc(p.Expect))
		moved = tag.RowsAffected() > 0
		return err
	})
	if err != nil {
		return false, translate(err, "pipeline %s: next fire", p.ID)
	}
	return moved, nil
}

// firePipeline starts a pipeline run inside a graph's transaction: for a cron fire, the
// compare-and-set of the pipeline's next fire; then the pipeline run's row.
func firePipeline(ctx context.Context, tx pgx.Tx, p *store.CreateGraphParams) error {
	pr := p.PipelineRun
	if p.FireNext != nil {
		if err := checkTerm(ctx, tx, p.Term); err != nil {
			return err
		}
		var next *time.Time
		if !p.FireNext.IsZero() {
			next = utcPtr(p.FireNext)
		}
		tag, err := tx.Exec(ctx, `UPDATE pipelines SET next_fire_at = $1 WHERE id = $2 AND enabled AND next_fire_at = $3`,
			next, pr.PipelineID, utc(pr.ScheduledFor))
		if err != nil {
			return fmt.Errorf("pipeline %s: next fire: %w", pr.PipelineID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("pipeline %s at %s: %w", pr.PipelineID, pr.ScheduledFor.Format(time.RFC3339), store.ErrStale)
		}
	}
	var args []byte
	if len(pr.Args) > 0 {
		args = pr.Args
	}
	tag, err := tx.Exec(ctx, `INSERT INTO pipeline_runs (id, pipeline_id, namespace, pipeline_name, trigger_kind,
		scheduled_for, args, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
		pr.ID, pr.PipelineID, pr.Namespace, pr.PipelineName, string(pr.Trigger), utc(pr.ScheduledFor), args, utc(pr.CreatedAt))
	if err != nil {
		return fmt.Errorf("pipeline run %s: %w", pr.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pipeline run %s of %s at %s: already fired: %w", pr.ID, pr.PipelineID,
			pr.ScheduledFor.Format(time.RFC3339), store.ErrStale)
	}
	return nil
}

// insertSteps names the run of each step of a pipeline run.
func insertSteps(ctx context.Context, tx pgx.Tx, pipelineRun string, steps []string, runs []*model.Run) error {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	_, err := tx.Exec(ctx, `INSERT INTO pipeline_run_steps (pipeline_run_id, step, run_id)
		SELECT $1, s, r FROM unnest($2::text[], $3::text[]) AS v(s, r)`, pipelineRun, steps, ids)
	if err != nil {
		return fmt.Errorf("pipeline run %s: steps: %w", pipelineRun, err)
	}
	return nil
}

const pipelineRunCols = `p.id, p.pipeline_id, p.namespace, p.pipeline_name, p.trigger_kind, p.scheduled_for, p.args, p.created_at`

func scanPipelineRun(row pgx.Row) (*model.PipelineRun, error) {
	var (
		pr      model.PipelineRun
		trigger string
		args    []byte
	)
	if err := row.Scan(&pr.ID, &pr.PipelineID, &pr.Namespace, &pr.PipelineName, &trigger, &pr.ScheduledFor, &args, &pr.CreatedAt); err != nil {
		return nil, err
	}
	pr.Trigger = model.Trigger(trigger)
	pr.Args = compactJSON(args)
	pr.ScheduledFor, pr.CreatedAt = pr.ScheduledFor.UTC(), pr.CreatedAt.UTC()
	pr.Steps = map[string]*model.Run{}
	return &pr, nil
}

// GetPipelineRun returns a pipeline run with its steps' runs, read in one snapshot.
func (s *Store) GetPipelineRun(ctx context.Context, p *store.GetPipelineRunParams) (*model.PipelineRun, error) {
	id := p.ID
	var pr *model.PipelineRun
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if pr, err = scanPipelineRun(tx.QueryRow(ctx, `SELECT `+pipelineRunCols+` FROM pipeline_runs p WHERE p.id = $1`, id)); err != nil {
			return err
		}
		return fillSteps(ctx, tx, []*model.PipelineRun{pr})
	})
	if err != nil {
		return nil, translate(err, "get pipeline run %s", id)
	}
	return pr, nil
}

// ListPipelineRuns pages a pipeline's runs, newest first.
func (s *Store) ListPipelineRuns(ctx context.Context, p *store.ListPipelineRunsParams) (*store.PipelineRunPage, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	page := &store.PipelineRunPage{}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		*page = store.PipelineRunPage{}
		rows, err := tx.Query(ctx, `SELECT `+pipelineRunCols+` FROM pipeline_runs p
			WHERE p.pipeline_id = $1 AND ($2 = '' OR p.id < $2) ORDER BY p.id DESC LIMIT $3`, p.PipelineID, p.Cursor, limit+1)
		if err != nil {
			return err
		}
		for rows.Next() {
			pr, err := scanPipelineRun(rows)
			if err != nil {
				rows.Close()
				return err
			}
			page.Runs = append(page.Runs, pr)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(page.Runs) > limit {
			page.Runs = page.Runs[:limit]
			page.NextCursor = page.Runs[limit-1].ID
		}
		return fillSteps(ctx, tx, page.Runs)
	})
	if err != nil {
		return nil, translate(err, "list pipeline runs")
	}
	return page, nil
}

// fillSteps reads the steps' runs of pipeline runs.
func fillSteps(ctx context.Context, tx pgx.Tx, prs []*model.PipelineRun) error {
	if len(prs) == 0 {
		return nil
	}
	byID := make(map[string]*model.PipelineRun, len(prs))
	ids := make([]string, len(prs))
	for i, pr := range prs {
		byID[pr.ID], ids[i] = pr, pr.ID
	}
	rows, err := tx.Query(ctx, `SELECT `+runCols+`, s.pipeline_run_id, s.step
		FROM pipeline_run_steps s JOIN runs r ON r.id = s.run_id WHERE s.pipeline_run_id = ANY($1::text[])`, ids)
	if err != nil {
		return fmt.Errorf("steps: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r                        runRow
			status, pending, trigger string
			args                     []byte
			prID, step               string
		)
		if err := rows.Scan(append(runDest(&r, &status, &pending, &trigger, &args), &prID, &step)...); err != nil {
			return fmt.Errorf("steps: %w", err)
		}
		fixRun(&r, status, pending, trigger, args)
		byID[prID].Steps[step] = &r.Run
	}
	return rows.Err()
}
