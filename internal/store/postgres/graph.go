package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// CreateGraph creates jobs, runs and the dependencies between them, all or nothing; see
// store.Store. A graph without concurrency limits and idempotency keys (DAG requests and
// pipeline runs, as a rule) goes in with a fixed number of statements (createGraphBatch);
// any other, entry by entry.
func (s *Store) CreateGraph(ctx context.Context, p *store.CreateGraphParams) (*store.Graph, error) {
	if p.PipelineRun != nil && len(p.Steps) != len(p.Runs) {
		return nil, fmt.Errorf("create graph: %d steps for %d runs", len(p.Steps), len(p.Runs))
	}
	if err := store.CheckInstants(p.Runs...); err != nil {
		return nil, fmt.Errorf("create graph: %w", err)
	}
	for _, nj := range p.Jobs {
		if err := store.CheckInstants(nj.Run); err != nil {
			return nil, fmt.Errorf("create graph: %w", err)
		}
	}
	now := utc(p.Now)
	out := &store.Graph{}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		*out = store.Graph{}
		if p.PipelineRun != nil {
			if err := firePipeline(ctx, tx, p); err != nil {
				return err
			}
		}
		if graphBatchable(p) {
			g, err := createGraphBatch(ctx, tx, p, now)
			if err != nil {
				return err
			}
			*out = *g
			if p.PipelineRun != nil {
				return insertSteps(ctx, tx, p.PipelineRun.ID, p.Steps, out.Runs[len(out.Runs)-len(p.Runs):])
			}
			return nil
		}
		for i, e := range p.Jobs {
			if e.Job == nil {
				return fmt.Errorf("entry %d: no job", i)
			}
			res, err := createJobTx(ctx, tx, e, now)
			if err := store.GraphJobErr(e, res, err); err != nil {
				return err
			}
			out.Jobs = append(out.Jobs, res.Job)
			if res.Run != nil {
				out.Runs = append(out.Runs, res.Run)
			}
		}
		for _, r := range p.Runs {
			res, err := createRunTx(ctx, tx, r, now)
			switch {
			case err != nil:
				return err
			case res.Err != nil:
				return res.Err
			case res.Existing:
				return fmt.Errorf("run %s: idempotency key or cron instant taken: %w", r.ID, model.ErrConflict)
			}
			out.Runs = append(out.Runs, res.Run)
		}
		if p.PipelineRun != nil {
			return insertSteps(ctx, tx, p.PipelineRun.ID, p.Steps, out.Runs[len(out.Runs)-len(p.Runs):])
		}
		return nil
	})
	if err != nil {
		return nil, translate(err, "create graph")
	}
	return out, nil
}

// graphBatchable reports whether CreateGraph can write p with a fixed number of set-based
// statements: no run under a concurrency limit (admission goes run by run) and no
// idempotency key (whose clash answers with an existing entry, which the batch cannot
// tell apart from a conflict).
func graphBatchable(p *store.CreateGraphParams) bool {
	for _, e := range p.Jobs {
		if e.Job == nil || e.Job.IdempotencyKey != "" || e.Run != nil && (e.Run.Concurrency != nil || e.Run.IdempotencyKey != "") {
			return false
		}
	}
	for _, r := range p.Runs {
		if r == nil || r.Concurrency != nil || r.IdempotencyKey != "" {
			return false
		}
	}
	return true
}

// depsPendingSQL sets the unmet counts ($2) of runs $1.
const depsPendingSQL = `WITH v AS MATERIALIZED (
		SELECT v.id, v.n, 1 AS k FROM unnest($1::text[], $2::int4[]) AS v(id, n)
	)
	UPDATE runs r SET deps_pending = v.n FROM v WHERE r.id = v.id AND v.k = 1`

// edgesSQL writes the edges ($1 waits for $2 under $3) and marks the upstream runs as
// having dependants.
const edgesSQL = `WITH e AS (
		INSERT INTO run_deps (run_id, upstream_run_id, condition)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
		ON CONFLICT DO NOTHING
	), u AS MATERIALIZED (
		SELECT DISTINCT u.id, 1 AS k FROM unnest($2::text[]) AS u(id)
	)
	UPDATE runs r SET has_dependants = true FROM u WHERE r.id = u.id AND u.k = 1 AND NOT r.has_dependants`

// createGraphBatch is CreateGraph for a batchable graph, in tx: every run's starting state
// is worked out in Go (upstream runs of the graph come first, so their states are known;
// the others are read in one statement), then jobs and their runs, runs of existing jobs,
// unmet counts and edges go in with one statement each.
func createGraphBatch(ctx context.Context, tx pgx.Tx, p *store.CreateGraphParams, now time.Time) (*store.Graph, error) {
	var (
		batch []newJob
		runs  []*model.Run // every run, in order: the jobs' first runs, then p.Runs
	)
	for _, e := range p.Jobs {
		j := *e.Job
		j.CreatedAt, j.UpdatedAt, j.NextFireAt = utc(j.CreatedAt), utc(j.UpdatedAt), utcPtr(j.NextFireAt)
		j.Spec.Args = compactJSON(j.Spec.Args)
		spec, err := encodeSpec(&j.Spec)
		if err != nil {
			return nil, err
		}
		nj := newJob{job: &j, spec: spec}
		if e.Run != nil {
			nj.run = normalizeRun(e.Run)
			nj.run.Requirements = j.Spec.Requirements
			runs = append(runs, nj.run)
		}
		batch = append(batch, nj)
	}
	for _, r := range p.Runs {
		runs = append(runs, normalizeRun(r))
	}
	// States: of the graph's own runs as decided, of the others as stored.
	ups := make(map[string]model.RunStatus, len(runs))
	var outside []string
	inGraph := make(map[string]bool, len(runs))
	for _, r := range runs {
		inGraph[r.ID] = true
	}
	for _, r := range runs {
		for _, d := range r.DependsOn {
			if !inGraph[d.RunID] {
				outside = append(outside, d.RunID)
			}
		}
	}
	if len(outside) > 0 {
		rows, err := tx.Query(ctx, upstreamStatusSQL, outside)
		if err != nil {
			return nil, fmt.Errorf("upstream runs: %w", err)
		}
		for rows.Next() {
			var id, status string
			if err := rows.Scan(&id, &status); err != nil {
				rows.Close()
				return nil, fmt.Errorf("upstream runs: %w", err)
			}
			ups[id] = model.RunStatus(status)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("upstream runs: %w", err)
		}
	}
	var (
		pendingIDs              []string
		pendingN                []int32
		edgeRun, edgeUp, edgeIf []string
	)
	for _, r := range runs {
		for _, d := range r.DependsOn {
			if _, ok := ups[d.RunID]; !ok {
				return nil, fmt.Errorf("run %s: upstream run %s: %w", r.ID, d.RunID, model.ErrNotFound)
			}
			edgeRun, edgeUp, edgeIf = append(edgeRun, r.ID), append(edgeUp, d.RunID), append(edgeIf, string(d.Condition))
		}
		if len(r.DependsOn) > 0 {
			if n := scheduler.PrepareDependencies(r, ups, now); n > 0 {
				pendingIDs, pendingN = append(pendingIDs, r.ID), append(pendingN, int32(n))
			}
		}
		ups[r.ID] = r.Status
	}
	if len(batch) > 0 {
		rows, err := tx.Query(ctx, createJobsSQL, createJobsArgs(batch, now)...)
		if err != nil {
			return nil, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		if len(ids) < len(batch) {
			return nil, fmt.Errorf("%d of %d jobs: name or id taken: %w", len(batch)-len(ids), len(batch), model.ErrConflict)
		}
	}
	if len(p.Runs) > 0 {
		var in runInput
		for _, r := range runs[len(runs)-len(p.Runs):] {
			in.add(r, "", model.Requirements{})
		}
		inserted, err := insertRuns(ctx, tx, &in, now)
		if err != nil {
			return nil, err
		}
		for _, r := range runs[len(runs)-len(p.Runs):] {
			req := inserted[r.ID]
			if req == nil {
				return nil, fmt.Errorf("run %s: its job is missing, or its id or cron instant taken: %w", r.ID, model.ErrNotFound)
			}
			r.Requirements = *req
		}
	}
	if len(pendingIDs) > 0 {
		if _, err := tx.Exec(ctx, depsPendingSQL, pendingIDs, pendingN); err != nil {
			return nil, fmt.Errorf("unmet counts: %w", err)
		}
	}
	if len(edgeRun) > 0 {
		if _, err := tx.Exec(ctx, edgesSQL, edgeRun, edgeUp, edgeIf); err != nil {
			return nil, fmt.Errorf("dependencies: %w", err)
		}
	}
	out := &store.Graph{Runs: runs}
	for _, nj := range batch {
		out.Jobs = append(out.Jobs, nj.job)
	}
	return out, nil
}
