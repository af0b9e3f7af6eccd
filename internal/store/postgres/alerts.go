package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// alertListLimit is the page of ListAlerts and ListAudit when none is asked for.
const alertListLimit = 100

// AlertFacts reads what the alert rules decide on; see store.Store. Each part is one
// statement: the streaks and the latest cron runs per job through LATERAL joins on the
// runs_job and runs_cron_instant indexes.
func (s *Store) AlertFacts(ctx context.Context, p *store.AlertFactsParams) (*alerting.Facts, error) {
	var f alerting.Facts
	var err error
	if f.Streaks, err = s.alertStreaks(ctx, p); err != nil {
		return nil, translate(err, "alert facts: streaks")
	}
	if p.SkipScans {
		f.ScansUnread = true
	} else {
		if f.Cron, err = s.alertCron(ctx, p); err != nil {
			return nil, translate(err, "alert facts: cron")
		}
		if f.Queues, err = s.alertQueues(ctx); err != nil {
			return nil, translate(err, "alert facts: queues")
		}
		if f.Running, err = s.alertRunning(ctx, p); err != nil {
			return nil, translate(err, "alert facts: running")
		}
	}
	if f.Workers, err = s.alertWorkers(ctx); err != nil {
		return nil, translate(err, "alert facts: workers")
	}
	return &f, nil
}

func (s *Store) alertStreaks(ctx context.Context, p *store.AlertFactsParams) ([]alerting.Streak, error) {
	rows, err := s.pool.Query(ctx, `WITH ids AS (
			SELECT DISTINCT job_id AS id FROM runs WHERE status = 'failed' AND finished_at > $1
			UNION SELECT unnest($2::text[]))
		SELECT ids.id, coalesce(j.namespace, a.namespace), coalesce(j.name, a.job_name), coalesce(j.spec, a.spec),
			coalesce((SELECT array_agg(st ORDER BY rid DESC) FROM (SELECT r.id AS rid, r.status AS st FROM runs r
				WHERE r.job_id = ids.id AND r.status IN ('succeeded', 'failed') ORDER BY r.id DESC LIMIT $3) last), '{}')
		FROM ids LEFT JOIN jobs j ON j.id = ids.id
		LEFT JOIN LATERAL (SELECT r.namespace, r.job_name, r.spec FROM runs r
			WHERE j.id IS NULL AND r.job_id = ids.id AND r.spec IS NOT NULL LIMIT 1) a ON true
		ORDER BY ids.id`, utc(p.FailedAfter), orEmptyStrings(p.StreakJobs), p.Streak)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []alerting.Streak
	for rows.Next() {
		var id string
		var ns, name *string
		var spec []byte
		var statuses []string
		if err := rows.Scan(&id, &ns, &name, &spec, &statuses); err != nil {
			return nil, err
		}
		st := alerting.Streak{Job: alerting.Job{ID: id}}
		if ns != nil { // a deleted job has no streak: its alert clears
			if st.Job, err = store.AlertJob(id, *ns, *name, spec); err != nil {
				return nil, err
			}
			for _, v := range statuses {
				st.Recent = append(st.Recent, model.RunStatus(v))
			}
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

func (s *Store) alertCron(ctx context.Context, p *store.AlertFactsParams) ([]alerting.CronJob, error) {
	rows, err := s.pool.Query(ctx, `SELECT j.id, j.namespace, j.name, j.spec, j.next_fire_at,
			r.id, coalesce(r.instant, r.scheduled_for), r.status, r.pending_code, r.pending_reason, r.error, r.queue, r.started_at
		FROM jobs j LEFT JOIN LATERAL (SELECT * FROM runs r WHERE r.job_id = j.id AND r.trigger_kind = 'cron'
				AND coalesce(r.instant, r.scheduled_for) <= $1
				ORDER BY coalesce(r.instant, r.scheduled_for) DESC LIMIT $2) r ON true
		WHERE j.next_fire_at IS NOT NULL AND j.enabled
		ORDER BY j.id, coalesce(r.instant, r.scheduled_for) DESC`, utc(p.Now), store.CronLatest)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []alerting.CronJob
	for rows.Next() {
		var id, ns, name string
		var spec []byte
		var next time.Time
		var runID, status, code, reason, errText, queue *string
		var instant, started *time.Time
		if err := rows.Scan(&id, &ns, &name, &spec, &next, &runID, &instant, &status, &code, &reason, &errText, &queue, &started); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].Job.ID != id {
			j, err := store.AlertJob(id, ns, name, spec)
			if err != nil {
				return nil, err
			}
			next = next.UTC()
			out = append(out, alerting.CronJob{Job: j, NextFireAt: &next})
		}
		if runID == nil {
			continue
		}
		r := alerting.CronRun{ID: *runID, Instant: instant.UTC(), Status: model.RunStatus(*status),
			PendingCode: model.PendingCode(*code), Reason: *reason, Queue: *queue, StartedAt: utcPtr(started)}
		if r.Status.Final() {
			r.Reason = *errText
		}
		out[len(out)-1].Latest = append(out[len(out)-1].Latest, r)
	}
	return out, rows.Err()
}

func (s *Store) alertQueues(ctx context.Context) ([]alerting.Queue, error) {
	rows, err := s.pool.Query(ctx, `SELECT q.name, q.paused, q.alerts, coalesce(r.n, 0), r.oldest
		FROM queues q LEFT JOIN (SELECT queue, count(*) AS n, min(scheduled_for) AS oldest FROM runs
			WHERE status = 'queued' GROUP BY queue) r ON r.queue = q.name
		ORDER BY q.name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []alerting.Queue
	for rows.Next() {
		var q alerting.Queue
		var alerts []byte
		if err := rows.Scan(&q.Name, &q.Paused, &alerts, &q.Queued, &q.OldestQueued); err != nil {
			return nil, err
		}
		q.OldestQueued = utcPtr(q.OldestQueued)
		if q.Alerts, err = store.DecodeQueueAlerts(alerts); err != nil {
			return nil, fmt.Errorf("queue %s: %w", q.Name, err)
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

func (s *Store) alertWorkers(ctx context.Context) ([]alerting.Worker, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, state, last_heartbeat FROM workers ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []alerting.Worker
	for rows.Next() {
		var w alerting.Worker
		var state string
		if err := rows.Scan(&w.ID, &state, &w.LastHeartbeat); err != nil {
			return nil, err
		}
		w.State, w.LastHeartbeat = model.WorkerState(state), w.LastHeartbeat.UTC()
		out = append(out, w)
	}
	return out, rows.Err()
}

func (s *Store) alertRunning(ctx context.Context, p *store.AlertFactsParams) ([]alerting.Running, error) {
	rows, err := s.pool.Query(ctx, `SELECT r.id, r.attempt_started_at, r.job_id,
			coalesce(j.namespace, r.namespace), coalesce(j.name, r.job_name), coalesce(r.spec, j.spec)
		FROM runs r LEFT JOIN jobs j ON j.id = r.job_id
		WHERE r.status = 'running' AND r.attempt_started_at <= $1 AND (r.spec IS NOT NULL OR j.id IS NOT NULL)
		ORDER BY r.id`, utc(p.RunningBefore))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []alerting.Running
	for rows.Next() {
		var r alerting.Running
		var id, ns, name string
		var spec []byte
		if err := rows.Scan(&r.ID, &r.AttemptStarted, &id, &ns, &name, &spec); err != nil {
			return nil, err
		}
		if r.Job, err = store.AlertJob(id, ns, name, spec); err != nil {
			return nil, err
		}
		r.AttemptStarted = r.AttemptStarted.UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

const alertCols = `id, rule, subject, state, summary, link, started_at, resolved_at, clear_since`

// ApplyAlerts writes what alerting.Evaluate decided, in one transaction.
func (s *Store) ApplyAlerts(ctx context.Context, p *store.ApplyAlertsParams) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for _, a := range p.Fire {
			if _, err := tx.Exec(ctx, `INSERT INTO alerts (`+alertCols+`) VALUES ($1, $2, $3, 'firing', $4, $5, $6, NULL, $7)`,
				a.ID, string(a.Rule), a.Subject, a.Summary, a.Link, utc(a.StartedAt), utcPtr(a.ClearSince)); err != nil {
				return err
			}
		}
		for _, a := range p.Resolve {
			if _, err := tx.Exec(ctx, `UPDATE alerts SET state = 'resolved', resolved_at = $2, clear_since = $3
				WHERE id = $1 AND state = 'firing'`, a.ID, utcPtr(a.ResolvedAt), utcPtr(a.ClearSince)); err != nil {
				return err
			}
		}
		for _, a := range p.Update {
			if _, err := tx.Exec(ctx, `UPDATE alerts SET clear_since = $2, summary = $3 WHERE id = $1 AND state = 'firing'`,
				a.ID, utcPtr(a.ClearSince), a.Summary); err != nil {
				return err
			}
		}
		return nil
	})
	return translate(err, "apply alerts")
}

// ListAlerts lists alerts newest first.
func (s *Store) ListAlerts(ctx context.Context, p *store.ListAlertsParams) ([]alerting.Alert, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = alertListLimit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+alertCols+` FROM alerts
		WHERE ($1 = '' OR state = $1) AND ($2 = '' OR id < $2) ORDER BY id DESC LIMIT $3`, string(p.State), p.Before, limit)
	if err != nil {
		return nil, translate(err, "list alerts")
	}
	defer rows.Close()
	var out []alerting.Alert
	for rows.Next() {
		var a alerting.Alert
		var rule, state string
		if err := rows.Scan(&a.ID, &rule, &a.Subject, &state, &a.Summary, &a.Link, &a.StartedAt, &a.ResolvedAt, &a.ClearSince); err != nil {
			return nil, translate(err, "list alerts")
		}
		a.Rule, a.State, a.StartedAt = alerting.Rule(rule), alerting.State(state), a.StartedAt.UTC()
		a.ResolvedAt, a.ClearSince = utcPtr(a.ResolvedAt), utcPtr(a.ClearSince)
		out = append(out, a)
	}
	return out, translate(rows.Err(), "list alerts")
}

const auditCols = `id, at, actor, role, action, target, before, after`

// appendAuditSQL inserts a batch of audit entries in one statement: a row per element of
// its arrays. Before, a statement per entry made each submission through the API cost the
// database a statement of its own (a fifth of the statements in the steady bench).
const appendAuditSQL = `INSERT INTO audit_log (` + auditCols + `)
	SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[],
		$6::text[], $7::jsonb[], $8::jsonb[])`

// AppendAudit adds entries to the audit log in one statement (its own transaction).
func (s *Store) AppendAudit(ctx context.Context, p *store.AppendAuditParams) error {
	n := len(p.Entries)
	if n == 0 {
		return nil
	}
	var (
		id, actor, role, action, target = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		at                              = make([]time.Time, n)
		before, after                   = make([]*string, n), make([]*string, n)
	)
	for i, e := range p.Entries {
		id[i], at[i], actor[i], role[i], action[i], target[i] = e.ID, utc(e.At), e.Actor, string(e.Role), e.Action, e.Target
		before[i], after[i] = jsonText(e.Before), jsonText(e.After)
	}
	err := s.retry(ctx, func() error {
		_, err := s.pool.Exec(ctx, appendAuditSQL, id, at, actor, role, action, target, before, after)
		return err
	})
	return translate(err, "append audit")
}

// jsonText is a jsonb array element's value: nil (NULL) for none.
func jsonText(b json.RawMessage) *string {
	if len(b) == 0 {
		return nil
	}
	t := string(b)
	return &t
}

// ListAudit lists audit entries newest first.
func (s *Store) ListAudit(ctx context.Context, p *store.ListAuditParams) ([]*model.AuditEntry, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = alertListLimit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+auditCols+` FROM audit_log
		WHERE ($1 = '' OR target = $1) AND ($2 = '' OR actor = $2) AND ($3 = '' OR id < $3)
		ORDER BY id DESC LIMIT $4`, p.Target, p.Actor, p.Before, limit)
	if err != nil {
		return nil, translate(err, "list audit")
	}
	defer rows.Close()
	var out []*model.AuditEntry
	for rows.Next() {
		var e model.AuditEntry
		var role string
		var before, after []byte
		if err := rows.Scan(&e.ID, &e.At, &e.Actor, &role, &e.Action, &e.Target, &before, &after); err != nil {
			return nil, translate(err, "list audit")
		}
		e.At, e.Role = e.At.UTC(), model.Role(role)
		if len(before) > 0 {
			e.Before = before
		}
		if len(after) > 0 {
			e.After = after
		}
		out = append(out, &e)
	}
	return out, translate(rows.Err(), "list audit")
}
