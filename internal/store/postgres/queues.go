package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

const queueCols = `name, priority, max_concurrency, paused, created_at, updated_at, rate, rate_per_us, alerts`

func scanQueue(row pgx.Row) (*model.Queue, error) {
	var (
		q      model.Queue
		rate   int
		per    int64
		alerts []byte
		err    error
	)
	if err := row.Scan(&q.Name, &q.Priority, &q.MaxConcurrency, &q.Paused, &q.CreatedAt, &q.UpdatedAt, &rate, &per, &alerts); err != nil {
		return nil, err
	}
	if q.Alerts, err = store.DecodeQueueAlerts(alerts); err != nil {
		return nil, fmt.Errorf("queue %s: %w", q.Name, err)
	}
	q.RateLimit = store.RateFromColumns(rate, per)
	q.CreatedAt, q.UpdatedAt = q.CreatedAt.UTC(), q.UpdatedAt.UTC()
	q.Depth = map[model.RunStatus]int{model.RunWaiting: 0, model.RunScheduled: 0, model.RunQueued: 0, model.RunRunning: 0}
	return &q, nil
}

// depthSQL counts active runs by queue and status, each state through its own partial
// index; %s is empty (every queue) or a condition on queue $1.
const depthSQL = `SELECT queue, 'queued', count(*) FROM runs WHERE status = 'queued'%[1]s GROUP BY queue
	UNION ALL
	SELECT queue, 'running', count(*) FROM runs WHERE status = 'running'%[1]s GROUP BY queue
	UNION ALL
	SELECT queue, 'scheduled', count(*) FROM runs WHERE status = 'scheduled'%[1]s GROUP BY queue
	UNION ALL
	SELECT queue, 'waiting', count(*) FROM runs WHERE status = 'waiting'%[1]s GROUP BY queue`

var (
	depthAllSQL = fmt.Sprintf(depthSQL, "")
	depthOneSQL = fmt.Sprintf(depthSQL, " AND queue = $1")
)

// fillDepth reads the depth counts of a depthSQL query into queues.
func fillDepth(br pgx.BatchResults, byName map[string]*model.Queue) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	return fillDepthRows(rows, byName)
}

// fillDepthRows reads the rows of a depthSQL query into queues.
func fillDepthRows(rows pgx.Rows, byName map[string]*model.Queue) error {
	defer rows.Close()
	for rows.Next() {
		var (
			queue, status string
			n             int
		)
		if err := rows.Scan(&queue, &status, &n); err != nil {
			return err
		}
		if q := byName[queue]; q != nil {
			q.Depth[model.RunStatus(status)] = n
		}
	}
	return rows.Err()
}

// ListQueues returns every queue by name, with the depth of its active states.
func (s *Store) ListQueues(ctx context.Context) ([]*model.Queue, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT ` + queueCols + ` FROM queues ORDER BY name`)
	b.Queue(depthAllSQL)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, translate(err, "list queues")
	}
	qs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*model.Queue, error) { return scanQueue(row) })
	if err != nil {
		return nil, translate(err, "list queues")
	}
	byName := make(map[string]*model.Queue, len(qs))
	for _, q := range qs {
		byName[q.Name] = q
	}
	if err := fillDepth(br, byName); err != nil {
		return nil, translate(err, "list queues: depth")
	}
	if qs == nil {
		qs = []*model.Queue{}
	}
	return qs, nil
}

// GetQueue returns one queue with its depth.
func (s *Store) GetQueue(ctx context.Context, p *store.GetQueueParams) (*model.Queue, error) {
	return s.queueWithDepth(ctx, `SELECT `+queueCols+` FROM queues WHERE name = $1`, p.Name)
}

// UpdateQueue changes the set fields of a queue, creating it if missing.
func (s *Store) UpdateQueue(ctx context.Context, p *store.UpdateQueueParams) (*model.Queue, error) {
	committed := p.Committed
	var rate *int
	var per *int64
	if p.RateLimit != nil {
		r, d := store.RateColumns(p.RateLimit)
		rate, per = &r, &d
	}
	setAlerts, alerts, err := store.QueueAlertsColumn(p.Alerts)
	if err != nil {
		return nil, fmt.Errorf("update queue %s: %w", p.Name, err)
	}
	var alertsArg *string
	if alerts != nil {
		v := string(alerts)
		alertsArg = &v
	}
	q, err := s.queueThenDepth(ctx, committed, `INSERT INTO queues AS q (`+queueCols+`)
		VALUES ($1, coalesce($2::int4, 0), coalesce($3::int4, 0), coalesce($4::boolean, false), $5, $5,
			coalesce($6::int4, 0), coalesce($7::int8, 0), $9::jsonb)
		ON CONFLICT (name) DO UPDATE SET
			priority = coalesce($2::int4, q.priority),
			max_concurrency = coalesce($3::int4, q.max_concurrency),
			paused = coalesce($4::boolean, q.paused),
			updated_at = $5,
			rate = coalesce($6::int4, q.rate),
			rate_per_us = coalesce($7::int8, q.rate_per_us),
			alerts = CASE WHEN $8::boolean THEN $9::jsonb ELSE q.alerts END
		RETURNING `+queueCols, p.Name, p.Priority, p.MaxConcurrency, p.Paused, utc(p.Now), rate, per, setAlerts, alertsArg)
	if err != nil {
		return nil, err
	}
	s.knowQueues(p.Name)
	return q, nil
}

// queueThenDepth runs sql (which returns one queue row; its $1 is the queue name) in a
// transaction of its own, calls committed (when not nil), then counts the queue's depth.
func (s *Store) queueThenDepth(ctx context.Context, committed func(), sql string, args ...any) (*model.Queue, error) {
	name := args[0].(string)
	q, err := scanQueue(s.pool.QueryRow(ctx, sql, args...))
	if err != nil {
		return nil, translate(err, "queue %s", name)
	}
	if committed != nil {
		committed()
	}
	rows, err := s.pool.Query(ctx, depthOneSQL, name)
	if err != nil {
		return nil, translate(err, "queue %s: depth", name)
	}
	if err := fillDepthRows(rows, map[string]*model.Queue{name: q}); err != nil {
		return nil, translate(err, "queue %s: depth", name)
	}
	return q, nil
}

// queueWithDepth runs sql (which returns one queue row; its $1 is the queue name) and the
// depth count of that queue in one round trip.
func (s *Store) queueWithDepth(ctx context.Context, sql string, args ...any) (*model.Queue, error) {
	name := args[0].(string)
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue(depthOneSQL, name)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	q, err := scanQueue(br.QueryRow())
	if err != nil {
		return nil, translate(err, "queue %s", name)
	}
	if err := fillDepth(br, map[string]*model.Queue{name: q}); err != nil {
		return nil, translate(err, "queue %s: depth", name)
	}
	return q, nil
}

// oldestQueuedSQL finds each queue's earliest queued run with one probe of runs_queued
// (queue, priority DESC, scheduled_for, id) per priority its queued runs have: the first
// entry of a priority is its earliest, and the next probe starts below that priority. The
// cost is queues times distinct priorities, whatever the backlog.
const oldestQueuedSQL = `WITH RECURSIVE g AS (
		SELECT q.name AS queue, f.priority, f.scheduled_for FROM queues q
		CROSS JOIN LATERAL (SELECT r.priority, r.scheduled_for FROM runs r
			WHERE r.status = 'queued' AND r.queue = q.name
			ORDER BY r.priority DESC, r.scheduled_for LIMIT 1) f
		UNION ALL
		SELECT g.queue, n.priority, n.scheduled_for FROM g
		CROSS JOIN LATERAL (SELECT r.priority, r.scheduled_for FROM runs r
			WHERE r.status = 'queued' AND r.queue = g.queue AND r.priority < g.priority
			ORDER BY r.priority DESC, r.scheduled_for LIMIT 1) n
	)
	SELECT queue, min(scheduled_for) FROM g GROUP BY queue`

// OldestQueued returns the earliest ScheduledFor of each queue's queued runs.
func (s *Store) OldestQueued(ctx context.Context) (map[string]time.Time, error) {
	rows, err := s.pool.Query(ctx, oldestQueuedSQL)
	if err != nil {
		return nil, translate(err, "oldest queued")
	}
	defer rows.Close()
	out := make(map[string]time.Time)
	for rows.Next() {
		var (
			name   string
			oldest time.Time
		)
		if err := rows.Scan(&name, &oldest); err != nil {
			return nil, translate(err, "oldest queued")
		}
		out[name] = oldest.UTC()
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err, "oldest queued")
	}
	return out, nil
}
