package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// ListQueues returns every queue by name with its depth.
func (s *Store) ListQueues(ctx context.Context) ([]*model.Queue, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+queueCols+` FROM queues ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	var out []*model.Queue
	for rows.Next() {
		q, err := scanQueue(rows)
		if err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("list queues: %w", err)
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		_ = rows.Close()
		return nil, fmt.Errorf("list queues: %w", err)
	}
	_ = rows.Close()
	for _, q := range out {
		if err := s.fillDepth(ctx, q); err != nil {
			return nil, fmt.Errorf("list queues: %w", err)
		}
	}
	return out, nil
}

// GetQueue returns one queue with its depth.
func (s *Store) GetQueue(ctx context.Context, p *store.GetQueueParams) (*model.Queue, error) {
	q, err := scanQueue(s.r.QueryRowContext(ctx, `SELECT `+queueCols+` FROM queues WHERE name = ?`, p.Name))
	if err != nil {
		return nil, fmt.Errorf("get queue %q: %w", p.Name, mapErr(err))
	}
	if err := s.fillDepth(ctx, q); err != nil {
		return nil, fmt.Errorf("get queue %q: %w", p.Name, err)
	}
	return q, nil
}

// fillDepth counts the queue's active runs by status, one indexed count per state.
func (s *Store) fillDepth(ctx context.Context, q *model.Queue) error {
	q.Depth = make(map[model.RunStatus]int, 4)
	for _, c := range []struct {
		status model.RunStatus
		st     *sql.Stmt
	}{
		{model.RunWaiting, s.rs.depthWaiting},
		{model.RunScheduled, s.rs.depthScheduled},
		{model.RunQueued, s.rs.depthQueued},
		{model.RunRunning, s.rs.depthRunning},
	} {
		var n int
		if err := c.st.QueryRowContext(ctx, q.Name).Scan(&n); err != nil {
			return fmt.Errorf("depth: %w", err)
		}
		q.Depth[c.status] = n
	}
	return nil
}

// UpdateQueue changes the set fields of a queue, creating it if missing.
func (s *Store) UpdateQueue(ctx context.Context, p *store.UpdateQueueParams) (*model.Queue, error) {
	committed := p.Committed
	var q *model.Queue
	err := s.write(ctx, func(t *wtx) error {
		var (
			prio, maxc, paused any
		)
		if p.Priority != nil {
			prio = *p.Priority
		}
		if p.MaxConcurrency != nil {
			maxc = *p.MaxConcurrency
		}
		if p.Paused != nil {
			paused = boolInt(*p.Paused)
		}
		var rate, per any
		if p.RateLimit != nil {
			rate, per = store.RateColumns(p.RateLimit)
		}
		setAlerts, alerts, err := store.QueueAlertsColumn(p.Alerts)
		if err != nil {
			return err
		}
		now := micros(p.Now)
		q, err = scanQueue(t.tx.QueryRowContext(t.ctx, `INSERT INTO queues (name, priority, max_concurrency, paused, created_at, updated_at,
				rate, rate_per_us, alerts)
			VALUES (?1, coalesce(?2, 0), coalesce(?3, 0), coalesce(?4, 0), ?5, ?5, coalesce(?6, 0), coalesce(?7, 0), ?9)
			ON CONFLICT (name) DO UPDATE SET priority = coalesce(?2, priority), max_concurrency = coalesce(?3, max_concurrency),
				paused = coalesce(?4, paused), updated_at = ?5, rate = coalesce(?6, rate), rate_per_us = coalesce(?7, rate_per_us),
				alerts = CASE WHEN ?8 THEN ?9 ELSE alerts END
			RETURNING `+queueCols, p.Name, prio, maxc, paused, now, rate, per, setAlerts, alerts))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update queue %q: %w", p.Name, err)
	}
	if committed != nil {
		committed()
	}
	// Depth is read after the commit, from a reader (it is a count, not part of the change).
	if err := s.fillDepth(ctx, q); err != nil {
		return nil, fmt.Errorf("update queue %q: %w", p.Name, err)
	}
	return q, nil
}

// oldestQueuedSQL finds each queue's earliest queued run with one probe of runs_queued
// (queue, priority DESC, scheduled_for, id) per priority its queued runs have: the first
// entry of a priority is its earliest, and the next probe starts below that priority. The
// cost is queues times distinct priorities, whatever the backlog.
const oldestQueuedSQL = `WITH RECURSIVE g(queue, priority, oldest) AS (
		SELECT r.queue, r.priority, r.scheduled_for FROM queues AS q JOIN runs AS r ON r.rowid = (
			SELECT rowid FROM runs INDEXED BY runs_queued WHERE queue = q.name AND status = 'queued'
			ORDER BY priority DESC, scheduled_for LIMIT 1)
		UNION ALL
		SELECT r.queue, r.priority, r.scheduled_for FROM g JOIN runs AS r ON r.rowid = (
			SELECT rowid FROM runs INDEXED BY runs_queued WHERE queue = g.queue AND status = 'queued' AND priority < g.priority
			ORDER BY priority DESC, scheduled_for LIMIT 1)
	)
	SELECT queue, min(oldest) FROM g GROUP BY queue`

// OldestQueued returns the earliest ScheduledFor of each queue's queued runs.
func (s *Store) OldestQueued(ctx context.Context) (map[string]time.Time, error) {
	rows, err := s.r.QueryContext(ctx, oldestQueuedSQL)
	if err != nil {
		return nil, fmt.Errorf("oldest queued: %w", err)
	}
	defer rows.Close()
	out := make(map[string]time.Time)
	for rows.Next() {
		var (
			name   string
			oldest sql.NullInt64
		)
		if err := rows.Scan(&name, &oldest); err != nil {
			return nil, fmt.Errorf("oldest queued: %w", err)
		}
		if oldest.Valid {
			out[name] = fromMicros(oldest.Int64)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("oldest queued: %w", err)
	}
	return out, nil
}
