package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/specjson/modelspec"
)

// utc is the boundary form of a time: UTC, microsecond precision (what timestamptz keeps).
func utc(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := utc(*t)
	return &u
}

// nullString is s, or NULL when empty.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// compactJSON returns b without insignificant space (jsonb prints "a": 1 with a space), or
// nil when b is empty.
func compactJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return json.RawMessage(b)
	}
	return json.RawMessage(buf.Bytes())
}

// encodeSpec is the stored form of a job spec: json.Marshal's bytes, written without
// reflection. It fails where json.Marshal fails: on Args that is not valid JSON, or a NaN or
// infinite float.
func encodeSpec(spec *model.JobSpec) ([]byte, error) {
	b, err := modelspec.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode job spec: %w", err)
	}
	return b, nil
}

func decodeSpec(b []byte, spec *model.JobSpec) error {
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, spec); err != nil {
		return fmt.Errorf("decode job spec: %w", err)
	}
	spec.Args = compactJSON(spec.Args)
	return nil
}

// runSpec is the spec of run r's job: the run's own when it is anonymous (store.Anonymous),
// else its job row's; NULL once the job was deleted.
const runSpec = `coalesce(r.spec, (SELECT j.spec FROM jobs j WHERE j.id = r.job_id))`

// runHasJob tells whether run r's job exists: the run is anonymous or its job has a row.
const runHasJob = `(r.spec IS NOT NULL OR EXISTS (SELECT 1 FROM jobs j WHERE j.id = r.job_id))`

// jobCols are the columns scanJob reads, in order.
const jobCols = `id, namespace, name, spec, enabled, next_fire_at, coalesce(idempotency_key, ''),
	request_hash, created_at, updated_at`

func scanJob(row pgx.Row) (*model.Job, error) {
	var (
		j    model.Job
		spec []byte
	)
	if err := row.Scan(&j.ID, &j.Namespace, &j.Name, &spec, &j.Enabled, &j.NextFireAt,
		&j.IdempotencyKey, &j.RequestHash, &j.CreatedAt, &j.UpdatedAt); err != nil {
		return nil, err
	}
	if err := decodeSpec(spec, &j.Spec); err != nil {
		return nil, fmt.Errorf("job %s: %w", j.ID, err)
	}
	j.NextFireAt = utcPtr(j.NextFireAt)
	j.CreatedAt = j.CreatedAt.UTC()
	j.UpdatedAt = j.UpdatedAt.UTC()
	return &j, nil
}

// runRow is a run as stored: the model's fields plus what the row keeps of the running
// attempt.
type runRow struct {
	model.Run
	attemptStartedAt *time.Time
	depsPending      int32 // unmet dependencies, which the words of a dependency wait follow
}

// cronInstant is a cron run's instant as the store keys it (index runs_cron_instant, see
// migration 0011): its instant, or, for a run that a server of the release before 0011
// wrote during a rolling upgrade (it writes no instant), its scheduled_for, which is the
// instant until a retry moves it. cronInstantR is the same for a runs table aliased r.
// Statements write it as the index does, so that they can use the index.
const (
	cronInstant  = `coalesce(instant, scheduled_for)`
	cronInstantR = `coalesce(r.instant, r.scheduled_for)`
)

// runCols are the columns scanRun reads, in order, for a runs table aliased r.
const runCols = `r.id, r.job_id, r.job_name, r.namespace, r.status, r.pending_code, r.pending_reason,
	r.queue, r.priority, r.trigger_kind, r.args, r.scheduled_for, r.created_at, r.started_at,
	r.finished_at, r.attempt, r.max_attempts, coalesce(r.idempotency_key, ''), r.cancel_requested,
	r.error, coalesce(r.worker_id, ''), coalesce(r.lease_token, ''), r.lease_expires_at,
	r.attempt_started_at, r.req_cpu, r.req_memory_mb, r.req_gpu, r.req_labels, r.has_dependants, r.deps_pending,
	r.disruptions, CASE WHEN r.trigger_kind = 'cron' THEN ` + cronInstantR + ` END`

// runDest returns the scan destinations for runCols; call fixRun after the scan.
func runDest(r *runRow, status, pending, trigger *string, args *[]byte) []any {
	return []any{&r.ID, &r.JobID, &r.JobName, &r.Namespace, status, pending, &r.PendingReason,
		&r.Queue, &r.Priority, trigger, args, &r.ScheduledFor, &r.CreatedAt, &r.StartedAt,
		&r.FinishedAt, &r.Attempt, &r.MaxAttempts, &r.IdempotencyKey, &r.CancelRequested,
		&r.Error, &r.WorkerID, &r.LeaseToken, &r.LeaseExpiresAt, &r.attemptStartedAt,
		&r.Requirements.CPU, &r.Requirements.MemoryMB, &r.Requirements.GPU, &r.Requirements.Labels, &r.HasDependants, &r.depsPending,
		&r.Disruptions, &r.Instant}
}

func fixRun(r *runRow, status, pending, trigger string, args []byte) {
	r.Status = model.RunStatus(status)
	r.PendingCode = model.PendingCode(pending)
	if r.PendingCode == model.PendingDependencies {
		r.PendingReason = scheduler.WaitingReason(int(r.depsPending))
	}
	r.Trigger = model.Trigger(trigger)
	r.Args = compactJSON(args)
	r.ScheduledFor = r.ScheduledFor.UTC()
	r.CreatedAt = r.CreatedAt.UTC()
	r.StartedAt = utcPtr(r.StartedAt)
	r.FinishedAt = utcPtr(r.FinishedAt)
	r.Instant = utcPtr(r.Instant)
	r.LeaseExpiresAt = utcPtr(r.LeaseExpiresAt)
	r.attemptStartedAt = utcPtr(r.attemptStartedAt)
	if r.Status != model.RunRunning {
		// The lease columns keep the last attempt's values; they mean something only while
		// the run is running.
		r.WorkerID, r.LeaseToken, r.LeaseExpiresAt, r.attemptStartedAt = "", "", nil, nil
	}
}

func scanRun(row pgx.Row) (*runRow, error) {
	var (
		r                        runRow
		status, pending, trigger string
		args                     []byte
	)
	if err := row.Scan(runDest(&r, &status, &pending, &trigger, &args)...); err != nil {
		return nil, err
	}
	fixRun(&r, status, pending, trigger, args)
	return &r, nil
}

// collectRuns scans every row of rows with scanRun.
func collectRuns(rows pgx.Rows) ([]*runRow, error) {
	defer rows.Close()
	var out []*runRow
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// models returns the model runs of rows.
func models(rows []*runRow) []*model.Run {
	out := make([]*model.Run, len(rows))
	for i, r := range rows {
		out[i] = &r.Run
	}
	return out
}
