package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// CreateRuns inserts runs of existing jobs; see store.Store. Like CreateJobs, it tries
// multi-row INSERTs first and goes run by run when a key is taken or a job is missing. A
// run of an anonymous job (store.Anonymous) first gives its job a jobs row.
func (s *Store) CreateRuns(ctx context.Context, p *store.CreateRunsParams) ([]store.CreateRunResult, error) {
	if err := store.CheckInstants(p.Runs...); err != nil {
		return nil, fmt.Errorf("create runs: %w", err)
	}
	res, err := s.createRuns(ctx, p)
	if err != nil {
		return nil, err
	}
	return store.CreateRunsOfAnonymous(p.Runs, res,
		func(jobIDs []string) (n int, err error) {
			err = s.write(ctx, func(t *wtx) error {
				n, err = t.materialize(jobIDs...)
				return err
			})
			return n, err
		},
		func(runs []*model.Run) ([]store.CreateRunResult, error) {
			return s.createRuns(ctx, &store.CreateRunsParams{Runs: runs, Now: p.Now})
		})
}

// createRuns is CreateRuns without the jobs rows of anonymous jobs.
func (s *Store) createRuns(ctx context.Context, p *store.CreateRunsParams) ([]store.CreateRunResult, error) {
	out := make([]store.CreateRunResult, len(p.Runs))
	err := s.write(ctx, func(t *wtx) error {
		clear(out)
		jobQ := t.stmt(t.ws.jobForRun)
		jobs := map[string]*jobInfo{}
		found := true
		for _, r := range p.Runs {
			if _, seen := jobs[r.JobID]; seen {
				continue
			}
			info, err := scanJobInfo(jobQ.QueryRowContext(t.ctx, r.JobID))
			switch {
			case err == nil:
				jobs[r.JobID] = &info
			case errors.Is(err, sql.ErrNoRows):
				jobs[r.JobID] = nil
				found = false
			default:
				return fmt.Errorf("job of run %s: %w", r.ID, err)
			}
		}
		ok := false
		if found && !slices.ContainsFunc(p.Runs, func(r *model.Run) bool { return !store.Plain(r) }) {
			var err error
			ok, err = t.allOrNothing(func() (bool, error) {
				return t.insertAll(runsInsert, len(p.Runs), func(i int) []any {
					return runArgs(p.Runs[i], *jobs[p.Runs[i].JobID])
				})
			})
			if err != nil {
				return err
			}
		}
		queues := map[string]bool{}
		if ok {
			for i, r := range p.Runs {
				out[i].Run = storedRun(r, jobs[r.JobID].req)
				queues[r.Queue] = true
			}
			return t.ensureQueues(queues, p.Now)
		}
		ins := t.stmt(t.ws.insertRun)
		for i, r := range p.Runs {
			ji := jobs[r.JobID]
			if ji == nil {
				out[i].Err = fmt.Errorf("run %s: job %s: %w", r.ID, r.JobID, model.ErrNotFound)
				continue
			}
			var err error
			if out[i], err = t.createRun(ins, r, *ji, p.Now); err != nil {
				return err
			}
			if out[i].Err == nil && !out[i].Existing {
				queues[r.Queue] = true
			}
		}
		return t.ensureQueues(queues, p.Now)
	})
	if err != nil {
		return nil, fmt.Errorf("create runs: %w", err)
	}
	return out, nil
}

// existingRun finds the run that r duplicates: same idempotency key, or same cron instant.
func (t *wtx) existingRun(r *model.Run) (*model.Run, error) {
	if r.IdempotencyKey != "" {
		rr, err := scanRun(t.stmt(t.ws.runByKey).QueryRowContext(t.ctx, r.IdempotencyKey))
		if err == nil {
			return rr.run, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("run by key: %w", err)
		}
	}
	if r.Trigger == model.TriggerCron {
		rr, err := scanRun(t.stmt(t.ws.runByCron).QueryRowContext(t.ctx, r.JobID, nullMicros(r.Instant)))
		if err == nil {
			return rr.run, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("run by cron instant: %w", err)
		}
	}
	return nil, nil
}

// GetRun returns a run with its attempts, read in one snapshot.
func (s *Store) GetRun(ctx context.Context, p *store.GetRunParams) (*model.Run, error) {
	id := p.ID
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, err)
	}
	defer func() { _ = tx.Rollback() }()
	rr, err := scanRun(tx.StmtContext(ctx, s.rs.getRun).QueryRowContext(ctx, id))
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", id, mapErr(err))
	}
	rows, err := tx.StmtContext(ctx, s.rs.attemptsOf).QueryContext(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get run %s: attempts: %w", id, err)
	}
	defer rows.Close()
	r := rr.run
	for rows.Next() {
		a := model.Attempt{RunID: id}
		var (
			status           string
			exit             sql.NullInt64
			started, finshed int64
		)
		if err := rows.Scan(&a.N, &a.WorkerID, &status, &exit, &a.Error, &started, &finshed); err != nil {
			return nil, fmt.Errorf("get run %s: attempts: %w", id, err)
		}
		a.Status = model.AttemptStatus(status)
		if exit.Valid {
			code := int(exit.Int64)
			a.ExitCode = &code
		}
		a.StartedAt = fromMicros(started)
		a.FinishedAt = fromNullMicros(sql.NullInt64{Int64: finshed, Valid: true})
		r.Attempts = append(r.Attempts, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get run %s: attempts: %w", id, err)
	}
	if r.Status == model.RunRunning {
		r.Attempts = append(r.Attempts, model.Attempt{
			RunID: id, N: r.Attempt, WorkerID: r.WorkerID, Status: model.AttemptRunning, StartedAt: fromMicros(rr.attemptStarted),
		})
	}
	deps, err := tx.QueryContext(ctx, `SELECT upstream_run_id, condition FROM run_deps WHERE run_id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("get run %s: dependencies: %w", id, err)
	}
	defer deps.Close()
	for deps.Next() {
		var d model.Dependency
		if err := deps.Scan(&d.RunID, &d.Condition); err != nil {
			return nil, fmt.Errorf("get run %s: dependencies: %w", id, err)
		}
		r.DependsOn = append(r.DependsOn, d)
	}
	if err := deps.Err(); err != nil {
		return nil, fmt.Errorf("get run %s: dependencies: %w", id, err)
	}
	return r, nil
}

// ListRuns lists runs newest first.
func (s *Store) ListRuns(ctx context.Context, p *store.ListRunsParams) (*store.RunPage, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	q, args, ok := listRunsSQL(p, limit+1)
	if !ok {
		return &store.RunPage{}, nil
	}
	rows, err := scanRuns(s.r.QueryContext(ctx, q, args...))
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	page := &store.RunPage{Runs: runsOf(rows)}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		page.NextCursor = page.Runs[limit-1].ID
	}
	if err := s.fillDeps(ctx, page.Runs); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return page, nil
}

// LastRuns returns the newest run of each job: one probe of runs_job per job.
func (s *Store) LastRuns(ctx context.Context, p *store.LastRunsParams) (map[string]*model.Run, error) {
	out := make(map[string]*model.Run, len(p.JobIDs))
	if len(p.JobIDs) == 0 {
		return out, nil
	}
	ids, err := json.Marshal(p.JobIDs)
	if err != nil {
		return nil, fmt.Errorf("last runs: %w", err)
	}
	rows, err := scanRuns(s.r.QueryContext(ctx, `SELECT `+runCols+` FROM runs WHERE id IN (
		SELECT (SELECT l.id FROM runs AS l INDEXED BY runs_job WHERE l.job_id = j.value ORDER BY l.id DESC LIMIT 1)
		FROM json_each(?) AS j)`, string(ids)))
	if err != nil {
		return nil, fmt.Errorf("last runs: %w", err)
	}
	runs := runsOf(rows)
	if err := s.fillDeps(ctx, runs); err != nil {
		return nil, fmt.Errorf("last runs: %w", err)
	}
	for _, r := range runs {
		out[r.JobID] = r
	}
	return out, nil
}

// fillDeps reads the dependencies of runs (edges never change once written, so a read
// apart from the runs' is consistent with it).
func (s *Store) fillDeps(ctx context.Context, runs []*model.Run) error {
	if len(runs) == 0 {
		return nil
	}
	byID := make(map[string]*model.Run, len(runs))
	args := make([]any, len(runs))
	for i, r := range runs {
		byID[r.ID], args[i] = r, r.ID
	}
	rows, err := s.r.QueryContext(ctx, `SELECT run_id, upstream_run_id, condition FROM run_deps
		WHERE run_id IN (?`+strings.Repeat(", ?", len(runs)-1)+`)`, args...)
	if err != nil {
		return fmt.Errorf("dependencies: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			d  model.Dependency
		)
		if err := rows.Scan(&id, &d.RunID, &d.Condition); err != nil {
			return fmt.Errorf("dependencies: %w", err)
		}
		byID[id].DependsOn = append(byID[id].DependsOn, d)
	}
	return rows.Err()
}

// listRunsSQL builds ListRuns' query, choosing the index that serves its filters. ok is
// false when the filters cannot match anything.
func listRunsSQL(p *store.ListRunsParams, limit int) (q string, args []any, ok bool) {
	var (
		where []string
		index string
	)
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	status := p.Status
	if p.WorkerID != "" {
		// worker_id means something only while running.
		if status != "" && status != model.RunRunning {
			return "", nil, false
		}
		status = model.RunRunning
		add("worker_id = ?", p.WorkerID)
	}
	if p.JobID != "" {
		add("job_id = ?", p.JobID)
	}
	if status != "" {
		if !status.Valid() {
			return "", nil, false
		}
		// A literal, not a parameter: SQLite matches a partial index's WHERE against the
		// query's text. status is one of the fixed state words.
		add("status = '" + string(status) + "'")
	}
	if p.Queue != "" {
		add("queue = ?", p.Queue)
	}
	if len(p.Namespaces) > 0 {
		ns := make([]any, len(p.Namespaces))
		for i, n := range p.Namespaces {
			ns[i] = n
		}
		add("namespace IN (?"+strings.Repeat(", ?", len(ns)-1)+")", ns...)
	}
	if p.Cursor != "" {
		add("id < ?", p.Cursor)
	}
	switch {
	case p.WorkerID != "":
		index = "runs_worker"
	case p.JobID != "":
		index = "runs_job"
	case status == model.RunQueued:
		index = "runs_queued"
	case status == model.RunRunning:
		index = "runs_running"
	case status == model.RunScheduled && p.Queue == "", status == model.RunWaiting,
		status == model.RunFailed, status == model.RunCancelled, status == model.RunSkipped:
		index = "runs_rare_status"
		add(statusRare)
	case status == model.RunScheduled:
		index = "runs_scheduled"
	default:
		// Succeeded runs, or no status: the bulk of history, newest first along the key.
		index = "sqlite_autoindex_runs_1"
	}
	q = `SELECT ` + runCols + ` FROM runs INDEXED BY ` + index
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY id DESC LIMIT ?`
	return q, append(args, limit), true
}

// CancelRuns cancels runs by id or every active run of a job.
func (s *Store) CancelRuns(ctx context.Context, p *store.CancelRunsParams) ([]*model.Run, error) {
	var out []*model.Run
	err := s.write(ctx, func(t *wtx) error {
		out = nil
		exists := t.stmt(t.ws.runExists)
		for _, id := range p.RunIDs {
			r, err := t.cancelRun(id, p.Reason, p.Now)
			if err != nil {
				return err
			}
			if r != nil {
				out = append(out, r)
				continue
			}
			var one int
			if err := exists.QueryRowContext(t.ctx, id).Scan(&one); err != nil {
				return fmt.Errorf("run %s: %w", id, mapErr(err))
			}
		}
		if p.JobID != "" {
			runs, err := t.cancelJobRuns(p.JobID, p.Reason, p.Now)
			if err != nil {
				return err
			}
			out = append(out, runs...)
		}
		admitted, err := t.settle(out, p.Now)
		out = append(out, admitted...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cancel runs: %w", err)
	}
	return out, nil
}

// cancelRun cancels one run: at once when it is not running, by request when it is. It
// returns the run after the change, or nil when the run is final, already asked to cancel,
// or missing.
func (t *wtx) cancelRun(id, reason string, now time.Time) (*model.Run, error) {
	rr, err := scanRun(t.stmt(t.ws.cancelPending).QueryRowContext(t.ctx, micros(now), reason, id))
	if err == nil {
		return rr.run, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("cancel run %s: %w", id, err)
	}
	rr, err = scanRun(t.stmt(t.ws.cancelRunning).QueryRowContext(t.ctx, reason, id))
	if err == nil {
		return rr.run, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("cancel run %s: %w", id, err)
	}
	return nil, nil
}

// cancelJobRuns cancels every active run of a job: pending ones at once, running ones by
// request.
func (t *wtx) cancelJobRuns(jobID, reason string, now time.Time) ([]*model.Run, error) {
	rows, err := scanRuns(t.tx.QueryContext(t.ctx, cancelJobPendingSQL, micros(now), reason, jobID))
	if err != nil {
		return nil, fmt.Errorf("cancel runs of job %s: %w", jobID, err)
	}
	more, err := scanRuns(t.tx.QueryContext(t.ctx, cancelJobRunningSQL, reason, jobID))
	if err != nil {
		return nil, fmt.Errorf("cancel runs of job %s: %w", jobID, err)
	}
	return runsOf(append(rows, more...)), nil
}

// RetryRun reopens a failed or cancelled run of a job that still exists.
func (s *Store) RetryRun(ctx context.Context, p *store.RetryRunParams) (*model.Run, error) {
	var out *model.Run
	err := s.write(ctx, func(t *wtx) error {
		var job int
		rr, err := scanRun(t.tx.QueryRowContext(t.ctx, `SELECT `+runCols+`, `+runHasJobSQL+`
			FROM runs WHERE id = ?`, p.ID), &job)
		if err != nil {
			return mapErr(err)
		}
		r := rr.run
		if err := scheduler.Retry(r, job != 0, p.Now); err != nil {
			return err
		}
		rr, err = scanRun(t.tx.QueryRowContext(t.ctx, `UPDATE runs SET status = ?, scheduled_for = ?,
			max_attempts = ?, finished_at = NULL, error = ?, cancel_requested = 0, pending_code = ?, pending_reason = ?
			WHERE id = ? RETURNING `+runCols,
			string(r.Status), micros(r.ScheduledFor), r.MaxAttempts, r.Error, string(r.PendingCode), r.PendingReason, r.ID))
		if err != nil {
			return fmt.Errorf("reopen: %w", err)
		}
		out, err = t.readmit(rr.run, p.Now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retry run %s: %w", p.ID, err)
	}
	return out, nil
}
