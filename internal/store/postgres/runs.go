package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// querier runs a statement on the pool (its own transaction) or in a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// createRunsSQL inserts the runs of existing jobs that clash with nothing (their handler
// kind copied from the job) and the queues they name; it returns the inserted ids.
var createRunsSQL = `WITH new_runs AS (
	INSERT INTO runs (` + runInsertCols + `)
	SELECT ` + fmt.Sprintf(runInsertSelect, kindFromJob) + `
	FROM ` + runInput{}.sql(2) + ` JOIN jobs j ON j.id = i.job_id
	ON CONFLICT DO NOTHING
	RETURNING id, queue, req_cpu, req_memory_mb, req_gpu, req_labels
), new_queues AS (
	INSERT INTO queues (name, created_at, updated_at)
	SELECT DISTINCT queue, $1::timestamptz, $1::timestamptz FROM new_runs
	ON CONFLICT DO NOTHING
)
SELECT id, req_cpu, req_memory_mb, req_gpu, req_labels FROM new_runs`

// existingRunsSQL finds the runs holding idempotency keys $1 or cron instants ($2 job,
// $3 instant, pairwise).
const existingRunsSQL = `SELECT ` + runCols + ` FROM runs r WHERE r.idempotency_key = ANY($1)
	UNION ALL
	SELECT ` + runCols + ` FROM runs r WHERE r.trigger_kind = 'cron'
		AND (r.job_id, ` + cronInstantR + `) IN (SELECT * FROM unnest($2::text[], $3::timestamptz[]))`

// insertRuns runs createRunsSQL for in and returns, by id, the runs it inserted with the
// requirements they copied from their jobs.
func insertRuns(ctx context.Context, q querier, in *runInput, now time.Time) (map[string]*model.Requirements, error) {
	rows, err := q.Query(ctx, createRunsSQL, append([]any{now}, in.params()...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]*model.Requirements, in.len())
	for rows.Next() {
		var (
			id  string
			req model.Requirements
		)
		if err := rows.Scan(&id, &req.CPU, &req.MemoryMB, &req.GPU, &req.Labels); err != nil {
			return nil, err
		}
		out[id] = &req
	}
	return out, rows.Err()
}

// CreateRuns inserts runs of existing jobs in one statement. A run whose job does not exist
// fails with model.ErrNotFound, one whose id is taken with model.ErrConflict; one whose
// idempotency key or cron instant is taken (in the store or earlier in the batch) answers
// with that run, Existing.
//
// A run of an anonymous job (store.Anonymous) first gives its job a jobs row.
func (s *Store) CreateRuns(ctx context.Context, p *store.CreateRunsParams) ([]store.CreateRunResult, error) {
	if err := store.CheckInstants(p.Runs...); err != nil {
		return nil, fmt.Errorf("create runs: %w", err)
	}
	res, err := s.createRuns(ctx, p.Runs, p.Now)
	if err != nil {
		return nil, err
	}
	return store.CreateRunsOfAnonymous(p.Runs, res,
		func(jobIDs []string) (int, error) { return materialize(ctx, s.pool, jobIDs...) },
		func(runs []*model.Run) ([]store.CreateRunResult, error) { return s.createRuns(ctx, runs, p.Now) })
}

// createRuns is CreateRuns without the jobs rows of anonymous jobs.
func (s *Store) createRuns(ctx context.Context, runs []*model.Run, now time.Time) ([]store.CreateRunResult, error) {
	if hasLimit(runs) {
		return s.createRunsTx(ctx, &store.CreateRunsParams{Runs: runs, Now: now})
	}
	var res []store.CreateRunResult
	err := s.retry(ctx, func() error {
		var err error
		res, err = createRunsBatch(ctx, s.pool, runs, utc(now))
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// createRunsBatch is CreateRuns for runs without limits, on q (the pool, or a transaction):
// one INSERT for them all, then one lookup for the runs it skipped.
func createRunsBatch(ctx context.Context, q querier, in []*model.Run, now time.Time) ([]store.CreateRunResult, error) {
	res := make([]store.CreateRunResult, len(in))
	runs := make([]*model.Run, len(in))
	sameAs := make([]int, len(in))
	byKey := make(map[string]int)
	var batch runInput
	for i, r := range in {
		sameAs[i] = -1
		if r == nil {
			res[i].Err = errors.New("create run: nil run")
			continue
		}
		runs[i] = normalizeRun(r)
		if k := r.IdempotencyKey; k != "" {
			if first, ok := byKey[k]; ok {
				sameAs[i] = first
				continue
			}
			byKey[k] = i
		}
		batch.add(runs[i], "", model.Requirements{})
	}
	var inserted map[string]*model.Requirements
	if batch.len() > 0 {
		var err error
		if inserted, err = insertRuns(ctx, q, &batch, now); err != nil {
			return nil, translate(err, "create runs")
		}
	}
	// Runs the insert skipped: an idempotency key or cron instant already taken (answer
	// with that run), a job that does not exist, or an id already taken.
	var (
		keys, jobIDs, cronJobs []string
		cronAt                 []time.Time
	)
	for i, r := range runs {
		if r != nil && sameAs[i] < 0 && inserted[r.ID] == nil {
			if r.IdempotencyKey != "" {
				keys = append(keys, r.IdempotencyKey)
			}
			if r.Trigger == model.TriggerCron && r.Instant != nil {
				cronJobs = append(cronJobs, r.JobID)
				cronAt = append(cronAt, *r.Instant)
			}
			jobIDs = append(jobIDs, r.JobID)
		}
	}
	existing := map[string]*model.Run{}
	type instant struct {
		job string
		at  time.Time
	}
	fired := map[instant]*model.Run{}
	jobExists := map[string]bool{}
	if len(jobIDs) > 0 {
		rows, err := q.Query(ctx, existingRunsSQL, keys, cronJobs, cronAt)
		if err != nil {
			return nil, translate(err, "create runs: find existing runs")
		}
		found, err := collectRuns(rows)
		if err != nil {
			return nil, translate(err, "create runs: find existing runs")
		}
		for _, r := range found {
			if r.IdempotencyKey != "" {
				existing[r.IdempotencyKey] = &r.Run
			}
			if r.Trigger == model.TriggerCron && r.Instant != nil {
				fired[instant{r.JobID, *r.Instant}] = &r.Run
			}
		}
		rows, err = q.Query(ctx, `SELECT id FROM jobs WHERE id = ANY($1)`, jobIDs)
		if err != nil {
			return nil, translate(err, "create runs: find jobs")
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, translate(err, "create runs: find jobs")
		}
		for _, id := range ids {
			jobExists[id] = true
		}
	}
	for i, r := range runs {
		switch {
		case r == nil || sameAs[i] >= 0:
		case inserted[r.ID] != nil:
			r.Requirements = *inserted[r.ID]
			res[i].Run = r
		case r.IdempotencyKey != "" && existing[r.IdempotencyKey] != nil:
			res[i] = store.CreateRunResult{Run: existing[r.IdempotencyKey], Existing: true}
		case r.Trigger == model.TriggerCron && r.Instant != nil && fired[instant{r.JobID, *r.Instant}] != nil:
			res[i] = store.CreateRunResult{Run: fired[instant{r.JobID, *r.Instant}], Existing: true}
		case !jobExists[r.JobID]:
			res[i].Err = fmt.Errorf("create run %s: job %s: %w", r.ID, r.JobID, model.ErrNotFound)
		default:
			res[i].Err = fmt.Errorf("create run %s: id taken: %w", r.ID, model.ErrConflict)
		}
	}
	for i, first := range sameAs {
		if first < 0 {
			continue
		}
		if f := res[first]; f.Err != nil {
			res[i].Err = f.Err
		} else {
			res[i] = store.CreateRunResult{Run: f.Run, Existing: true}
		}
	}
	return res, nil
}

// getRunSQL reads run $1 with its finished attempts (one row each, or one row with NULLs)
// and its dependencies.
const getRunSQL = `SELECT ` + runCols + `, a.n, a.worker_id, a.status, a.exit_code,
		a.error, a.started_at, a.finished_at,
		(SELECT json_agg(json_build_object('run', d.upstream_run_id, 'condition', d.condition) ORDER BY d.upstream_run_id)
			FROM run_deps d WHERE d.run_id = r.id)
	FROM runs r LEFT JOIN attempts a ON a.run_id = r.id
	WHERE r.id = $1
	ORDER BY a.n`

// GetRun returns a run with its attempts: the finished ones in order, then the running one.
// The run and its history are read by one statement, so from one snapshot: an attempt that
// ends meanwhile shows either as running or as finished, never as both or neither.
func (s *Store) GetRun(ctx context.Context, p *store.GetRunParams) (*model.Run, error) {
	id := p.ID
	rows, err := s.pool.Query(ctx, getRunSQL, id)
	if err != nil {
		return nil, translate(err, "get run %s", id)
	}
	defer rows.Close()
	var r *runRow
	for rows.Next() {
		var (
			row                      runRow
			status, pending, trigger string
			args                     []byte
			n, exit                  *int32
			worker, astatus, aerr    *string
			started, finished        *time.Time
			deps                     []model.Dependency
		)
		dest := append(runDest(&row, &status, &pending, &trigger, &args), &n, &worker, &astatus, &exit, &aerr, &started, &finished, &deps)
		if err := rows.Scan(dest...); err != nil {
			return nil, translate(err, "get run %s", id)
		}
		if r == nil {
			fixRun(&row, status, pending, trigger, args)
			row.DependsOn = deps
			r = &row
			r.Attempts = []model.Attempt{}
		}
		if n == nil {
			continue // no finished attempt
		}
		a := model.Attempt{RunID: r.ID, N: int(*n), WorkerID: *worker, Status: model.AttemptStatus(*astatus),
			Error: *aerr, StartedAt: started.UTC(), FinishedAt: utcPtr(finished)}
		if exit != nil {
			v := int(*exit)
			a.ExitCode = &v
		}
		r.Attempts = append(r.Attempts, a)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err, "get run %s", id)
	}
	if r == nil {
		return nil, fmt.Errorf("get run %s: %w", id, model.ErrNotFound)
	}
	if r.Status == model.RunRunning {
		a := model.Attempt{RunID: r.ID, N: r.Attempt, WorkerID: r.WorkerID, Status: model.AttemptRunning}
		if r.attemptStartedAt != nil {
			a.StartedAt = *r.attemptStartedAt
		}
		r.Attempts = append(r.Attempts, a)
	}
	return &r.Run, nil
}

// ListRuns lists runs newest first, filtered, paging after the id in Cursor.
func (s *Store) ListRuns(ctx context.Context, p *store.ListRunsParams) (*store.RunPage, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	if p.Status != "" && !p.Status.Valid() {
		return &store.RunPage{Runs: []*model.Run{}}, nil // no run has that status
	}
	q, args := listRunsSQL(p, limit+1)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, translate(err, "list runs")
	}
	found, err := collectRuns(rows)
	if err != nil {
		return nil, translate(err, "list runs")
	}
	page := &store.RunPage{Runs: models(found)}
	if len(found) > limit {
		page.Runs = page.Runs[:limit]
		page.NextCursor = page.Runs[limit-1].ID
	}
	if err := s.fillDeps(ctx, page.Runs); err != nil {
		return nil, translate(err, "list runs")
	}
	return page, nil
}

// LastRuns returns the newest run of each job: one probe of runs_job (job_id, id DESC)
// per job.
func (s *Store) LastRuns(ctx context.Context, p *store.LastRunsParams) (map[string]*model.Run, error) {
	out := make(map[string]*model.Run, len(p.JobIDs))
	if len(p.JobIDs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+runCols+` FROM unnest($1::text[]) AS j(id)
		CROSS JOIN LATERAL (SELECT * FROM runs WHERE runs.job_id = j.id ORDER BY runs.id DESC LIMIT 1) AS r`, p.JobIDs)
	if err != nil {
		return nil, translate(err, "last runs")
	}
	found, err := collectRuns(rows)
	if err != nil {
		return nil, translate(err, "last runs")
	}
	runs := models(found)
	if err := s.fillDeps(ctx, runs); err != nil {
		return nil, translate(err, "last runs")
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
	ids := make([]string, len(runs))
	for i, r := range runs {
		byID[r.ID], ids[i] = r, r.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT run_id, upstream_run_id, condition FROM run_deps WHERE run_id = ANY($1::text[])`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			d  model.Dependency
		)
		if err := rows.Scan(&id, &d.RunID, &d.Condition); err != nil {
			return err
		}
		byID[id].DependsOn = append(byID[id].DependsOn, d)
	}
	return rows.Err()
}

// listRunsSQL builds the query of ListRuns for at most limit rows (p.Status, when set, must
// be valid).
func listRunsSQL(p *store.ListRunsParams, limit int) (string, []any) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if p.JobID != "" {
		add("r.job_id = $?", p.JobID)
	}
	if p.Status.Valid() {
		// A literal, not a parameter: the planner must see the status to use the partial
		// indexes (statements run with generic plans, see Open).
		where = append(where, "r.status = '"+string(p.Status)+"'")
	}
	if p.Queue != "" {
		add("r.queue = $?", p.Queue)
	}
	if p.WorkerID != "" {
		add("r.worker_id = $? AND r.status = 'running'", p.WorkerID)
	}
	if len(p.Namespaces) > 0 {
		add("r.namespace = ANY($?::text[])", p.Namespaces)
	}
	if p.Cursor != "" {
		add("r.id < $?", p.Cursor)
	}
	q := `SELECT ` + runCols + ` FROM runs r`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	q += ` ORDER BY r.id DESC LIMIT $` + strconv.Itoa(len(args))
	return q, args
}

// cancelSet is the SET list of a cancel: runs not yet running end cancelled at once,
// running ones get cancel_requested and stay running.
const cancelSet = `
	status = CASE WHEN r.status = 'running' THEN 'running' ELSE 'cancelled' END,
	cancel_requested = (r.status = 'running'),
	finished_at = CASE WHEN r.status = 'running' THEN NULL ELSE $1::timestamptz END,
	pending_code = '', pending_reason = '',
	error = $2::text`

// cancelActive selects what a cancel changes: active runs, not running ones already asked.
const cancelActive = `r.status IN ('waiting', 'scheduled', 'queued', 'running') AND NOT r.cancel_requested`

// CancelRuns cancels runs by id, or every active run of a job. A run id that names no run
// fails the call and changes nothing.
func (s *Store) CancelRuns(ctx context.Context, p *store.CancelRunsParams) ([]*model.Run, error) {
	var out []*model.Run
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKeysOf(ctx, tx, p.RunIDs, p.JobID); err != nil {
			return err
		}
		var err error
		if out, err = cancelRuns(ctx, tx, p); err != nil {
			return err
		}
		admitted, err := settle(ctx, tx, out, p.Now)
		if err != nil {
			return err
		}
		out = append(out, admitted...)
		if len(p.RunIDs) == 0 {
			return nil
		}
		var missing *string
		if err := tx.QueryRow(ctx, `SELECT min(i.id) FROM unnest($1::text[]) AS i(id)
			WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.id)`, p.RunIDs).Scan(&missing); err != nil {
			return translate(err, "cancel runs")
		}
		if missing != nil {
			return fmt.Errorf("cancel runs: run %s: %w", *missing, model.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func cancelRuns(ctx context.Context, q querier, p *store.CancelRunsParams) ([]*model.Run, error) {
	var (
		sel string
		arg any
	)
	switch {
	case len(p.RunIDs) > 0:
		sel, arg = `r.id = ANY($3::text[])`, p.RunIDs
	case p.JobID != "":
		sel, arg = `r.job_id = $3::text`, p.JobID
	default:
		return []*model.Run{}, nil
	}
	// Rows are locked in id order, as every batch that waits on run locks does, so that
	// concurrent batches cannot deadlock.
	rows, err := q.Query(ctx, `WITH t AS (
			SELECT r.id FROM runs r WHERE `+sel+` AND `+cancelActive+` ORDER BY r.id FOR UPDATE
		)
		UPDATE runs r SET `+cancelSet+`
		FROM t WHERE r.id = t.id AND `+cancelActive+`
		RETURNING `+runCols, utc(p.Now), p.Reason, arg)
	if err != nil {
		return nil, translate(err, "cancel runs")
	}
	changed, err := collectRuns(rows)
	if err != nil {
		return nil, translate(err, "cancel runs")
	}
	return models(changed), nil
}

// RetryRun reopens a failed or cancelled run as queued, due now, with one more attempt in
// its budget. A run whose job was deleted cannot be retried (model.ErrInvalidState).
func (s *Store) RetryRun(ctx context.Context, p *store.RetryRunParams) (*model.Run, error) {
	now := utc(p.Now)
	var out *model.Run
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKeysOf(ctx, tx, []string{p.ID}, ""); err != nil {
			return err
		}
		var jobExists bool
		row := tx.QueryRow(ctx, `SELECT `+runCols+`, `+runHasJob+`
			FROM runs r WHERE r.id = $1 FOR UPDATE OF r`, p.ID)
		var (
			rr                       runRow
			status, pending, trigger string
			args                     []byte
		)
		if err := row.Scan(append(runDest(&rr, &status, &pending, &trigger, &args), &jobExists)...); err != nil {
			return err
		}
		fixRun(&rr, status, pending, trigger, args)
		r := &rr.Run
		if err := scheduler.Retry(r, jobExists, now); err != nil {
			return err
		}
		reopened, err := scanRun(tx.QueryRow(ctx, retrySQL, r.ID, string(r.Status), r.ScheduledFor, r.MaxAttempts,
			r.Error, string(r.PendingCode), r.PendingReason))
		if err != nil {
			return err
		}
		out, err = readmit(ctx, tx, &reopened.Run, now)
		return err
	})
	if err != nil {
		return nil, translate(err, "retry run %s", p.ID)
	}
	return out, nil
}

// retrySQL writes run $1 as scheduler.Retry reopened it: not running, no end, no lease.
const retrySQL = `UPDATE runs r SET
			status = $2, scheduled_for = $3, max_attempts = $4, finished_at = NULL, error = $5,
			pending_code = $6, pending_reason = $7, cancel_requested = false, worker_id = NULL,
			lease_token = NULL, lease_expires_at = NULL, attempt_started_at = NULL
		WHERE r.id = $1
		RETURNING ` + runCols
