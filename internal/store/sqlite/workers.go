package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"database/sql"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// RegisterWorker creates or updates a worker; a new session loses the old one's attempts.
func (s *Store) RegisterWorker(ctx context.Context, p *store.RegisterWorkerParams) (*model.Worker, []*model.Run, error) {
	labels, err := json.Marshal(p.Labels)
	if err != nil {
		return nil, nil, fmt.Errorf("register worker %s: encode labels: %w", p.ID, err)
	}
	handlers, err := json.Marshal(orEmpty(p.Handlers))
	if err != nil {
		return nil, nil, fmt.Errorf("register worker %s: encode handlers: %w", p.ID, err)
	}
	var (
		w    *model.Worker
		lost []*model.Run
	)
	err = s.write(ctx, func(t *wtx) error {
		lost = nil
		var (
			session string
			beat    int64
		)
		err := t.tx.QueryRowContext(t.ctx, `SELECT session, last_heartbeat FROM workers WHERE id = ?`, p.ID).Scan(&session, &beat)
		existed := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		resume := existed && p.Resume != "" && session == p.Resume
		next := p.Session
		if resume {
			next = p.Resume
		}
		if existed && session != next && scheduler.SessionHeld(fromMicros(beat), p.LiveSince, resume, p.Takeover) {
			return fmt.Errorf("%s: %w", scheduler.SessionHeldReason(p.ID, fromMicros(beat)), model.ErrConflict)
		}
		now := micros(p.Now)
		w, err = scanWorker(t.tx.QueryRowContext(t.ctx, `INSERT INTO workers (id, session, labels, cap_cpu, cap_memory_mb, cap_gpu,
				cap_slots, state, registered_at, last_heartbeat, handlers, commands)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'active', ?8, ?8, ?9, ?10)
			ON CONFLICT (id) DO UPDATE SET session = ?2, labels = ?3, cap_cpu = ?4, cap_memory_mb = ?5, cap_gpu = ?6,
				cap_slots = ?7, last_heartbeat = ?8, handlers = ?9, commands = ?10,
				state = CASE WHEN ?11 AND state = 'draining' THEN state ELSE 'active' END,
				registered_at = CASE WHEN session = ?2 THEN registered_at ELSE ?8 END
			RETURNING `+workerCols,
			p.ID, next, labels, p.Capacity.CPU, p.Capacity.MemoryMB, p.Capacity.GPU, p.Capacity.Slots, now,
			handlers, p.Commands, resume))
		if err != nil {
			return err
		}
		if existed && session != next {
			running, err := scanRuns(t.tx.QueryContext(t.ctx, workerRunsSQL, p.ID))
			if err != nil {
				return fmt.Errorf("runs of the old session: %w", err)
			}
			e := t.ender(p.Now, p.Rand)
			for _, rr := range running {
				r, err := e.end(rr, model.AttemptLost, nil, scheduler.WorkerRestarted)
				if err != nil {
					return fmt.Errorf("run %s: %w", rr.run.ID, err)
				}
				lost = append(lost, r)
			}
			if err := e.flush(); err != nil {
				return err
			}
			admitted, err := t.settle(lost, p.Now)
			lost = append(lost, admitted...)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("register worker %s: %w", p.ID, err)
	}
	if err := s.fillUsage(ctx, w); err != nil {
		return nil, nil, fmt.Errorf("register worker %s: %w", p.ID, err)
	}
	return w, lost, nil
}

// GetWorker returns one worker with its running count and used capacity.
func (s *Store) GetWorker(ctx context.Context, p *store.GetWorkerParams) (*model.Worker, error) {
	id := p.ID
	w, err := scanWorker(s.r.QueryRowContext(ctx, `SELECT `+workerCols+` FROM workers WHERE id = ?`, id))
	if err != nil {
		return nil, fmt.Errorf("get worker %s: %w", id, mapErr(err))
	}
	if err := s.fillUsage(ctx, w); err != nil {
		return nil, fmt.Errorf("get worker %s: %w", id, err)
	}
	return w, nil
}

// fillUsage sums the worker's running runs (runs_worker).
func (s *Store) fillUsage(ctx context.Context, w *model.Worker) error {
	var n int
	var u model.Capacity
	if err := s.rs.workerUsage.QueryRowContext(ctx, w.ID).Scan(&n, &u.CPU, &u.MemoryMB, &u.GPU); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	u.Slots = n
	w.Running, w.Used = n, u
	return nil
}

// ListWorkers returns every worker by id.
func (s *Store) ListWorkers(ctx context.Context) ([]*model.Worker, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+workerCols+` FROM workers ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	var out []*model.Worker
	for rows.Next() {
		w, err := scanWorker(rows)
		if err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("list workers: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		_ = rows.Close()
		return nil, fmt.Errorf("list workers: %w", err)
	}
	_ = rows.Close()
	for _, w := range out {
		if err := s.fillUsage(ctx, w); err != nil {
			return nil, fmt.Errorf("list workers: %w", err)
		}
	}
	return out, nil
}

// SetWorkerState sets a worker's state.
func (s *Store) SetWorkerState(ctx context.Context, p *store.SetWorkerStateParams) error {
	err := s.write(ctx, func(t *wtx) error {
		res, err := t.tx.ExecContext(t.ctx, `UPDATE workers SET state = ?1 WHERE id = ?2 AND (?3 = '' OR session = ?3)`,
			string(p.State), p.ID, p.Session)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return model.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("set state of worker %s: %w", p.ID, err)
	}
	return nil
}

// orEmpty is s, or an empty slice when s is nil (stored as [] rather than null).
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
