package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// defaultLimit is the page size of lists that ask for none.
const defaultLimit = 100

// runInsertSelect is the SELECT list that turns runInput rows (alias i) into runs columns;
// the job's kind and requirements come from %s (i.handler, ... or the jobs row j).
const runInsertSelect = `i.id, i.job_id, i.job_name, i.namespace, i.status, i.pending_code,
	i.pending_reason, i.queue, i.priority, i.trigger, %s, i.args, i.scheduled_for, i.created_at,
	i.finished_at, i.attempt, i.max_attempts, NULLIF(i.idempotency_key, ''), i.error`

const runInsertCols = `id, job_id, job_name, namespace, status, pending_code, pending_reason,
	queue, priority, trigger, handler, req_cpu, req_memory_mb, req_gpu, args, scheduled_for,
	created_at, finished_at, attempt, max_attempts, idempotency_key, error`

// Where a run's job kind and requirements come from: the input arrays, or the jobs row j.
const (
	kindFromInput = `i.handler, i.req_cpu, i.req_memory_mb, i.req_gpu`
	kindFromJob   = `coalesce(j.spec->>'handler', ''),
	coalesce((j.spec->'requirements'->>'cpu')::float8, 0),
	coalesce((j.spec->'requirements'->>'memory_mb')::int8, 0),
	coalesce((j.spec->'requirements'->>'gpu')::int4, 0)`
)

// createJobsSQL inserts the jobs that clash with nothing, the first runs of those jobs, and
// the queues those runs name, in one statement; it returns the ids of the inserted jobs.
var createJobsSQL = `WITH ins AS (
	INSERT INTO jobs (id, namespace, name, spec, enabled, next_fire_at, idempotency_key,
		request_hash, created_at, updated_at)
	SELECT id, namespace, name, spec, enabled, next_fire_at, NULLIF(idempotency_key, ''),
		request_hash, created_at, updated_at
	FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::bool[], $6::timestamptz[],
		$7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[])
		AS j(id, namespace, name, spec, enabled, next_fire_at, idempotency_key, request_hash,
			created_at, updated_at)
	ON CONFLICT DO NOTHING
	RETURNING id
), new_runs AS (
	INSERT INTO runs (` + runInsertCols + `)
	SELECT ` + fmt.Sprintf(runInsertSelect, kindFromInput) + `
	FROM ` + runInput{}.sql(12) + ` JOIN ins ON ins.id = i.job_id
	RETURNING queue
), new_queues AS (
	INSERT INTO queues (name, created_at, updated_at)
	SELECT DISTINCT queue, $11::timestamptz, $11::timestamptz FROM new_runs
	ON CONFLICT DO NOTHING
)
SELECT id FROM ins`

// CreateJobs inserts jobs and their first runs in one statement. Within the batch, an entry
// whose idempotency key or name repeats an earlier entry's is answered from that entry.
func (s *Store) CreateJobs(ctx context.Context, p *store.CreateJobsParams) ([]store.CreateJobResult, error) {
	now := utc(p.Now)
	res := make([]store.CreateJobResult, len(p.Jobs))
	jobs := make([]*model.Job, len(p.Jobs))
	runs := make([]*model.Run, len(p.Jobs))
	sameAs := make([]int, len(p.Jobs)) // index of the earlier entry with the same key, or -1
	sent := make([]bool, len(p.Jobs))
	byKey := make(map[[2]string]int)
	byName := make(map[[2]string]int, len(p.Jobs))
	runKeys := make(map[string]bool)

	var (
		id, ns, name, key, hash []string
		specs                   [][]byte
		enabled                 []bool
		nextFire                []*time.Time
		created, updated        []time.Time
		in                      runInput
		anyRunKey               bool
	)
	for i, e := range p.Jobs {
		sameAs[i] = -1
		if e.Job == nil {
			res[i].Err = errors.New("create job: entry without a job")
			continue
		}
		j := *e.Job
		j.CreatedAt, j.UpdatedAt, j.NextFireAt = utc(j.CreatedAt), utc(j.UpdatedAt), utcPtr(j.NextFireAt)
		j.Spec.Args = compactJSON(j.Spec.Args)
		jobs[i] = &j
		if e.Run != nil {
			runs[i] = normalizeRun(e.Run)
		}
		if j.IdempotencyKey != "" {
			k := [2]string{j.Namespace, j.IdempotencyKey}
			if first, ok := byKey[k]; ok {
				sameAs[i] = first
				continue
			}
			byKey[k] = i
		}
		nk := [2]string{j.Namespace, j.Name}
		if _, ok := byName[nk]; ok {
			res[i].Err = fmt.Errorf("create job %s/%s: name taken: %w", j.Namespace, j.Name, model.ErrConflict)
			continue
		}
		byName[nk] = i
		if r := runs[i]; r != nil && r.IdempotencyKey != "" {
			if runKeys[r.IdempotencyKey] {
				res[i].Err = fmt.Errorf("create job %s/%s: run idempotency key taken: %w", j.Namespace, j.Name, model.ErrConflict)
				continue
			}
			runKeys[r.IdempotencyKey] = true
			anyRunKey = true
		}
		sent[i] = true
	}
	if anyRunKey {
		// A first run whose own idempotency key is taken fails its entry; checked up front
		// so that the insert never meets that unique violation.
		taken, err := s.takenRunKeys(ctx, runKeys)
		if err != nil {
			return nil, fmt.Errorf("create jobs: %w", err)
		}
		for i, r := range runs {
			if sent[i] && r != nil && taken[r.IdempotencyKey] {
				sent[i] = false
				res[i].Err = fmt.Errorf("create job %s/%s: run idempotency key taken: %w", jobs[i].Namespace, jobs[i].Name, model.ErrConflict)
			}
		}
	}
	for i, j := range jobs {
		if !sent[i] {
			continue
		}
		spec, err := encodeSpec(&j.Spec)
		if err != nil {
			return nil, fmt.Errorf("create job %s/%s: %w", j.Namespace, j.Name, err)
		}
		id = append(id, j.ID)
		ns = append(ns, j.Namespace)
		name = append(name, j.Name)
		specs = append(specs, spec)
		enabled = append(enabled, j.Enabled)
		nextFire = append(nextFire, j.NextFireAt)
		key = append(key, j.IdempotencyKey)
		hash = append(hash, j.RequestHash)
		created = append(created, j.CreatedAt)
		updated = append(updated, j.UpdatedAt)
		if r := runs[i]; r != nil {
			in.add(r, j.Spec.Handler, j.Spec.Requirements)
		}
	}

	inserted := make(map[string]bool, len(id))
	if len(id) > 0 {
		args := append([]any{id, ns, name, specs, enabled, nextFire, key, hash, created, updated, now}, in.params()...)
		rows, err := s.pool.Query(ctx, createJobsSQL, args...)
		if err != nil {
			return nil, translate(err, "create jobs")
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, translate(err, "create jobs")
		}
		for _, v := range ids {
			inserted[v] = true
		}
	}

	// Entries the insert skipped: an idempotency key already used (answer with that job),
	// or a name (or id) already taken.
	var lookup [][2]string
	for i, j := range jobs {
		if sent[i] && !inserted[j.ID] && j.IdempotencyKey != "" {
			lookup = append(lookup, [2]string{j.Namespace, j.IdempotencyKey})
		}
	}
	existing, err := s.jobsByKey(ctx, lookup)
	if err != nil {
		return nil, fmt.Errorf("create jobs: %w", err)
	}
	for i, j := range jobs {
		switch {
		case j == nil || res[i].Err != nil || sameAs[i] >= 0:
		case inserted[j.ID]:
			res[i].Job, res[i].Run = j, runs[i]
		case existing[[2]string{j.Namespace, j.IdempotencyKey}] != nil:
			ex := existing[[2]string{j.Namespace, j.IdempotencyKey}]
			res[i] = store.CreateJobResult{Job: ex.job, Run: ex.run, Existing: true, Conflict: ex.job.RequestHash != j.RequestHash}
		default:
			res[i].Err = fmt.Errorf("create job %s/%s: name taken: %w", j.Namespace, j.Name, model.ErrConflict)
		}
	}
	for i, first := range sameAs {
		if first < 0 {
			continue
		}
		f := res[first]
		if f.Err != nil {
			res[i].Err = f.Err
			continue
		}
		res[i] = store.CreateJobResult{Job: f.Job, Run: f.Run, Existing: true, Conflict: f.Job.RequestHash != jobs[i].RequestHash}
	}
	return res, nil
}

// takenRunKeys returns which of keys are idempotency keys of existing runs.
func (s *Store) takenRunKeys(ctx context.Context, keys map[string]bool) (map[string]bool, error) {
	list := make([]string, 0, len(keys))
	for k := range keys {
		list = append(list, k)
	}
	rows, err := s.pool.Query(ctx, `SELECT idempotency_key FROM runs WHERE idempotency_key = ANY($1)`, list)
	if err != nil {
		return nil, translate(err, "check run idempotency keys")
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate(err, "check run idempotency keys")
	}
	taken := make(map[string]bool, len(found))
	for _, k := range found {
		taken[k] = true
	}
	return taken, nil
}

type jobAndRun struct {
	job *model.Job
	run *model.Run
}

// jobsByKey finds jobs by (namespace, idempotency key), each with its first run.
func (s *Store) jobsByKey(ctx context.Context, keys [][2]string) (map[[2]string]*jobAndRun, error) {
	out := make(map[[2]string]*jobAndRun, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	ns, key := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		ns[i], key[i] = k[0], k[1]
	}
	rows, err := s.pool.Query(ctx, `SELECT `+jobCols+` FROM jobs
		WHERE (namespace, idempotency_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, ns, key)
	if err != nil {
		return nil, translate(err, "find jobs by idempotency key")
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*model.Job, error) { return scanJob(row) })
	if err != nil {
		return nil, translate(err, "find jobs by idempotency key")
	}
	ids := make([]string, len(jobs))
	byID := make(map[string]*jobAndRun, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
		jr := &jobAndRun{job: j}
		byID[j.ID] = jr
		out[[2]string{j.Namespace, j.IdempotencyKey}] = jr
	}
	rows, err = s.pool.Query(ctx, `SELECT DISTINCT ON (r.job_id) `+runCols+` FROM runs r
		WHERE r.job_id = ANY($1) ORDER BY r.job_id, r.id`, ids)
	if err != nil {
		return nil, translate(err, "find first runs")
	}
	first, err := collectRuns(rows)
	if err != nil {
		return nil, translate(err, "find first runs")
	}
	for _, r := range first {
		byID[r.JobID].run = &r.Run
	}
	return out, nil
}

// GetJob finds a job by id or, failing that, by name within the namespace (the default
// namespace when empty).
func (s *Store) GetJob(ctx context.Context, p *store.GetJobParams) (*model.Job, error) {
	ns := p.Namespace
	if ns == "" {
		ns = model.DefaultNamespace
	}
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs
		WHERE id = $1 OR (namespace = $2 AND name = $1)
		ORDER BY id = $1 DESC LIMIT 1`, p.IDOrName, ns))
	if err != nil {
		return nil, translate(err, "get job %s", p.IDOrName)
	}
	return j, nil
}

// cursorSep separates name and namespace in a cursor of a list across namespaces. Names
// and namespaces never hold it, and it never reaches the database.
const cursorSep = "\x00"

// ListJobs lists jobs by name, paging after Cursor. Within a namespace the cursor is the
// last name; across namespaces (which sort by name, then namespace) it is the last name and
// namespace joined by cursorSep, so that jobs sharing a name are never skipped.
func (s *Store) ListJobs(ctx context.Context, p *store.ListJobsParams) (*store.JobPage, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	// After (name, namespace) when the cursor has both, else after every job of the name.
	afterName, ns, both := strings.Cut(p.Cursor, cursorSep)
	var afterNS *string
	if both && p.Namespace == "" {
		afterNS = &ns
	}
	rows, err := s.pool.Query(ctx, `SELECT `+jobCols+` FROM jobs
		WHERE ($1::text = '' OR namespace = $1::text)
		  AND ($2::text = '' OR spec->>'queue' = $2::text)
		  AND ($3::boolean IS NULL OR enabled = $3::boolean)
		  AND (name > $4::text OR (name = $4::text AND namespace > $5::text))
		ORDER BY name, namespace
		LIMIT $6`, p.Namespace, p.Queue, p.Enabled, afterName, afterNS, limit+1)
	if err != nil {
		return nil, translate(err, "list jobs")
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*model.Job, error) { return scanJob(row) })
	if err != nil {
		return nil, translate(err, "list jobs")
	}
	page := &store.JobPage{Jobs: jobs}
	if len(jobs) > limit {
		page.Jobs = jobs[:limit]
		last := jobs[limit-1]
		page.NextCursor = last.Name
		if p.Namespace == "" {
			page.NextCursor = last.Name + cursorSep + last.Namespace
		}
	}
	if page.Jobs == nil {
		page.Jobs = []*model.Job{}
	}
	return page, nil
}

// UpdateJob replaces a job's spec, enabled flag and next fire. When the job's kind (handler)
// changes, its runs not yet leased take the new kind, since leasing filters on it.
func (s *Store) UpdateJob(ctx context.Context, p *store.UpdateJobParams) (*model.Job, error) {
	spec, err := encodeSpec(&p.Spec)
	if err != nil {
		return nil, fmt.Errorf("update job %s: %w", p.ID, err)
	}
	var j *model.Job
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var oldHandler string
		if err := tx.QueryRow(ctx, `SELECT coalesce(spec->>'handler', '') FROM jobs WHERE id = $1 FOR UPDATE`, p.ID).Scan(&oldHandler); err != nil {
			return translate(err, "update job %s", p.ID)
		}
		j, err = scanJob(tx.QueryRow(ctx, `UPDATE jobs
			SET spec = $2, enabled = $3, next_fire_at = $4, updated_at = $5
			WHERE id = $1 RETURNING `+jobCols, p.ID, spec, p.Enabled, utcPtr(p.NextFireAt), utc(p.Now)))
		if err != nil {
			return translate(err, "update job %s", p.ID)
		}
		if oldHandler != p.Spec.Handler {
			if _, err := tx.Exec(ctx, `UPDATE runs SET handler = $2
				WHERE job_id = $1 AND status IN ('waiting', 'scheduled', 'queued')`, p.ID, p.Spec.Handler); err != nil {
				return translate(err, "update job %s: runs", p.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// DeleteJob deletes a job and cancels its active runs in one transaction.
func (s *Store) DeleteJob(ctx context.Context, p *store.DeleteJobParams) ([]*model.Run, error) {
	var out []*model.Run
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id string
		if err := tx.QueryRow(ctx, `DELETE FROM jobs WHERE id = $1 RETURNING id`, p.ID).Scan(&id); err != nil {
			return translate(err, "delete job %s", p.ID)
		}
		runs, err := cancelRuns(ctx, tx, &store.CancelRunsParams{JobID: p.ID, Reason: "job deleted", Now: p.Now})
		if err != nil {
			return fmt.Errorf("delete job %s: %w", p.ID, err)
		}
		out = runs
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
