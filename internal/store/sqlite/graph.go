package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// CreateGraph creates jobs, runs and the dependencies between them, all or nothing; see
// store.Store.
func (s *Store) CreateGraph(ctx context.Context, p *store.CreateGraphParams) (*store.Graph, error) {
	specs := make([][]byte, len(p.Jobs))
	for i, nj := range p.Jobs {
		if nj.Job == nil {
			return nil, fmt.Errorf("create graph: entry %d: no job", i)
		}
		if err := store.CheckInstants(nj.Run); err != nil {
			return nil, fmt.Errorf("create graph: %w", err)
		}
		b, err := encodeSpec(&nj.Job.Spec)
		if err != nil {
			return nil, fmt.Errorf("create graph: job %q: encode spec: %w", nj.Job.Name, err)
		}
		specs[i] = b
	}
	if p.PipelineRun != nil && len(p.Steps) != len(p.Runs) {
		return nil, fmt.Errorf("create graph: %d steps for %d runs", len(p.Steps), len(p.Runs))
	}
	if err := store.CheckInstants(p.Runs...); err != nil {
		return nil, fmt.Errorf("create graph: %w", err)
	}
	out := &store.Graph{}
	err := s.write(ctx, func(t *wtx) error {
		*out = store.Graph{}
		queues := map[string]bool{}
		if p.PipelineRun != nil {
			if err := t.firePipeline(p); err != nil {
				return err
			}
		}
		insJob, insRun := t.stmt(t.ws.insertJob), t.stmt(t.ws.insertRun)
		for i, nj := range p.Jobs {
			res, err := t.createJob(insJob, insRun, nj, specs[i], p.Now)
			if err := store.GraphJobErr(nj, res, err); err != nil {
				return err
			}
			out.Jobs = append(out.Jobs, res.Job)
			if res.Run != nil {
				out.Runs = append(out.Runs, res.Run)
				queues[res.Run.Queue] = true
			}
		}
		jobQ := t.stmt(t.ws.jobForRun)
		for _, r := range p.Runs {
			ji, err := scanJobInfo(jobQ.QueryRowContext(t.ctx, r.JobID))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("run %s: job %s: %w", r.ID, r.JobID, model.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("run %s: job %s: %w", r.ID, r.JobID, err)
			}
			res, err := t.createRun(insRun, r, ji, p.Now)
			switch {
			case err != nil:
				return err
			case res.Err != nil:
				return res.Err
			case res.Existing:
				return fmt.Errorf("run %s: idempotency key or cron instant taken: %w", r.ID, model.ErrConflict)
			}
			out.Runs = append(out.Runs, res.Run)
			queues[r.Queue] = true
		}
		if p.PipelineRun != nil {
			if err := t.insertSteps(p.PipelineRun.ID, p.Steps, out.Runs[len(out.Runs)-len(p.Runs):]); err != nil {
				return err
			}
		}
		return t.ensureQueues(queues, p.Now)
	})
	if err != nil {
		return nil, fmt.Errorf("create graph: %w", err)
	}
	return out, nil
}
