package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

const pipelineCols = `id, namespace, name, spec, enabled, next_fire_at, created_at, updated_at`

func scanPipeline(sc scanner) (*model.Pipeline, error) {
	var (
		p                model.Pipeline
		spec             []byte
		enabled          int
		next             sql.NullInt64
		created, updated int64
	)
	if err := sc.Scan(&p.ID, &p.Namespace, &p.Name, &spec, &enabled, &next, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(spec, &p.Spec); err != nil {
		return nil, fmt.Errorf("decode spec of pipeline %s: %w", p.ID, err)
	}
	p.Enabled = enabled != 0
	p.NextFireAt = fromNullMicros(next)
	p.CreatedAt, p.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &p, nil
}

// PutPipeline creates or replaces a pipeline by namespace and name; see store.Store.
func (s *Store) PutPipeline(ctx context.Context, p *store.PutPipelineParams) (*model.Pipeline, bool, error) {
	pl := p.Pipeline
	spec, err := json.Marshal(pl.Spec)
	if err != nil {
		return nil, false, fmt.Errorf("put pipeline %q: encode spec: %w", pl.Name, err)
	}
	var (
		out     *model.Pipeline
		created bool
	)
	err = s.write(ctx, func(t *wtx) error {
		out, created = nil, false
		row := t.tx.QueryRowContext(t.ctx, `UPDATE pipelines SET spec = ?, enabled = ?, next_fire_at = ?, updated_at = ?
			WHERE namespace = ? AND name = ? RETURNING `+pipelineCols,
			spec, boolInt(pl.Enabled), nullMicros(pl.NextFireAt), micros(p.Now), pl.Namespace, pl.Name)
		out, err = scanPipeline(row)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		created = true
		out, err = scanPipeline(t.tx.QueryRowContext(t.ctx, `INSERT INTO pipelines (`+pipelineCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+pipelineCols,
			pl.ID, pl.Namespace, pl.Name, spec, boolInt(pl.Enabled), nullMicros(pl.NextFireAt), micros(p.Now), micros(p.Now)))
		return mapErr(err)
	})
	if err != nil {
		return nil, false, fmt.Errorf("put pipeline %s/%s: %w", pl.Namespace, pl.Name, err)
	}
	return out, created, nil
}

// GetPipeline finds a pipeline by id, then by name in the namespace.
func (s *Store) GetPipeline(ctx context.Context, p *store.GetPipelineParams) (*model.Pipeline, error) {
	pl, err := scanPipeline(s.r.QueryRowContext(ctx, `SELECT `+pipelineCols+` FROM pipelines WHERE id = ?`, p.IDOrName))
	if errors.Is(err, sql.ErrNoRows) {
		ns := p.Namespace
		if ns == "" {
			ns = model.DefaultNamespace
		}
		pl, err = scanPipeline(s.r.QueryRowContext(ctx, `SELECT `+pipelineCols+` FROM pipelines WHERE namespace = ? AND name = ?`, ns, p.IDOrName))
	}
	if err != nil {
		return nil, fmt.Errorf("get pipeline %q: %w", p.IDOrName, mapErr(err))
	}
	return pl, nil
}

// ListPipelines lists a namespace's pipelines (all when empty) by name.
func (s *Store) ListPipelines(ctx context.Context, p *store.ListPipelinesParams) ([]*model.Pipeline, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+pipelineCols+` FROM pipelines WHERE ? = '' OR namespace = ? ORDER BY name, namespace`,
		p.Namespace, p.Namespace)
	if err != nil {
		return nil, fmt.Errorf("list pipelines: %w", err)
	}
	defer rows.Close()
	var out []*model.Pipeline
	for rows.Next() {
		pl, err := scanPipeline(rows)
		if err != nil {
			return nil, fmt.Errorf("list pipelines: %w", err)
		}
		out = append(out, pl)
	}
	return out, rows.Err()
}

// DeletePipeline deletes a pipeline; its runs stay.
func (s *Store) DeletePipeline(ctx context.Context, p *store.DeletePipelineParams) error {
	id := p.ID
	return s.write(ctx, func(t *wtx) error {
		res, err := t.tx.ExecContext(t.ctx, `DELETE FROM pipelines WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete pipeline %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("delete pipeline %s: %w", id, model.ErrNotFound)
		}
		if _, err := t.tx.ExecContext(t.ctx, `DELETE FROM job_secrets WHERE job_id = ?`, id); err != nil {
			return fmt.Errorf("delete pipeline %s: webhook secret: %w", id, err)
		}
		return nil
	})
}

// DuePipelines returns the enabled pipelines due to fire at Now.
func (s *Store) DuePipelines(ctx context.Context, p *store.DuePipelinesParams) ([]*model.Pipeline, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+pipelineCols+` FROM pipelines INDEXED BY pipelines_next_fire
		WHERE next_fire_at IS NOT NULL AND enabled = 1 AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ?`, micros(p.Now), limit)
	if err != nil {
		return nil, fmt.Errorf("due pipelines: %w", err)
	}
	defer rows.Close()
	var out []*model.Pipeline
	for rows.Next() {
		pl, err := scanPipeline(rows)
		if err != nil {
			return nil, fmt.Errorf("due pipelines: %w", err)
		}
		out = append(out, pl)
	}
	return out, rows.Err()
}

// SetPipelineNextFire moves a pipeline's next fire if it is still Expect.
func (s *Store) SetPipelineNextFire(ctx context.Context, p *store.SetPipelineNextFireParams) (bool, error) {
	var moved bool
	err := s.write(ctx, func(t *wtx) error {
		if err := t.checkTerm(p.Term, micros(p.Now)); err != nil {
			return err
		}
		res, err := t.tx.ExecContext(t.ctx, `UPDATE pipelines SET next_fire_at = ? WHERE id = ? AND enabled = 1 AND next_fire_at = ?`,
			nullMicros(p.Next), p.ID, micros(p.Expect))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		moved = n > 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pipeline %s: next fire: %w", p.ID, err)
	}
	return moved, nil
}

// firePipeline starts a pipeline run inside a graph's transaction: for a cron fire, the
// compare-and-set of the pipeline's next fire; then the pipeline run's row.
func (t *wtx) firePipeline(p *store.CreateGraphParams) error {
	pr := p.PipelineRun
	if p.FireNext != nil {
		if err := t.checkTerm(p.Term, micros(p.Now)); err != nil {
			return err
		}
		res, err := t.tx.ExecContext(t.ctx, `UPDATE pipelines SET next_fire_at = ? WHERE id = ? AND enabled = 1 AND next_fire_at = ?`,
			nullMicros(nonZero(p.FireNext)), pr.PipelineID, micros(pr.ScheduledFor))
		if err != nil {
			return fmt.Errorf("pipeline %s: next fire: %w", pr.PipelineID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("pipeline %s at %s: %w", pr.PipelineID, pr.ScheduledFor.Format(time.RFC3339), store.ErrStale)
		}
	}
	var args any
	if len(pr.Args) > 0 {
		args = []byte(pr.Args)
	}
	res, err := t.tx.ExecContext(t.ctx, `INSERT INTO pipeline_runs (id, pipeline_id, namespace, pipeline_name, trigger_kind,
		scheduled_for, args, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		pr.ID, pr.PipelineID, pr.Namespace, pr.PipelineName, string(pr.Trigger), micros(pr.ScheduledFor), args, micros(pr.CreatedAt))
	if err != nil {
		return fmt.Errorf("pipeline run %s: %w", pr.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("pipeline run %s of %s at %s: already fired: %w", pr.ID, pr.PipelineID,
			pr.ScheduledFor.Format(time.RFC3339), store.ErrStale)
	}
	return nil
}

// insertSteps names the run of each step of a pipeline run.
func (t *wtx) insertSteps(pipelineRun string, steps []string, runs []*model.Run) error {
	for i, step := range steps {
		if _, err := t.tx.ExecContext(t.ctx, `INSERT INTO pipeline_run_steps (pipeline_run_id, step, run_id) VALUES (?, ?, ?)`,
			pipelineRun, step, runs[i].ID); err != nil {
			return fmt.Errorf("pipeline run %s: step %q: %w", pipelineRun, step, mapErr(err))
		}
	}
	return nil
}

const pipelineRunCols = `id, pipeline_id, namespace, pipeline_name, trigger_kind, scheduled_for, args, created_at`

func scanPipelineRun(sc scanner) (*model.PipelineRun, error) {
	var (
		pr             model.PipelineRun
		trigger        string
		args           []byte
		sched, created int64
	)
	if err := sc.Scan(&pr.ID, &pr.PipelineID, &pr.Namespace, &pr.PipelineName, &trigger, &sched, &args, &created); err != nil {
		return nil, err
	}
	pr.Trigger = model.Trigger(trigger)
	if len(args) > 0 {
		pr.Args = json.RawMessage(args)
	}
	pr.ScheduledFor, pr.CreatedAt = fromMicros(sched), fromMicros(created)
	pr.Steps = map[string]*model.Run{}
	return &pr, nil
}

// GetPipelineRun returns a pipeline run with its steps' runs, read in one snapshot.
func (s *Store) GetPipelineRun(ctx context.Context, p *store.GetPipelineRunParams) (*model.PipelineRun, error) {
	id := p.ID
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("get pipeline run %s: %w", id, err)
	}
	defer func() { _ = tx.Rollback() }()
	pr, err := scanPipelineRun(tx.QueryRowContext(ctx, `SELECT `+pipelineRunCols+` FROM pipeline_runs WHERE id = ?`, id))
	if err != nil {
		return nil, fmt.Errorf("get pipeline run %s: %w", id, mapErr(err))
	}
	if err := fillSteps(ctx, tx, []*model.PipelineRun{pr}); err != nil {
		return nil, fmt.Errorf("get pipeline run %s: %w", id, err)
	}
	return pr, nil
}

// ListPipelineRuns pages a pipeline's runs, newest first.
func (s *Store) ListPipelineRuns(ctx context.Context, p *store.ListPipelineRunsParams) (*store.PipelineRunPage, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("list pipeline runs: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, `SELECT `+pipelineRunCols+` FROM pipeline_runs INDEXED BY pipeline_runs_pipeline
		WHERE pipeline_id = ? AND (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`, p.PipelineID, p.Cursor, p.Cursor, limit+1)
	if err != nil {
		return nil, fmt.Errorf("list pipeline runs: %w", err)
	}
	page := &store.PipelineRunPage{}
	for rows.Next() {
		pr, err := scanPipelineRun(rows)
		if err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("list pipeline runs: %w", err)
		}
		page.Runs = append(page.Runs, pr)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("list pipeline runs: %w", err)
	}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		page.NextCursor = page.Runs[limit-1].ID
	}
	if err := fillSteps(ctx, tx, page.Runs); err != nil {
		return nil, fmt.Errorf("list pipeline runs: %w", err)
	}
	return page, nil
}

// fillSteps reads the steps' runs of pipeline runs.
func fillSteps(ctx context.Context, tx *sql.Tx, prs []*model.PipelineRun) error {
	if len(prs) == 0 {
		return nil
	}
	byID := make(map[string]*model.PipelineRun, len(prs))
	args := make([]any, len(prs))
	for i, pr := range prs {
		byID[pr.ID] = pr
		args[i] = pr.ID
	}
	// No runs column shares a name with one of pipeline_run_steps.
	rows, err := tx.QueryContext(ctx, `SELECT `+runCols+`, s.pipeline_run_id, s.step
		FROM pipeline_run_steps s JOIN runs ON runs.id = s.run_id
		WHERE s.pipeline_run_id IN (?`+strings.Repeat(", ?", len(prs)-1)+`)`, args...)
	if err != nil {
		return fmt.Errorf("steps: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var prID, step string
		rr, err := scanRun(rows, &prID, &step)
		if err != nil {
			return fmt.Errorf("steps: %w", err)
		}
		byID[prID].Steps[step] = rr.run
	}
	return rows.Err()
}

// nonZero is t, or nil when t is the zero time (a schedule with no further instant).
func nonZero(t *time.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	return t
}
