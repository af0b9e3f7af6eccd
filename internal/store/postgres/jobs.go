package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// defaultLimit is the page size of lists that ask for none.
const defaultLimit = 100

// runInsertSelect is the SELECT list that turns runInput rows (alias i) into runs columns;
// the job's kind and requirements come from %s (i.handler, ... or the jobs row j).
const runInsertSelect = `i.id, i.job_id, i.job_name, i.namespace, i.status, i.pending_code,
	i.pending_reason, i.queue, i.priority, i.trigger_kind, %s, i.args, i.scheduled_for, i.created_at,
	i.finished_at, i.attempt, i.max_attempts, NULLIF(i.idempotency_key, ''), i.error, i.instant, i.spec`

const runInsertCols = `id, job_id, job_name, namespace, status, pending_code, pending_reason,
	queue, priority, trigger_kind, handler, req_cpu, req_memory_mb, req_gpu, req_labels, args, scheduled_for,
	created_at, finished_at, attempt, max_attempts, idempotency_key, error, instant, spec`

// Where a run's job kind and requirements come from: the input arrays, or the jobs row j.
const (
	kindFromInput = `i.handler, i.req_cpu, i.req_memory_mb, i.req_gpu, i.req_labels`
	kindFromJob   = `j.handler, j.req_cpu, j.req_memory_mb, j.req_gpu, j.req_labels`
)

// insertJobsFromInput inserts the jobs of parameters $1..$16 (column arrays, see
// createJobsArgs).
const insertJobsFromInput = `INSERT INTO jobs (` + jobInsertCols + `)
	SELECT id, namespace, name, spec, queue, handler, req_cpu, req_memory_mb, req_gpu, req_labels,
		enabled, next_fire_at, NULLIF(idempotency_key, ''), request_hash, created_at, updated_at
	FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::text[], $6::text[],
		$7::float8[], $8::int8[], $9::int4[], $10::jsonb[], $11::bool[], $12::timestamptz[], $13::text[],
		$14::text[], $15::timestamptz[], $16::timestamptz[])
		AS j(` + jobInsertCols + `)`

// createJobsSQL inserts the jobs that clash with nothing, the first runs of those jobs and
// the anonymous runs (which carry their spec, and have no jobs row to clash), and the queues
// those runs name, in one statement; it returns the ids of the inserted jobs, anonymous ones
// included. It is the slow path of CreateJobs, taken when the fast path (COPY) met a unique
// violation.
var createJobsSQL = `WITH ins AS (
	` + insertJobsFromInput + `
	ON CONFLICT DO NOTHING
	RETURNING id
), new_runs AS (
	INSERT INTO runs (` + runInsertCols + `)
	SELECT ` + fmt.Sprintf(runInsertSelect, kindFromInput) + `
	FROM ` + runInput{}.sql(18) + ` LEFT JOIN ins ON ins.id = i.job_id
	WHERE ins.id IS NOT NULL OR i.spec IS NOT NULL
	RETURNING queue, job_id, spec IS NOT NULL AS anonymous
), new_queues AS (
	INSERT INTO queues (name, created_at, updated_at)
	SELECT DISTINCT queue, $17::timestamptz, $17::timestamptz FROM new_runs
	ON CONFLICT DO NOTHING
)
SELECT id FROM ins UNION ALL SELECT job_id FROM new_runs WHERE anonymous`

const jobInsertCols = `id, namespace, name, spec, queue, handler, req_cpu, req_memory_mb, req_gpu, req_labels,
	enabled, next_fire_at, idempotency_key, request_hash, created_at, updated_at`

// jobColumns and runColumns are the columns the fast path copies, in copy order (copyJobs
// writes the fields in this order).
var (
	jobColumns = []string{"id", "namespace", "name", "spec", "queue", "handler", "req_cpu",
		"req_memory_mb", "req_gpu", "req_labels", "enabled", "next_fire_at", "idempotency_key", "request_hash",
		"created_at", "updated_at"}
	runColumns = []string{"id", "job_id", "job_name", "namespace", "status", "pending_code",
		"pending_reason", "queue", "priority", "trigger_kind", "handler", "req_cpu",
		"req_memory_mb", "req_gpu", "req_labels", "args", "scheduled_for", "created_at", "finished_at",
		"attempt", "max_attempts", "idempotency_key", "error", "instant", "spec"}

	copyJobsSQL = `COPY jobs (` + strings.Join(jobColumns, ", ") + `) FROM STDIN (FORMAT binary)`
	copyRunsSQL = `COPY runs (` + strings.Join(runColumns, ", ") + `) FROM STDIN (FORMAT binary)`
)

// newJob is an entry of CreateJobs on its way to the store.
type newJob struct {
	job  *model.Job
	run  *model.Run
	spec []byte
	// anonymous entries (store.Anonymous) are written as their run alone, which carries
	// spec.
	anonymous bool
}

// CreateJobs inserts jobs and their first runs in one transaction. An anonymous job
// (store.Anonymous) is its run alone: the run carries the job's spec, and no jobs row is
// written.
//
// Before writing: entries that repeat an earlier entry's idempotency key are answered from
// it, and a repeated name fails; a first run whose idempotency key is taken fails its entry;
// an idempotency key already used in the store answers with that job. The rest is written
// by COPY, or for a few jobs by one plain INSERT statement (see plainBatch), the fast
// paths. When either meets a unique violation (a name taken, or a key used since the
// check), the batch is written instead by one INSERT ... ON CONFLICT DO NOTHING statement,
// which skips the entries that clash and tells which they were.
func (s *Store) CreateJobs(ctx context.Context, p *store.CreateJobsParams) ([]store.CreateJobResult, error) {
	for _, e := range p.Jobs {
		if err := store.CheckInstants(e.Run); err != nil {
			return nil, fmt.Errorf("create jobs: %w", err)
		}
	}
	for _, e := range p.Jobs {
		if !store.Plain(e.Run) {
			return s.createJobsTx(ctx, p)
		}
	}
	now := utc(p.Now)
	res := make([]store.CreateJobResult, len(p.Jobs))
	jobs := make([]*model.Job, len(p.Jobs))
	runs := make([]*model.Run, len(p.Jobs))
	sameAs := make([]int, len(p.Jobs)) // index of the earlier entry with the same key, or -1
	sent := make([]bool, len(p.Jobs))
	byKey := make(map[[2]string]int)
	byName := make(map[[2]string]int, len(p.Jobs))
	runKeys := make(map[string]bool)
	var keys [][2]string
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
			runs[i].Requirements = j.Spec.Requirements // what the run copies from its job
		}
		if j.IdempotencyKey != "" {
			k := [2]string{j.Namespace, j.IdempotencyKey}
			if first, ok := byKey[k]; ok {
				sameAs[i] = first
				continue
			}
			byKey[k] = i
			keys = append(keys, k)
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
		}
		sent[i] = true
	}
	if len(runKeys) > 0 {
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
	existing, err := s.jobsByKey(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("create jobs: %w", err)
	}
	var batch []newJob
	for i, j := range jobs {
		if !sent[i] {
			continue
		}
		if ex := existing[[2]string{j.Namespace, j.IdempotencyKey}]; j.IdempotencyKey != "" && ex != nil {
			sent[i] = false
			res[i] = store.CreateJobResult{Job: ex.job, Run: ex.run, Existing: true, Conflict: ex.job.RequestHash != j.RequestHash}
			continue
		}
		spec, err := encodeSpec(&j.Spec)
		if err != nil {
			return nil, fmt.Errorf("create job %s/%s: %w", j.Namespace, j.Name, err)
		}
		batch = append(batch, newJob{job: j, run: runs[i], spec: spec, anonymous: store.Anonymous(p.Jobs[i])})
	}

	// Concurrent batches insert names in one order, so that their waits on the unique index
	// cannot form a cycle. Anonymous entries write no name: a batch of them needs no order.
	named := 0
	for _, b := range batch {
		if !b.anonymous {
			named++
		}
	}
	if named > 1 {
		slices.SortFunc(batch, func(a, b newJob) int {
			if c := strings.Compare(a.job.Namespace, b.job.Namespace); c != 0 {
				return c
			}
			return strings.Compare(a.job.Name, b.job.Name)
		})
	}
	inserted := make(map[string]bool, len(batch))
	if len(batch) > 0 {
		write := s.copyJobs
		if len(batch) <= plainBatch && s.queuesKnown(batch) {
			write = s.insertPlain
		}
		err := write(ctx, batch, now)
		switch {
		case err == nil:
			for _, b := range batch {
				inserted[b.job.ID] = true
			}
		case errors.Is(err, model.ErrConflict): // a unique violation
			s.log.Debug("postgres: create jobs: met a taken name or key; inserting with ON CONFLICT", "jobs", len(batch))
			ids, err := s.insertJobs(ctx, batch, now)
			if err != nil {
				return nil, err
			}
			for _, id := range ids {
				inserted[id] = true
			}
		default:
			return nil, err
		}
	}

	// Entries the insert skipped: an idempotency key used meanwhile (answer with that job),
	// or a name (or id) already taken.
	var lookup [][2]string
	for i, j := range jobs {
		if sent[i] && !inserted[j.ID] && j.IdempotencyKey != "" {
			lookup = append(lookup, [2]string{j.Namespace, j.IdempotencyKey})
		}
	}
	if existing, err = s.jobsByKey(ctx, lookup); err != nil {
		return nil, fmt.Errorf("create jobs: %w", err)
	}
	for i, j := range jobs {
		switch {
		case !sent[i]:
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

// copyJobs writes batch with COPY in one transaction, creating the queues its runs name.
func (s *Store) copyJobs(ctx context.Context, batch []newJob, now time.Time) error {
	var newQueues []string
	seen := map[string]bool{}
	nruns, njobs := 0, 0
	for _, b := range batch {
		if !b.anonymous {
			njobs++
		}
		if b.run == nil {
			continue
		}
		nruns++
		if q := b.run.Queue; !seen[q] && !s.queueKnown(q) {
			seen[q] = true
			newQueues = append(newQueues, q)
		}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if len(newQueues) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO queues (name, created_at, updated_at)
				SELECT unnest($1::text[]), $2, $2 ON CONFLICT DO NOTHING`, newQueues, now); err != nil {
				return err
			}
		}
		pg := tx.Conn().PgConn()
		jobs := newCopyBuf(njobs * 400)
		for _, b := range batch {
			if b.anonymous {
				continue
			}
			j, req := b.job, b.job.Spec.Requirements
			jobs.tuple(len(jobColumns))
			jobs.text(j.ID)
			jobs.text(j.Namespace)
			jobs.text(j.Name)
			jobs.jsonb(b.spec)
			jobs.text(j.Spec.Queue)
			jobs.text(j.Spec.Handler)
			jobs.float8(req.CPU)
			jobs.int8(req.MemoryMB)
			jobs.int4(int32(req.GPU))
			jobs.jsonb(labelsDoc(req.Labels))
			jobs.bool(j.Enabled)
			jobs.timeOrNull(j.NextFireAt)
			jobs.textOrNull(j.IdempotencyKey)
			jobs.text(j.RequestHash)
			jobs.time(j.CreatedAt)
			jobs.time(j.UpdatedAt)
		}
		if njobs > 0 {
			if _, err := pg.CopyFrom(ctx, bytes.NewReader(jobs.end()), copyJobsSQL); err != nil {
				return err
			}
		}
		if nruns == 0 {
			return nil
		}
		runs := newCopyBuf(nruns * 300)
		for _, b := range batch {
			r, req := b.run, b.job.Spec.Requirements
			if r == nil {
				continue
			}
			runs.tuple(len(runColumns))
			runs.text(r.ID)
			runs.text(r.JobID)
			runs.text(r.JobName)
			runs.text(r.Namespace)
			runs.text(string(r.Status))
			runs.text(string(r.PendingCode))
			runs.text(r.PendingReason)
			runs.text(r.Queue)
			runs.int4(int32(r.Priority))
			runs.text(string(r.Trigger))
			runs.text(b.job.Spec.Handler)
			runs.float8(req.CPU)
			runs.int8(req.MemoryMB)
			runs.int4(int32(req.GPU))
			runs.jsonb(labelsDoc(req.Labels))
			runs.jsonb(r.Args)
			runs.time(r.ScheduledFor)
			runs.time(r.CreatedAt)
			runs.timeOrNull(r.FinishedAt)
			runs.int4(int32(r.Attempt))
			runs.int4(int32(r.MaxAttempts))
			runs.textOrNull(r.IdempotencyKey)
			runs.text(r.Error)
			runs.timeOrNull(r.Instant)
			if b.anonymous {
				runs.jsonb(b.spec)
			} else {
				runs.null()
			}
		}
		_, err := pg.CopyFrom(ctx, bytes.NewReader(runs.end()), copyRunsSQL)
		return err
	})
	if err != nil {
		return translate(err, "create jobs")
	}
	s.knowQueues(newQueues...)
	return nil
}

// plainBatch is the largest batch CreateJobs writes with insertPlainSQL rather than COPY.
// A group commit of single submissions is a few jobs: one statement is one round trip
// where COPY takes four (BEGIN, COPY jobs, COPY runs, COMMIT; three when every job is
// anonymous and has no jobs row to copy), and the round trips saved are CPU
// (system calls and wake-ups in both processes, which share the cores): steady on
// PostgreSQL did 1.15 times the jobs/s. Bigger batches are cheaper by COPY, hand-encoded
// where pgx encodes the statement's 41 arrays generically (64-job batches ~1.25 times
// faster by COPY; see BENCHMARKS.md).
const plainBatch = 16

// queuesKnown reports whether every queue that batch's runs name is known to exist.
func (s *Store) queuesKnown(batch []newJob) bool {
	for _, b := range batch {
		if b.run != nil && !s.queueKnown(b.run.Queue) {
			return false
		}
	}
	return true
}

// insertPlainSQL inserts jobs and their first runs in one statement, without ON CONFLICT:
// a unique violation fails it whole, as it fails COPY.
var insertPlainSQL = `WITH ins AS (
	` + insertJobsFromInput + `
)
INSERT INTO runs (` + runInsertCols + `)
SELECT ` + fmt.Sprintf(runInsertSelect, kindFromInput) + `
FROM ` + runInput{}.sql(17)

// insertPlain writes batch, whose queues exist, with insertPlainSQL: one statement, one
// round trip, its own transaction.
func (s *Store) insertPlain(ctx context.Context, batch []newJob, now time.Time) error {
	args := createJobsArgs(batch, now)
	args = append(args[:16:16], args[17:]...) // createJobsSQL's $17 (now) is for its queues
	err := s.retry(ctx, func() error {
		_, err := s.pool.Exec(ctx, insertPlainSQL, args...)
		return err
	})
	return translate(err, "create jobs")
}

// insertJobs writes batch with createJobsSQL and returns the ids of the jobs it inserted.
func (s *Store) insertJobs(ctx context.Context, batch []newJob, now time.Time) ([]string, error) {
	args := createJobsArgs(batch, now)
	var ids []string
	err := s.retry(ctx, func() error {
		rows, err := s.pool.Query(ctx, createJobsSQL, args...)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, translate(err, "create jobs")
	}
	return ids, nil
}

// createJobsArgs returns the parameters of createJobsSQL for batch.
func createJobsArgs(batch []newJob, now time.Time) []any {
	n := len(batch)
	var (
		id, ns, name, queue, handler, key, hash = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		specs                                   = make([][]byte, n)
		reqCPU                                  = make([]float64, n)
		reqMem                                  = make([]int64, n)
		reqGPU                                  = make([]int32, n)
		reqLabels                               = make([][]byte, n)
		enabled                                 = make([]bool, n)
		nextFire                                = make([]*time.Time, n)
		created, updated                        = make([]time.Time, n), make([]time.Time, n)
		in                                      runInput
	)
	n = 0 // the jobs rows: anonymous entries have none
	for _, b := range batch {
		j, req := b.job, b.job.Spec.Requirements
		if b.run != nil {
			in.add(b.run, j.Spec.Handler, req)
			if b.anonymous {
				in.spec[in.len()-1] = b.spec
				continue
			}
		}
		id[n], ns[n], name[n], specs[n], queue[n], handler[n] = j.ID, j.Namespace, j.Name, b.spec, j.Spec.Queue, j.Spec.Handler
		reqCPU[n], reqMem[n], reqGPU[n], enabled[n], nextFire[n] = req.CPU, req.MemoryMB, int32(req.GPU), j.Enabled, j.NextFireAt
		key[n], hash[n], created[n], updated[n] = j.IdempotencyKey, j.RequestHash, j.CreatedAt, j.UpdatedAt
		reqLabels[n] = labelsDoc(req.Labels)
		n++
	}
	return append([]any{id[:n], ns[:n], name[:n], specs[:n], queue[:n], handler[:n], reqCPU[:n], reqMem[:n], reqGPU[:n],
		reqLabels[:n], enabled[:n], nextFire[:n], key[:n], hash[:n], created[:n], updated[:n], now}, in.params()...)
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
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		j, err = s.anonymousJob(ctx, p.IDOrName)
	case err == nil && j.ID != p.IDOrName:
		// Found by name: an anonymous job with this id comes first, as a job's id does.
		if a, aerr := s.anonymousJob(ctx, p.IDOrName); aerr == nil {
			j = a
		} else if !errors.Is(aerr, pgx.ErrNoRows) {
			err = aerr
		}
	}
	if err != nil {
		return nil, translate(err, "get job %s", p.IDOrName)
	}
	return j, nil
}

// anonymousJob reads the anonymous job id from its run (runs_job). Its name is its id.
func (s *Store) anonymousJob(ctx context.Context, id string) (*model.Job, error) {
	var (
		r                        runRow
		status, pending, trigger string
		args, spec               []byte
	)
	err := s.pool.QueryRow(ctx, `SELECT `+runCols+`, r.spec FROM runs r
		WHERE r.job_id = $1 AND r.spec IS NOT NULL ORDER BY r.id LIMIT 1`, id).
		Scan(append(runDest(&r, &status, &pending, &trigger, &args), &spec)...)
	if err != nil {
		return nil, err
	}
	fixRun(&r, status, pending, trigger, args)
	var js model.JobSpec
	if err := decodeSpec(spec, &js); err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return store.AnonymousJob(&r.Run, js), nil
}

// materializeSQL gives the anonymous jobs among $1 (store.Anonymous) their jobs rows, made
// from their runs, and takes the spec off the runs whose job got its row: from then on they
// are jobs like any other. (A row that cannot go in, its name taken by a job named like
// the id, leaves the job anonymous.) The runs are locked first, so that two such
// statements make one row. It returns a row per jobs row written.
const materializeSQL = `WITH anon AS (
	SELECT r.id, r.job_id, r.namespace, r.job_name, r.spec, r.queue, r.handler, r.req_cpu,
		r.req_memory_mb, r.req_gpu, r.req_labels, r.created_at
	FROM runs r WHERE r.job_id = ANY($1) AND r.spec IS NOT NULL
	ORDER BY r.id FOR UPDATE
), ins AS (
	INSERT INTO jobs (` + jobInsertCols + `)
	SELECT job_id, namespace, job_name, spec, queue, handler, req_cpu, req_memory_mb, req_gpu, req_labels,
		true, NULL, NULL, '', created_at, created_at
	FROM anon
	ON CONFLICT DO NOTHING
	RETURNING id
)
UPDATE runs r SET spec = NULL FROM anon JOIN ins ON ins.id = anon.job_id WHERE r.id = anon.id
RETURNING r.job_id`

// execer runs a statement on the pool (its own transaction) or in a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// materialize runs materializeSQL for jobIDs and returns how many jobs rows it wrote. It is
// what every change to a job does first, so that an anonymous job changes as a job.
func materialize(ctx context.Context, q execer, jobIDs ...string) (int, error) {
	tag, err := q.Exec(ctx, materializeSQL, jobIDs)
	if err != nil {
		return 0, translate(err, "write the jobs rows of anonymous jobs")
	}
	return int(tag.RowsAffected()), nil // a row per run, and an anonymous job has one
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
	q, args := listJobsSQL(p, limit+1)
	rows, err := s.pool.Query(ctx, q, args...)
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

// listJobsSQL builds the query of ListJobs for at most limit rows: within a namespace it
// walks jobs_namespace_name, across namespaces jobs_name.
func listJobsSQL(p *store.ListJobsParams, limit int) (string, []any) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, v ...any) {
		args = append(args, v...)
		for i := range v {
			cond = strings.Replace(cond, "$?", "$"+strconv.Itoa(len(args)-len(v)+i+1), 1)
		}
		where = append(where, cond)
	}
	order := "name, namespace"
	if p.Namespace != "" {
		add("namespace = $?", p.Namespace)
		order = "namespace, name"
		if p.Cursor != "" {
			add("name > $?", p.Cursor)
		}
	} else if name, ns, both := strings.Cut(p.Cursor, cursorSep); both {
		add("(name, namespace) > ($?, $?)", name, ns)
	} else if p.Cursor != "" {
		add("name > $?", p.Cursor)
	}
	if p.Queue != "" {
		add("queue = $?", p.Queue)
	}
	if p.Enabled != nil {
		add("enabled = $?", *p.Enabled)
	}
	if len(p.Namespaces) > 0 {
		add("namespace = ANY($?::text[])", p.Namespaces)
	}
	q := `SELECT ` + jobCols + ` FROM jobs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	q += ` ORDER BY ` + order + ` LIMIT $` + strconv.Itoa(len(args))
	return q, args
}

// UpdateJob replaces a job's spec, enabled flag and next fire. When the job's kind (handler)
// changes, its runs not yet leased take the new kind, since leasing filters on it.
func (s *Store) UpdateJob(ctx context.Context, p *store.UpdateJobParams) (*model.Job, error) {
	spec, err := encodeSpec(&p.Spec)
	if err != nil {
		return nil, fmt.Errorf("update job %s: %w", p.ID, err)
	}
	var j *model.Job
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := materialize(ctx, tx, p.ID); err != nil {
			return err
		}
		var oldHandler string
		if err := tx.QueryRow(ctx, `SELECT handler FROM jobs WHERE id = $1 FOR UPDATE`, p.ID).Scan(&oldHandler); err != nil {
			return translate(err, "update job %s", p.ID)
		}
		req := p.Spec.Requirements
		j, err = scanJob(tx.QueryRow(ctx, `UPDATE jobs
			SET spec = $2, enabled = $3, next_fire_at = $4, updated_at = $5, queue = $6,
				handler = $7, req_cpu = $8, req_memory_mb = $9, req_gpu = $10, req_labels = $11
			WHERE id = $1 RETURNING `+jobCols, p.ID, spec, p.Enabled, utcPtr(p.NextFireAt), utc(p.Now),
			p.Spec.Queue, p.Spec.Handler, req.CPU, req.MemoryMB, req.GPU, labelsDoc(req.Labels)))
		if err != nil {
			return translate(err, "update job %s", p.ID)
		}
		if oldHandler != p.Spec.Handler {
			if _, err := tx.Exec(ctx, `WITH t AS (
					SELECT id FROM runs WHERE job_id = $1 AND status IN ('waiting', 'scheduled', 'queued')
					ORDER BY id FOR UPDATE
				)
				UPDATE runs r SET handler = $2 FROM t
				WHERE r.id = t.id AND r.status IN ('waiting', 'scheduled', 'queued')`, p.ID, p.Spec.Handler); err != nil {
				return translate(err, "update job %s: runs", p.ID)
			}
		}
		if p.Reschedule {
			if _, err := tx.Exec(ctx, dropAheadSQL, p.ID, utc(p.Now)); err != nil {
				return translate(err, "update job %s: runs created ahead", p.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// dropAheadSQL deletes job $1's cron runs created ahead of their instant (after $2) that
// never ran (index runs_cron_instant).
const dropAheadSQL = `DELETE FROM runs WHERE job_id = $1 AND trigger_kind = 'cron' AND ` + cronInstant + ` > $2
	AND status = 'scheduled' AND attempt = 0 AND pending_code = 'not_due'`

// DeleteJob deletes a job and cancels its active runs in one transaction.
func (s *Store) DeleteJob(ctx context.Context, p *store.DeleteJobParams) ([]*model.Run, error) {
	var out []*model.Run
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := materialize(ctx, tx, p.ID); err != nil {
			return err
		}
		var id string
		if err := tx.QueryRow(ctx, `DELETE FROM jobs WHERE id = $1 RETURNING id`, p.ID).Scan(&id); err != nil {
			return translate(err, "delete job %s", p.ID)
		}
		if err := lockKeysOf(ctx, tx, nil, p.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM job_secrets WHERE job_id = $1`, p.ID); err != nil {
			return translate(err, "delete webhook secret of job %s", p.ID)
		}
		runs, err := cancelRuns(ctx, tx, &store.CancelRunsParams{JobID: p.ID, Reason: scheduler.JobDeleted, Now: p.Now})
		if err != nil {
			return fmt.Errorf("delete job %s: %w", p.ID, err)
		}
		admitted, err := settle(ctx, tx, runs, p.Now)
		out = append(runs, admitted...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
