package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

const defaultListLimit = 100

// CreateJobs inserts jobs with their first runs in one transaction; see store.Store.
func (s *Store) CreateJobs(ctx context.Context, p *store.CreateJobsParams) ([]store.CreateJobResult, error) {
	out := make([]store.CreateJobResult, len(p.Jobs))
	err := s.write(ctx, func(t *wtx) error {
		insJob, insRun := t.stmt(t.ws.insertJob), t.stmt(t.ws.insertRun)
		queues := map[string]bool{}
		for i, nj := range p.Jobs {
			if nj.Job == nil {
				return fmt.Errorf("entry %d: no job", i)
			}
			res, err := t.createJob(insJob, insRun, nj)
			if err != nil {
				return fmt.Errorf("job %q: %w", nj.Job.Name, err)
			}
			out[i] = res
			if res.Err == nil && !res.Existing && nj.Run != nil {
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

// createJob writes one entry. Entry-level failures go in the result's Err; a returned
// error aborts the batch.
func (t *wtx) createJob(insJob, insRun *sql.Stmt, nj store.NewJob) (store.CreateJobResult, error) {
	j := nj.Job
	spec, err := json.Marshal(j.Spec)
	if err != nil {
		return store.CreateJobResult{}, fmt.Errorf("encode spec: %w", err)
	}
	res, err := insJob.ExecContext(t.ctx, j.ID, j.Namespace, j.Name, spec, j.Spec.Queue, j.Spec.Handler,
		j.Spec.Requirements.CPU, j.Spec.Requirements.MemoryMB, j.Spec.Requirements.GPU,
		boolInt(j.Enabled), nullMicros(j.NextFireAt), nullStr(j.IdempotencyKey), j.RequestHash,
		micros(j.CreatedAt), micros(j.UpdatedAt))
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
	stored := *j
	stored.CreatedAt, stored.UpdatedAt, stored.NextFireAt = norm(j.CreatedAt), norm(j.UpdatedAt), normp(j.NextFireAt)
	out := store.CreateJobResult{Job: &stored}
	if nj.Run == nil {
		return out, nil
	}
	r, ok, err := t.insertRun(insRun, nj.Run, jobInfo{handler: j.Spec.Handler, req: j.Spec.Requirements})
	if err != nil {
		return store.CreateJobResult{}, err
	}
	if !ok {
		if _, err := t.stmt(t.ws.deleteJob).ExecContext(t.ctx, j.ID); err != nil {
			return store.CreateJobResult{}, fmt.Errorf("undo job: %w", err)
		}
		return store.CreateJobResult{Err: fmt.Errorf("run %s: id or idempotency key taken: %w", nj.Run.ID, model.ErrConflict)}, nil
	}
	out.Run = r
	return out, nil
}

// jobInfo is what a run copies from its job.
type jobInfo struct {
	handler string
	req     model.Requirements
}

// insertRun inserts r; ok is false when a unique key (id, idempotency key, cron instant)
// is taken. It returns the run as stored.
func (t *wtx) insertRun(ins *sql.Stmt, r *model.Run, ji jobInfo) (*model.Run, bool, error) {
	var args any
	if len(r.Args) > 0 {
		args = []byte(r.Args)
	}
	res, err := ins.ExecContext(t.ctx, r.ID, r.JobID, r.JobName, r.Namespace, string(r.Status), string(r.PendingCode), r.PendingReason,
		r.Queue, r.Priority, string(r.Trigger), args, ji.handler, ji.req.CPU, ji.req.MemoryMB, ji.req.GPU,
		micros(r.ScheduledFor), micros(r.CreatedAt), nullMicros(r.StartedAt), nullMicros(r.FinishedAt),
		r.Attempt, r.MaxAttempts, nullStr(r.IdempotencyKey), boolInt(r.CancelRequested), r.Error)
	if err != nil {
		return nil, false, fmt.Errorf("insert run %s: %w", r.ID, mapErr(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, false, nil
	}
	stored := *r
	stored.ScheduledFor, stored.CreatedAt = norm(r.ScheduledFor), norm(r.CreatedAt)
	stored.StartedAt, stored.FinishedAt = normp(r.StartedAt), normp(r.FinishedAt)
	stored.WorkerID, stored.LeaseToken, stored.LeaseExpiresAt, stored.Attempts = "", "", nil, nil
	if len(r.Args) == 0 {
		stored.Args = nil
	}
	return &stored, true, nil
}

// ensureQueues creates the named queues that do not exist yet, with defaults.
func (t *wtx) ensureQueues(names map[string]bool, now time.Time) error {
	if len(names) == 0 {
		return nil
	}
	st := t.stmt(t.ws.ensureQueue)
	for name := range names {
		if _, err := st.ExecContext(t.ctx, name, micros(now), micros(now)); err != nil {
			return fmt.Errorf("create queue %q: %w", name, err)
		}
	}
	return nil
}

// GetJob finds a job by id, then by name in the namespace.
func (s *Store) GetJob(ctx context.Context, p *store.GetJobParams) (*model.Job, error) {
	j, err := scanJob(s.rs.jobByID.QueryRowContext(ctx, p.IDOrName))
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

// jobCursor is ListJobs' opaque cursor: the last job's name and namespace.
func encodeJobCursor(name, namespace string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(name + "\x00" + namespace))
}

func decodeJobCursor(c string) (name, namespace string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", fmt.Errorf("bad cursor: %w", err)
	}
	name, namespace, ok := strings.Cut(string(b), "\x00")
	if !ok {
		return "", "", errors.New("bad cursor")
	}
	return name, namespace, nil
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
	if p.Queue != "" {
		where = append(where, "queue = ?")
		args = append(args, p.Queue)
	}
	if p.Enabled != nil {
		where = append(where, "enabled = ?")
		args = append(args, boolInt(*p.Enabled))
	}
	if p.Cursor != "" {
		name, ns, err := decodeJobCursor(p.Cursor)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
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
	spec, err := json.Marshal(p.Spec)
	if err != nil {
		return nil, fmt.Errorf("update job %s: encode spec: %w", p.ID, err)
	}
	var j *model.Job
	err = s.write(ctx, func(t *wtx) error {
		var oldHandler string
		if err := t.tx.QueryRowContext(ctx, `SELECT handler FROM jobs WHERE id = ?`, p.ID).Scan(&oldHandler); err != nil {
			return mapErr(err)
		}
		row := t.tx.QueryRowContext(ctx, `UPDATE jobs SET spec = ?, queue = ?, handler = ?, req_cpu = ?, req_memory_mb = ?,
			req_gpu = ?, enabled = ?, next_fire_at = ?, updated_at = ? WHERE id = ? RETURNING `+jobCols,
			spec, p.Spec.Queue, p.Spec.Handler, p.Spec.Requirements.CPU, p.Spec.Requirements.MemoryMB, p.Spec.Requirements.GPU,
			boolInt(p.Enabled), nullMicros(p.NextFireAt), micros(p.Now), p.ID)
		if j, err = scanJob(row); err != nil {
			return mapErr(err)
		}
		if oldHandler != p.Spec.Handler {
			// Runs not yet leased follow the job's kind, so that lease filters match the
			// spec the lease will carry.
			if _, err := t.tx.ExecContext(ctx, `UPDATE runs SET handler = ? WHERE job_id = ? AND status IN `+statusPending,
				p.Spec.Handler, p.ID); err != nil {
				return fmt.Errorf("update runs' kind: %w", err)
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
		res, err := t.stmt(t.ws.deleteJob).ExecContext(ctx, p.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return model.ErrNotFound
		}
		out, err = t.cancelJobRuns(p.ID, "job deleted", p.Now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete job %s: %w", p.ID, err)
	}
	return out, nil
}
