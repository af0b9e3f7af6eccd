package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
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

const defaultListLimit = 100

// CreateJobs inserts jobs with their first runs in one transaction; see store.Store.
//
// The common batch (no key or name taken) goes in with multi-row INSERTs. When any row
// meets a taken key, the fast attempt is rolled back to a savepoint and the batch is done
// entry by entry, so that each entry sees the ones before it exactly as the contract says.
func (s *Store) CreateJobs(ctx context.Context, p *store.CreateJobsParams) ([]store.CreateJobResult, error) {
	specs := make([][]byte, len(p.Jobs))
	for i, nj := range p.Jobs {
		if nj.Job == nil {
			return nil, fmt.Errorf("create jobs: entry %d: no job", i)
		}
		if err := store.CheckInstants(nj.Run); err != nil {
			return nil, fmt.Errorf("create jobs: %w", err)
		}
		b, err := encodeSpec(&nj.Job.Spec)
		if err != nil {
			return nil, fmt.Errorf("create jobs: job %q: encode spec: %w", nj.Job.Name, err)
		}
		specs[i] = b
	}
	out := make([]store.CreateJobResult, len(p.Jobs))
	err := s.write(ctx, func(t *wtx) error {
		clear(out)
		ok := false
		if !slices.ContainsFunc(p.Jobs, func(nj store.NewJob) bool { return !store.Plain(nj.Run) }) {
			var err error
			if ok, err = t.createJobsFast(p.Jobs, specs, out); err != nil {
				return err
			}
		}
		if !ok {
			insJob, insRun := t.stmt(t.ws.insertJob), t.stmt(t.ws.insertRun)
			for i, nj := range p.Jobs {
				var err error
				if out[i], err = t.createJob(insJob, insRun, nj, specs[i], p.Now); err != nil {
					return fmt.Errorf("job %q: %w", nj.Job.Name, err)
				}
			}
		}
		queues := map[string]bool{}
		for i, nj := range p.Jobs {
			if out[i].Err == nil && !out[i].Existing && nj.Run != nil {
				queues[nj.Run.Queue] = true
			}
		}
		return t.ensureQueues(queues, p.Now)
	})
	if err != nil {
		return nil, fmt.Errorf("create jobs: %w", err)
	}
	return out, nil
}

// createJobsFast inserts every job and run with multi-row INSERTs; an anonymous job
// (store.Anonymous) is its run alone, which carries the spec. ok is false, with nothing
// written, when any row met a taken key.
func (t *wtx) createJobsFast(jobs []store.NewJob, specs [][]byte, out []store.CreateJobResult) (bool, error) {
	var withRow, withRun []int
	for i, nj := range jobs {
		if !store.Anonymous(nj) {
			withRow = append(withRow, i)
		}
		if nj.Run != nil {
			withRun = append(withRun, i)
		}
	}
	ok, err := t.allOrNothing(func() (bool, error) {
		ok, err := t.insertAll(jobsInsert, len(withRow), func(i int) []any {
			return jobArgs(jobs[withRow[i]].Job, specs[withRow[i]])
		})
		if err != nil || !ok {
			return false, err
		}
		return t.insertAll(runsInsert, len(withRun), func(i int) []any {
			k := withRun[i]
			return runArgs(jobs[k].Run, runInfo(jobs[k], specs[k]))
		})
	})
	if err != nil || !ok {
		return false, err
	}
	for i, nj := range jobs {
		out[i] = store.CreateJobResult{Job: storedJob(nj.Job)}
		if nj.Run != nil {
			out[i].Run = storedRun(nj.Run, nj.Job.Spec.Requirements)
		}
	}
	return true, nil
}

// allOrNothing runs fn inside a savepoint and undoes what it wrote unless it reports ok.
func (t *wtx) allOrNothing(fn func() (bool, error)) (ok bool, err error) {
	if _, err := t.stmt(t.ws.savepoint).ExecContext(t.ctx); err != nil {
		return false, err
	}
	ok, err = fn()
	if err != nil {
		return false, err // the whole transaction rolls back
	}
	if !ok {
		if _, err := t.stmt(t.ws.rollbackTo).ExecContext(t.ctx); err != nil {
			return false, err
		}
	}
	if _, err := t.stmt(t.ws.release).ExecContext(t.ctx); err != nil {
		return false, err
	}
	return ok, nil
}

// insertAll inserts n rows (row(i) gives the values of row i) with m's multi-row INSERT
// ... ON CONFLICT DO NOTHING. ok reports that every row went in; it stops at the first
// chunk where one did not.
func (t *wtx) insertAll(m *multiInsert, n int, row func(i int) []any) (bool, error) {
	k := len(m.cols)
	vals := make([]any, 0, k*min(n, maxChunk))
	var args []any
	ok := true
	err := chunks(n, func(lo, hi int) error {
		if !ok {
			return nil
		}
		vals = vals[:0]
		for i := lo; i < hi; i++ {
			vals = append(vals, row(i)...)
		}
		rows := bucket(hi - lo)
		shared := sharedCols(vals, k)
		st, err := t.batch(fmt.Sprintf("%s/%x", m.name, shared), rows, func(rows int) string { return m.sql(rows, shared) })
		if err != nil {
			return err
		}
		args = m.args(args[:0], vals, shared, rows)
		res, err := st.ExecContext(t.ctx, args...)
		if err != nil {
			return fmt.Errorf("insert %s: %w", m.name, mapErr(err))
		}
		got, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("insert %s: %w", m.name, err)
		}
		ok = got == int64(hi-lo)
		return nil
	})
	return ok, err
}

// jobArgs are the insertJob values of j.
func jobArgs(j *model.Job, spec []byte) []any {
	return []any{j.ID, j.Namespace, j.Name, spec, j.Spec.Queue, j.Spec.Handler,
		j.Spec.Requirements.CPU, j.Spec.Requirements.MemoryMB, j.Spec.Requirements.GPU,
		store.LabelsColumn(j.Spec.Requirements.Labels), boolInt(j.Enabled), nullMicros(j.NextFireAt), nullStr(j.IdempotencyKey), j.RequestHash,
		micros(j.CreatedAt), micros(j.UpdatedAt)}
}

// runArgs are the insertRun values of r.
func runArgs(r *model.Run, ji jobInfo) []any {
	var args any
	if len(r.Args) > 0 {
		args = []byte(r.Args)
	}
	return []any{r.ID, r.JobID, r.JobName, r.Namespace, string(r.Status), string(r.PendingCode), r.PendingReason,
		r.Queue, r.Priority, string(r.Trigger), args, ji.handler, ji.req.CPU, ji.req.MemoryMB, ji.req.GPU,
		store.LabelsColumn(ji.req.Labels), micros(r.ScheduledFor), micros(r.CreatedAt), nullMicros(r.StartedAt), nullMicros(r.FinishedAt),
		r.Attempt, r.MaxAttempts, nullStr(r.IdempotencyKey), boolInt(r.CancelRequested), r.Error, nullMicros(r.Instant),
		nullBytes(ji.spec)}
}

// nullBytes is b, or NULL when b is nil.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// runInfo is what the first run of nj, whose job's spec encodes as spec, copies from its
// job: with the spec when the job is anonymous.
func runInfo(nj store.NewJob, spec []byte) jobInfo {
	ji := infoOf(&nj.Job.Spec)
	if store.Anonymous(nj) {
		ji.spec = spec
	}
	return ji
}

// storedJob returns j as the store keeps it.
func storedJob(j *model.Job) *model.Job {
	c := *j
	c.CreatedAt, c.UpdatedAt, c.NextFireAt = norm(j.CreatedAt), norm(j.UpdatedAt), normp(j.NextFireAt)
	return &c
}

// storedRun returns r as the store keeps it.
func storedRun(r *model.Run, req model.Requirements) *model.Run {
	c := *r
	c.Requirements = req
	c.ScheduledFor, c.CreatedAt = norm(r.ScheduledFor), norm(r.CreatedAt)
	c.StartedAt, c.FinishedAt, c.Instant = normp(r.StartedAt), normp(r.FinishedAt), normp(r.Instant)
	c.WorkerID, c.LeaseToken, c.LeaseExpiresAt, c.Attempts = "", "", nil, nil
	if len(r.Args) == 0 {
		c.Args = nil
	}
	return &c
}

// createJob writes one entry. Entry-level failures go in the result's Err; a returned
// error aborts the batch.
func (t *wtx) createJob(insJob, insRun *sql.Stmt, nj store.NewJob, spec []byte, now time.Time) (store.CreateJobResult, error) {
	j := nj.Job
	if store.Anonymous(nj) {
		rr, err := t.createRun(insRun, nj.Run, runInfo(nj, spec), now)
		if err != nil || rr.Err != nil {
			return store.CreateJobResult{Err: rr.Err}, err
		}
		if rr.Existing {
			return store.CreateJobResult{Err: fmt.Errorf("run %s: id taken: %w", nj.Run.ID, model.ErrConflict)}, nil
		}
		return store.CreateJobResult{Job: storedJob(j), Run: rr.Run}, nil
	}
	res, err := insJob.ExecContext(t.ctx, jobArgs(j, spec)...)
	if err != nil {
		return store.CreateJobResult{}, mapErr(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		// The key, the name or the id is taken. An idempotency key answers with the
		// first result; anything else is a conflict.
		if j.IdempotencyKey != "" {
			prev, err := scanJob(t.stmt(t.ws.jobByKey).QueryRowContext(t.ctx, j.Namespace, j.IdempotencyKey))
			switch {
			case err == nil:
				first, err := scanRun(t.stmt(t.ws.firstRun).QueryRowContext(t.ctx, prev.ID))
				var run *model.Run
				switch {
				case err == nil:
					run = first.run
				case !errors.Is(err, sql.ErrNoRows):
					return store.CreateJobResult{}, fmt.Errorf("first run: %w", err)
				}
				return store.CreateJobResult{Job: prev, Run: run, Existing: true, Conflict: prev.RequestHash != j.RequestHash}, nil
			case !errors.Is(err, sql.ErrNoRows):
				return store.CreateJobResult{}, fmt.Errorf("job by key: %w", err)
			}
		}
		return store.CreateJobResult{Err: fmt.Errorf("job %s/%s: name or id taken: %w", j.Namespace, j.Name, model.ErrConflict)}, nil
	}
	out := store.CreateJobResult{Job: storedJob(j)}
	if nj.Run == nil {
		return out, nil
	}
	rr, err := t.createRun(insRun, nj.Run, infoOf(&j.Spec), now)
	if err != nil {
		return store.CreateJobResult{}, err
	}
	if rr.Err != nil || rr.Existing {
		return t.undoJob(j, nj.Run, rr.Err)
	}
	out.Run, out.Replaced = rr.Run, rr.Replaced
	return out, nil
}

// undoJob deletes a job whose first run could not be created: the run's error runErr, or,
// when nil, its id or idempotency key is taken.
func (t *wtx) undoJob(j *model.Job, r *model.Run, runErr error) (store.CreateJobResult, error) {
	if _, err := t.stmt(t.ws.deleteJob).ExecContext(t.ctx, j.ID); err != nil {
		return store.CreateJobResult{}, fmt.Errorf("undo job: %w", err)
	}
	if runErr != nil {
		return store.CreateJobResult{Err: runErr}, nil
	}
	return store.CreateJobResult{Err: fmt.Errorf("run %s: id or idempotency key taken: %w", r.ID, model.ErrConflict)}, nil
}

// jobInfo is what a run copies from its job.
type jobInfo struct {
	handler string
	req     model.Requirements
	// spec is the job's spec (JSON) when the run is anonymous (store.Anonymous) and carries
	// it, nil for the others.
	spec []byte
}

// jobInfoCols are the jobs columns of a jobInfo, in scanJobInfo's order.
const jobInfoCols = `handler, req_cpu, req_memory_mb, req_gpu, req_labels`

func scanJobInfo(sc scanner) (jobInfo, error) {
	var (
		ji     jobInfo
		labels string
	)
	if err := sc.Scan(&ji.handler, &ji.req.CPU, &ji.req.MemoryMB, &ji.req.GPU, &labels); err != nil {
		return jobInfo{}, err
	}
	var err error
	ji.req.Labels, err = store.LabelsFromColumn(labels)
	return ji, err
}

// infoOf is what a run of a job with spec copies from it.
func infoOf(spec *model.JobSpec) jobInfo {
	return jobInfo{handler: spec.Handler, req: spec.Requirements}
}

// insertRun inserts r; ok is false when a unique key (id, idempotency key, cron instant)
// is taken. It returns the run as stored.
func (t *wtx) insertRun(ins *sql.Stmt, r *model.Run, ji jobInfo) (*model.Run, bool, error) {
	res, err := ins.ExecContext(t.ctx, runArgs(r, ji)...)
	if err != nil {
		return nil, false, fmt.Errorf("insert run %s: %w", r.ID, mapErr(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, false, nil
	}
	return storedRun(r, ji.req), true, nil
}

// ensureQueues creates the named queues that do not exist yet, with defaults. Queues are
// never deleted, so a queue known to exist (created or seen by a committed transaction of
// this process) needs no statement.
func (t *wtx) ensureQueues(names map[string]bool, now time.Time) error {
	if len(names) == 0 {
		return nil
	}
	var st *sql.Stmt
	for name := range names {
		if t.ws.queueKnown(name) {
			continue
		}
		if st == nil {
			st = t.stmt(t.ws.ensureQueue)
		}
		if _, err := st.ExecContext(t.ctx, name, micros(now), micros(now)); err != nil {
			return fmt.Errorf("create queue %q: %w", name, err)
		}
		t.queues = append(t.queues, name)
	}
	return nil
}

// GetJob finds a job by id, then by name in the namespace.
func (s *Store) GetJob(ctx context.Context, p *store.GetJobParams) (*model.Job, error) {
	// An id names a job before a name does: a job's row, then an anonymous job, by id.
	j, err := scanJob(s.rs.jobByID.QueryRowContext(ctx, p.IDOrName))
	if errors.Is(err, sql.ErrNoRows) {
		j, err = s.anonymousJob(ctx, p.IDOrName)
	}
	if errors.Is(err, sql.ErrNoRows) {
		ns := p.Namespace
		if ns == "" {
			ns = model.DefaultNamespace
		}
		j, err = scanJob(s.rs.jobByName.QueryRowContext(ctx, ns, p.IDOrName))
	}
	if err != nil {
		return nil, fmt.Errorf("get job %q: %w", p.IDOrName, mapErr(err))
	}
	return j, nil
}

// anonymousJob reads the anonymous job id from its run (runs_job). Its name is its id.
func (s *Store) anonymousJob(ctx context.Context, id string) (*model.Job, error) {
	var spec []byte
	rr, err := scanRun(s.rs.anonymousRun.QueryRowContext(ctx, id), &spec)
	if err != nil {
		return nil, err
	}
	var js model.JobSpec
	if err := json.Unmarshal(spec, &js); err != nil {
		return nil, fmt.Errorf("job %s: decode spec: %w", id, err)
	}
	return store.AnonymousJob(rr.run, js), nil
}

// materialize gives the anonymous jobs among ids (store.Anonymous) their jobs rows, made
// from their runs, and takes the spec off the runs whose job got its row: from then on
// they are jobs like any other. It returns how many rows it wrote. It is what every change to a job does first,
// so that an anonymous job changes as a job.
func (t *wtx) materialize(ids ...string) (int, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, fmt.Errorf("materialize jobs: %w", err)
	}
	res, err := t.tx.ExecContext(t.ctx, materializeJobsSQL, list)
	if err != nil {
		return 0, fmt.Errorf("write the jobs rows of anonymous jobs: %w", mapErr(err))
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		return 0, nil
	}
	if _, err := t.tx.ExecContext(t.ctx, materializeRunsSQL, list); err != nil {
		return 0, fmt.Errorf("take the spec off anonymous runs: %w", mapErr(err))
	}
	return int(n), nil
}

// encodeJobCursor makes ListJobs' opaque cursor from the last job's name and namespace.
func encodeJobCursor(name, namespace string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(name + "\x00" + namespace))
}

// decodeJobCursor reads a cursor of encodeJobCursor. Anything else is taken as a bare job
// name (all namespaces from there on), so that a stale or hand-made cursor pages on
// instead of failing.
func decodeJobCursor(c string) (name, namespace string) {
	if b, err := base64.RawURLEncoding.DecodeString(c); err == nil {
		if name, namespace, ok := strings.Cut(string(b), "\x00"); ok {
			return name, namespace
		}
	}
	return c, ""
}

// ListJobs lists jobs by name, then namespace.
func (s *Store) ListJobs(ctx context.Context, p *store.ListJobsParams) (*store.JobPage, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	var (
		where []string
		args  []any
	)
	if p.Namespace != "" {
		where = append(where, "namespace = ?")
		args = append(args, p.Namespace)
	}
	if len(p.Namespaces) > 0 {
		where = append(where, "namespace IN (?"+strings.Repeat(", ?", len(p.Namespaces)-1)+")")
		for _, ns := range p.Namespaces {
			args = append(args, ns)
		}
	}
	if p.Queue != "" {
		where = append(where, "queue = ?")
		args = append(args, p.Queue)
	}
	if p.Enabled != nil {
		where = append(where, "enabled = ?")
		args = append(args, boolInt(*p.Enabled))
	}
	if p.Cursor != "" {
		name, ns := decodeJobCursor(p.Cursor)
		if p.Namespace != "" {
			where = append(where, "name > ?")
			args = append(args, name)
		} else {
			where = append(where, "(name, namespace) > (?, ?)")
			args = append(args, name, ns)
		}
	}
	q := `SELECT ` + jobCols + ` FROM jobs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	if p.Namespace != "" {
		q += ` ORDER BY name`
	} else {
		q += ` ORDER BY name, namespace`
	}
	q += ` LIMIT ?`
	args = append(args, limit+1)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	page := &store.JobPage{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		page.Jobs = append(page.Jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	if len(page.Jobs) > limit {
		page.Jobs = page.Jobs[:limit]
		last := page.Jobs[limit-1]
		page.NextCursor = encodeJobCursor(last.Name, last.Namespace)
	}
	return page, nil
}

// UpdateJob replaces a job's spec, enabled flag and next fire time.
func (s *Store) UpdateJob(ctx context.Context, p *store.UpdateJobParams) (*model.Job, error) {
	spec, err := encodeSpec(&p.Spec)
	if err != nil {
		return nil, fmt.Errorf("update job %s: encode spec: %w", p.ID, err)
	}
	var j *model.Job
	err = s.write(ctx, func(t *wtx) error {
		if _, err := t.materialize(p.ID); err != nil {
			return err
		}
		var oldHandler string
		if err := t.tx.QueryRowContext(t.ctx, `SELECT handler FROM jobs WHERE id = ?`, p.ID).Scan(&oldHandler); err != nil {
			return mapErr(err)
		}
		row := t.tx.QueryRowContext(t.ctx, `UPDATE jobs SET spec = ?, queue = ?, handler = ?, req_cpu = ?, req_memory_mb = ?,
			req_gpu = ?, req_labels = ?, enabled = ?, next_fire_at = ?, updated_at = ? WHERE id = ? RETURNING `+jobCols,
			spec, p.Spec.Queue, p.Spec.Handler, p.Spec.Requirements.CPU, p.Spec.Requirements.MemoryMB, p.Spec.Requirements.GPU,
			store.LabelsColumn(p.Spec.Requirements.Labels), boolInt(p.Enabled), nullMicros(p.NextFireAt), micros(p.Now), p.ID)
		if j, err = scanJob(row); err != nil {
			return mapErr(err)
		}
		if oldHandler != p.Spec.Handler {
			// Runs not yet leased follow the job's kind, so that lease filters match the
			// spec the lease will carry.
			if _, err := t.tx.ExecContext(t.ctx, `UPDATE runs SET handler = ? WHERE job_id = ? AND status IN `+statusPending,
				p.Spec.Handler, p.ID); err != nil {
				return fmt.Errorf("update runs' kind: %w", err)
			}
		}
		if p.Reschedule {
			if _, err := t.tx.ExecContext(t.ctx, dropAheadSQL, p.ID, micros(p.Now)); err != nil {
				return fmt.Errorf("drop runs created ahead: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update job %s: %w", p.ID, err)
	}
	return j, nil
}

// DeleteJob deletes a job and cancels its active runs.
func (s *Store) DeleteJob(ctx context.Context, p *store.DeleteJobParams) ([]*model.Run, error) {
	var out []*model.Run
	err := s.write(ctx, func(t *wtx) error {
		if _, err := t.materialize(p.ID); err != nil {
			return err
		}
		res, err := t.stmt(t.ws.deleteJob).ExecContext(t.ctx, p.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return model.ErrNotFound
		}
		if _, err := t.tx.ExecContext(t.ctx, `DELETE FROM job_secrets WHERE job_id = ?`, p.ID); err != nil {
			return fmt.Errorf("delete webhook secret: %w", err)
		}
		if out, err = t.cancelJobRuns(p.ID, scheduler.JobDeleted, p.Now); err != nil {
			return err
		}
		admitted, err := t.settle(out, p.Now)
		out = append(out, admitted...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete job %s: %w", p.ID, err)
	}
	return out, nil
}
