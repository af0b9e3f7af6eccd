package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// AlertFacts reads what the alert rules decide on; see store.Store.
func (s *Store) AlertFacts(ctx context.Context, p *store.AlertFactsParams) (*alerting.Facts, error) {
	var f alerting.Facts
	var err error
	if f.Streaks, err = s.alertStreaks(ctx, p); err != nil {
		return nil, fmt.Errorf("alert facts: %w", err)
	}
	if p.SkipScans {
		f.ScansUnread = true
	} else {
		if f.Cron, err = s.alertCron(ctx, p); err != nil {
			return nil, fmt.Errorf("alert facts: %w", err)
		}
		if f.Queues, err = s.alertQueues(ctx); err != nil {
			return nil, fmt.Errorf("alert facts: %w", err)
		}
		if f.Running, err = s.alertRunning(ctx, p); err != nil {
			return nil, fmt.Errorf("alert facts: %w", err)
		}
	}
	if f.Workers, err = s.alertWorkers(ctx); err != nil {
		return nil, fmt.Errorf("alert facts: %w", err)
	}
	return &f, nil
}

// alertStreaks reads the latest ended runs of the jobs with a run failed after
// FailedAfter (index runs_failed_at) and of StreakJobs (index runs_job).
func (s *Store) alertStreaks(ctx context.Context, p *store.AlertFactsParams) ([]alerting.Streak, error) {
	ids, err := queryStrings(ctx, s.r, `SELECT DISTINCT job_id FROM runs INDEXED BY runs_failed_at
		WHERE status = 'failed' AND finished_at > ?`, micros(p.FailedAfter))
	if err != nil {
		return nil, fmt.Errorf("failed jobs: %w", err)
	}
	seen := map[string]bool{}
	var out []alerting.Streak
	for _, id := range append(ids, p.StreakJobs...) {
		if seen[id] {
			continue
		}
		seen[id] = true
		var ns, name string
		var spec []byte
		err := s.r.QueryRowContext(ctx, `SELECT namespace, name, spec FROM jobs WHERE id = ?1
			UNION ALL SELECT namespace, job_name, spec FROM runs INDEXED BY runs_job WHERE job_id = ?1 AND spec IS NOT NULL
			LIMIT 1`, id).Scan(&ns, &name, &spec)
		if err == sql.ErrNoRows {
			out = append(out, alerting.Streak{Job: alerting.Job{ID: id}, Recent: nil}) // deleted: clears
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
		j, err := store.AlertJob(id, ns, name, spec)
		if err != nil {
			return nil, err
		}
		statuses, err := queryStrings(ctx, s.r, `SELECT status FROM runs INDEXED BY runs_job
			WHERE job_id = ? AND status IN ('succeeded', 'failed') ORDER BY id DESC LIMIT ?`, id, p.Streak)
		if err != nil {
			return nil, fmt.Errorf("runs of job %s: %w", id, err)
		}
		st := alerting.Streak{Job: j}
		for _, v := range statuses {
			st.Recent = append(st.Recent, model.RunStatus(v))
		}
		out = append(out, st)
	}
	return out, nil
}

// alertCronSQL reads every enabled cron job (index jobs_next_fire) with its CronLatest
// latest cron runs whose instant is at or before ?1 (index runs_cron_instant, ?2 of them),
// newest first: one statement, where a query per job made a pass over 10,000 cron jobs
// cost 10,000 round trips through the driver (a quarter of a second of CPU).
const alertCronSQL = `SELECT j.id, j.namespace, j.name, j.spec, j.next_fire_at,
		r.id, r.instant, r.status, r.pending_code, r.pending_reason, r.error, r.queue, r.started_at
	FROM jobs j INDEXED BY jobs_next_fire
	LEFT JOIN runs r ON r.rowid IN (
		SELECT c.rowid FROM runs c INDEXED BY runs_cron_instant
		WHERE c.job_id = j.id AND c.trigger_kind = 'cron' AND c.instant <= ?1
		ORDER BY c.instant DESC LIMIT ?2)
	WHERE j.next_fire_at IS NOT NULL AND j.enabled = 1
	ORDER BY j.id, r.instant DESC`

// alertCron reads the cron jobs with their latest cron runs (alertCronSQL).
func (s *Store) alertCron(ctx context.Context, p *store.AlertFactsParams) ([]alerting.CronJob, error) {
	rows, err := s.r.QueryContext(ctx, alertCronSQL, micros(p.Now), store.CronLatest)
	if err != nil {
		return nil, fmt.Errorf("cron jobs: %w", err)
	}
	defer rows.Close()
	var out []alerting.CronJob
	for rows.Next() {
		var (
			id, ns, name                         string
			spec                                 []byte
			next                                 int64
			runID, status, code, reason, errText sql.NullString
			queue                                sql.NullString
			instant, started                     sql.NullInt64
		)
		if err := rows.Scan(&id, &ns, &name, &spec, &next, &runID, &instant, &status, &code, &reason, &errText, &queue, &started); err != nil {
			return nil, fmt.Errorf("cron jobs: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].Job.ID != id {
			j, err := store.AlertJob(id, ns, name, spec)
			if err != nil {
				return nil, err
			}
			at := fromMicros(next)
			out = append(out, alerting.CronJob{Job: j, NextFireAt: &at})
		}
		if !runID.Valid {
			continue
		}
		r := alerting.CronRun{ID: runID.String, Instant: fromMicros(instant.Int64), Status: model.RunStatus(status.String),
			PendingCode: model.PendingCode(code.String), Reason: reason.String, Queue: queue.String, StartedAt: fromNullMicros(started)}
		if r.Status.Final() {
			r.Reason = errText.String
		}
		c := &out[len(out)-1]
		c.Latest = append(c.Latest, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cron jobs: %w", err)
	}
	return out, nil
}

// alertQueues reads every queue with its queued runs (index runs_queued).
func (s *Store) alertQueues(ctx context.Context) ([]alerting.Queue, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT q.name, q.paused, q.alerts, count(r.id), min(r.scheduled_for)
		FROM queues q LEFT JOIN runs r INDEXED BY runs_queued ON r.queue = q.name AND r.status = 'queued'
		GROUP BY q.name ORDER BY q.name`)
	if err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	defer rows.Close()
	var out []alerting.Queue
	for rows.Next() {
		var q alerting.Queue
		var paused int
		var alerts []byte
		var oldest sql.NullInt64
		if err := rows.Scan(&q.Name, &paused, &alerts, &q.Queued, &oldest); err != nil {
			return nil, fmt.Errorf("queues: %w", err)
		}
		q.Paused, q.OldestQueued = paused != 0, fromNullMicros(oldest)
		if q.Alerts, err = store.DecodeQueueAlerts(alerts); err != nil {
			return nil, fmt.Errorf("queue %s: %w", q.Name, err)
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	return out, nil
}

// alertWorkers reads every worker's state.
func (s *Store) alertWorkers(ctx context.Context) ([]alerting.Worker, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, state, last_heartbeat FROM workers ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	defer rows.Close()
	var out []alerting.Worker
	for rows.Next() {
		var w alerting.Worker
		var state string
		var heart int64
		if err := rows.Scan(&w.ID, &state, &heart); err != nil {
			return nil, fmt.Errorf("workers: %w", err)
		}
		w.State, w.LastHeartbeat = model.WorkerState(state), fromMicros(heart)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	return out, nil
}

// alertRunning reads the running runs whose attempt started at or before RunningBefore.
func (s *Store) alertRunning(ctx context.Context, p *store.AlertFactsParams) ([]alerting.Running, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT r.id, r.attempt_started_at, r.job_id,
			coalesce(j.namespace, r.namespace), coalesce(j.name, r.job_name), coalesce(r.spec, j.spec)
		FROM runs r INDEXED BY runs_running LEFT JOIN jobs j ON j.id = r.job_id
		WHERE r.status = 'running' AND r.attempt_started_at <= ? AND (r.spec IS NOT NULL OR j.id IS NOT NULL)
		ORDER BY r.id`, micros(p.RunningBefore))
	if err != nil {
		return nil, fmt.Errorf("running runs: %w", err)
	}
	defer rows.Close()
	var out []alerting.Running
	for rows.Next() {
		var r alerting.Running
		var started int64
		var id, ns, name string
		var spec []byte
		if err := rows.Scan(&r.ID, &started, &id, &ns, &name, &spec); err != nil {
			return nil, fmt.Errorf("running runs: %w", err)
		}
		if r.Job, err = store.AlertJob(id, ns, name, spec); err != nil {
			return nil, err
		}
		r.AttemptStarted = fromMicros(started)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("running runs: %w", err)
	}
	return out, nil
}

// queryStrings runs a query of one text column.
func queryStrings(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

const alertCols = `id, rule, subject, state, summary, link, started_at, resolved_at, clear_since`

// ApplyAlerts writes what alerting.Evaluate decided, in one transaction.
func (s *Store) ApplyAlerts(ctx context.Context, p *store.ApplyAlertsParams) error {
	err := s.write(ctx, func(t *wtx) error {
		for _, a := range p.Fire {
			if _, err := t.tx.ExecContext(t.ctx, `INSERT INTO alerts (`+alertCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				a.ID, string(a.Rule), a.Subject, string(alerting.Firing), a.Summary, a.Link, micros(a.StartedAt), nil,
				nullMicros(a.ClearSince)); err != nil {
				return fmt.Errorf("fire %s %s: %w", a.Rule, a.Subject, mapErr(err))
			}
		}
		for _, a := range p.Resolve {
			if _, err := t.tx.ExecContext(t.ctx, `UPDATE alerts SET state = 'resolved', resolved_at = ?, clear_since = ?
				WHERE id = ? AND state = 'firing'`, nullMicros(a.ResolvedAt), nullMicros(a.ClearSince), a.ID); err != nil {
				return fmt.Errorf("resolve %s: %w", a.ID, err)
			}
		}
		for _, a := range p.Update {
			if _, err := t.tx.ExecContext(t.ctx, `UPDATE alerts SET clear_since = ?, summary = ? WHERE id = ? AND state = 'firing'`,
				nullMicros(a.ClearSince), a.Summary, a.ID); err != nil {
				return fmt.Errorf("update %s: %w", a.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("apply alerts: %w", err)
	}
	return nil
}

// ListAlerts lists alerts newest first.
func (s *Store) ListAlerts(ctx context.Context, p *store.ListAlertsParams) ([]alerting.Alert, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+alertCols+` FROM alerts
		WHERE (?1 = '' OR state = ?1) AND (?2 = '' OR id < ?2) ORDER BY id DESC LIMIT ?3`, string(p.State), p.Before, limit)
	if err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	defer rows.Close()
	var out []alerting.Alert
	for rows.Next() {
		var a alerting.Alert
		var rule, state string
		var started int64
		var resolved, clear sql.NullInt64
		if err := rows.Scan(&a.ID, &rule, &a.Subject, &state, &a.Summary, &a.Link, &started, &resolved, &clear); err != nil {
			return nil, fmt.Errorf("list alerts: %w", err)
		}
		a.Rule, a.State, a.StartedAt = alerting.Rule(rule), alerting.State(state), fromMicros(started)
		a.ResolvedAt, a.ClearSince = fromNullMicros(resolved), fromNullMicros(clear)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	return out, nil
}

const auditCols = `id, at, actor, role, action, target, before, after`

// AppendAudit adds entries to the audit log in one transaction.
func (s *Store) AppendAudit(ctx context.Context, p *store.AppendAuditParams) error {
	err := s.write(ctx, func(t *wtx) error {
		st, err := t.tx.PrepareContext(t.ctx, `INSERT INTO audit_log (`+auditCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, e := range p.Entries {
			if _, err := st.ExecContext(t.ctx, e.ID, micros(e.At), e.Actor, string(e.Role), e.Action, e.Target,
				nullJSON(e.Before), nullJSON(e.After)); err != nil {
				return fmt.Errorf("%s %s: %w", e.Action, e.Target, mapErr(err))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// nullJSON is a JSON column's value: NULL for none.
func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// ListAudit lists audit entries newest first.
func (s *Store) ListAudit(ctx context.Context, p *store.ListAuditParams) ([]*model.AuditEntry, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+auditCols+` FROM audit_log
		WHERE (?1 = '' OR target = ?1) AND (?2 = '' OR actor = ?2) AND (?3 = '' OR id < ?3)
		ORDER BY id DESC LIMIT ?4`, p.Target, p.Actor, p.Before, limit)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []*model.AuditEntry
	for rows.Next() {
		var e model.AuditEntry
		var at int64
		var role string
		var before, after []byte
		if err := rows.Scan(&e.ID, &at, &e.Actor, &role, &e.Action, &e.Target, &before, &after); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		e.At, e.Role = fromMicros(at), model.Role(role)
		if len(before) > 0 {
			e.Before = before
		}
		if len(after) > 0 {
			e.After = after
		}
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}
