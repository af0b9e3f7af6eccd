package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/specjson/modelspec"
	"github.com/stint-dev/stint/internal/store"
)

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

const runCols = `id, job_id, job_name, namespace, status, pending_code, pending_reason, queue, priority,
	trigger_kind, args, scheduled_for, created_at, started_at, finished_at, attempt, max_attempts,
	idempotency_key, cancel_requested, error, worker_id, lease_token, lease_expires_at, attempt_started_at,
	req_cpu, req_memory_mb, req_gpu, req_labels, has_dependants, deps_pending, disruptions, instant`

// runRow is a scanned runs row: the run as the model sees it, plus the raw lease columns
// that an ended attempt is written from.
type runRow struct {
	run *model.Run
	// worker, attemptStarted: the current (or last) attempt's, whatever the status.
	worker         string
	attemptStarted int64
	jobID          string
	spec           []byte // the job's spec, when the query returns it (leases)
	depsPending    int    // unmet dependencies, which the words of a dependency wait follow
}

func scanRun(sc scanner, extra ...any) (runRow, error) {
	var (
		r                                     model.Run
		status, pending, trigger              string
		args                                  []byte
		sched, created                        int64
		started, finished, leaseExp, attStart sql.NullInt64
		instant                               sql.NullInt64
		idem, worker, token                   sql.NullString
		cancel                                int
		labels                                string
		hasDeps, depsPending                  int
	)
	dest := []any{&r.ID, &r.JobID, &r.JobName, &r.Namespace, &status, &pending, &r.PendingReason, &r.Queue, &r.Priority,
		&trigger, &args, &sched, &created, &started, &finished, &r.Attempt, &r.MaxAttempts,
		&idem, &cancel, &r.Error, &worker, &token, &leaseExp, &attStart,
		&r.Requirements.CPU, &r.Requirements.MemoryMB, &r.Requirements.GPU, &labels, &hasDeps, &depsPending, &r.Disruptions, &instant}
	err := sc.Scan(append(dest, extra...)...)
	if err != nil {
		return runRow{}, err
	}
	if r.Requirements.Labels, err = store.LabelsFromColumn(labels); err != nil {
		return runRow{}, fmt.Errorf("run %s: %w", r.ID, err)
	}
	r.HasDependants = hasDeps != 0
	r.Status = model.RunStatus(status)
	r.PendingCode = model.PendingCode(pending)
	if r.PendingCode == model.PendingDependencies {
		// The words follow the unmet count, which the dependency statements keep.
		r.PendingReason = scheduler.WaitingReason(depsPending)
	}
	r.Trigger = model.Trigger(trigger)
	if len(args) > 0 {
		r.Args = json.RawMessage(args)
	}
	r.ScheduledFor = fromMicros(sched)
	r.Instant = fromNullMicros(instant)
	r.CreatedAt = fromMicros(created)
	r.StartedAt = fromNullMicros(started)
	r.FinishedAt = fromNullMicros(finished)
	r.IdempotencyKey = idem.String
	r.CancelRequested = cancel != 0
	if r.Status == model.RunRunning {
		r.WorkerID = worker.String
		r.LeaseToken = token.String
		r.LeaseExpiresAt = fromNullMicros(leaseExp)
	}
	return runRow{run: &r, worker: worker.String, attemptStarted: attStart.Int64, jobID: r.JobID, depsPending: depsPending}, nil
}

// scanLeased reads the rows of a lease statement: runs followed by their job's spec.
func scanLeased(rows *sql.Rows, err error) ([]runRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []runRow
	for rows.Next() {
		var spec []byte
		rr, err := scanRun(rows, &spec)
		if err != nil {
			return nil, err
		}
		rr.spec = spec
		out = append(out, rr)
	}
	return out, rows.Err()
}

// scanRuns reads every row of rows as a run and closes rows.
func scanRuns(rows *sql.Rows, err error) ([]runRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []runRow
	for rows.Next() {
		rr, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rr)
	}
	return out, rows.Err()
}

func runsOf(rows []runRow) []*model.Run {
	out := make([]*model.Run, len(rows))
	for i, r := range rows {
		out[i] = r.run
	}
	return out
}

const jobCols = `id, namespace, name, spec, enabled, next_fire_at, idempotency_key, request_hash, created_at, updated_at`

// encodeSpec is the stored form of a job spec: json.Marshal's bytes, written without
// reflection. It fails where json.Marshal fails: on Args that is not valid JSON, or a NaN or
// infinite float.
func encodeSpec(spec *model.JobSpec) ([]byte, error) {
	return modelspec.Marshal(spec)
}

func scanJob(sc scanner) (*model.Job, error) {
	var (
		j                model.Job
		spec             []byte
		enabled          int
		next             sql.NullInt64
		idem             sql.NullString
		created, updated int64
	)
	if err := sc.Scan(&j.ID, &j.Namespace, &j.Name, &spec, &enabled, &next, &idem, &j.RequestHash, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(spec, &j.Spec); err != nil {
		return nil, fmt.Errorf("decode spec of job %s: %w", j.ID, err)
	}
	j.Enabled = enabled != 0
	j.NextFireAt = fromNullMicros(next)
	j.IdempotencyKey = idem.String
	j.CreatedAt = fromMicros(created)
	j.UpdatedAt = fromMicros(updated)
	return &j, nil
}

const queueCols = `name, priority, max_concurrency, paused, created_at, updated_at, rate, rate_per_us, alerts`

func scanQueue(sc scanner) (*model.Queue, error) {
	var (
		q                model.Queue
		paused           int
		created, updated int64
		rate             int
		per              int64
		alerts           []byte
		err              error
	)
	if err := sc.Scan(&q.Name, &q.Priority, &q.MaxConcurrency, &paused, &created, &updated, &rate, &per, &alerts); err != nil {
		return nil, err
	}
	if q.Alerts, err = store.DecodeQueueAlerts(alerts); err != nil {
		return nil, fmt.Errorf("queue %s: %w", q.Name, err)
	}
	q.RateLimit = store.RateFromColumns(rate, per)
	q.Paused = paused != 0
	q.CreatedAt = fromMicros(created)
	q.UpdatedAt = fromMicros(updated)
	return &q, nil
}

const workerCols = `id, session, labels, cap_cpu, cap_memory_mb, cap_gpu, cap_slots, state, registered_at, last_heartbeat, handlers, commands`

func scanWorker(sc scanner) (*model.Worker, error) {
	var (
		w          model.Worker
		labels     []byte
		handlers   []byte
		state      string
		reg, heart int64
	)
	if err := sc.Scan(&w.ID, &w.Session, &labels, &w.Capacity.CPU, &w.Capacity.MemoryMB, &w.Capacity.GPU, &w.Capacity.Slots, &state, &reg, &heart, &handlers, &w.Commands); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(labels, &w.Labels); err != nil {
		return nil, fmt.Errorf("decode labels of worker %s: %w", w.ID, err)
	}
	if err := json.Unmarshal(handlers, &w.Handlers); err != nil {
		return nil, fmt.Errorf("decode handlers of worker %s: %w", w.ID, err)
	}
	if len(w.Handlers) == 0 {
		w.Handlers = nil
	}
	w.State = model.WorkerState(state)
	w.RegisteredAt = fromMicros(reg)
	w.LastHeartbeat = fromMicros(heart)
	return &w, nil
}
