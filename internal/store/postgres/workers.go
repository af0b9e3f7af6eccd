package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// workerSQL selects workers (alias w) with their running count and used capacity.
const workerSQL = `SELECT w.id, w.session, w.labels, w.cap_cpu, w.cap_memory_mb, w.cap_gpu, w.cap_slots, w.state,
		w.registered_at, w.last_heartbeat, w.handlers, w.commands,
		u.n, coalesce(u.cpu, 0), coalesce(u.mem, 0)::int8, coalesce(u.gpu, 0)::int8
	FROM workers w
	CROSS JOIN LATERAL (
		SELECT count(*) AS n, sum(r.req_cpu) AS cpu, sum(r.req_memory_mb) AS mem, sum(r.req_gpu) AS gpu
		FROM runs r WHERE r.status = 'running' AND r.worker_id = w.id
	) u`

func scanWorker(row pgx.Row) (*model.Worker, error) {
	var (
		w        model.Worker
		labels   []byte
		handlers []byte
		state    string
		usedMem  int64
		usedGPU  int64
		running  int64
		usedCPU  float64
	)
	if err := row.Scan(&w.ID, &w.Session, &labels, &w.Capacity.CPU, &w.Capacity.MemoryMB,
		&w.Capacity.GPU, &w.Capacity.Slots, &state, &w.RegisteredAt, &w.LastHeartbeat,
		&handlers, &w.Commands, &running, &usedCPU, &usedMem, &usedGPU); err != nil {
		return nil, err
	}
	var err error
	if w.Labels, err = decodeWorkerLabels(w.ID, labels); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(handlers, &w.Handlers); err != nil {
		return nil, fmt.Errorf("worker %s: decode handlers: %w", w.ID, err)
	}
	if len(w.Handlers) == 0 {
		w.Handlers = nil
	}
	w.State = model.WorkerState(state)
	w.Running = int(running)
	w.Used = model.Capacity{CPU: usedCPU, MemoryMB: usedMem, GPU: int(usedGPU), Slots: int(running)}
	w.RegisteredAt, w.LastHeartbeat = w.RegisteredAt.UTC(), w.LastHeartbeat.UTC()
	return &w, nil
}

// decodeWorkerLabels decodes a workers.labels value (JSON null when none).
func decodeWorkerLabels(id string, labels []byte) (map[string]string, error) {
	if len(labels) == 0 || string(labels) == "null" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(labels, &m); err != nil {
		return nil, fmt.Errorf("worker %s: decode labels: %w", id, err)
	}
	return m, nil
}

// workerRunsWhere selects (for lockForEnd) the running runs of worker $1.
const workerRunsWhere = `r.status = 'running' AND r.worker_id = $1`

// RegisterWorker creates or updates a worker; a new session ends the attempts the worker's
// previous process held as lost, in the same transaction.
func (s *Store) RegisterWorker(ctx context.Context, p *store.RegisterWorkerParams) (*model.Worker, []*model.Run, error) {
	now := utc(p.Now)
	labels, err := json.Marshal(p.Labels) // null when nil
	if err != nil {
		return nil, nil, fmt.Errorf("register worker %s: encode labels: %w", p.ID, err)
	}
	handlers := p.Handlers
	if handlers == nil {
		handlers = []string{}
	}
	handlersJSON, err := json.Marshal(handlers)
	if err != nil {
		return nil, nil, fmt.Errorf("register worker %s: encode handlers: %w", p.ID, err)
	}
	var (
		w    *model.Worker
		lost []*model.Run
	)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		lost = nil
		var (
			old  *string
			beat time.Time
		)
		err := tx.QueryRow(ctx, `SELECT session, last_heartbeat FROM workers WHERE id = $1 FOR UPDATE`, p.ID).Scan(&old, &beat)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return translate(err, "read worker")
		}
		resume := old != nil && p.Resume != "" && *old == p.Resume
		next := p.Session
		if resume {
			next = p.Resume
		}
		if old != nil && *old != next && scheduler.SessionHeld(beat, p.LiveSince, resume, p.Takeover) {
			return fmt.Errorf("%s: %w", scheduler.SessionHeldReason(p.ID, beat), model.ErrConflict)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO workers AS w (id, session, labels, cap_cpu, cap_memory_mb,
				cap_gpu, cap_slots, state, registered_at, last_heartbeat, handlers, commands)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 'active', $8, $8, $9, $10)
			ON CONFLICT (id) DO UPDATE SET
				session = $2, labels = $3, cap_cpu = $4, cap_memory_mb = $5, cap_gpu = $6, cap_slots = $7,
				last_heartbeat = $8, handlers = $9, commands = $10,
				state = CASE WHEN $11 AND w.state = 'draining' THEN w.state ELSE 'active' END,
				registered_at = CASE WHEN w.session = $2 THEN w.registered_at ELSE $8 END`,
			p.ID, next, labels, p.Capacity.CPU, p.Capacity.MemoryMB, p.Capacity.GPU,
			p.Capacity.Slots, now, handlersJSON, p.Commands, resume); err != nil {
			return translate(err, "write worker")
		}
		if old != nil && *old != next {
			locked, err := lockForEnd(ctx, tx, policyOf(0), workerRunsWhere, "", p.ID)
			if err != nil {
				return translate(err, "lock the previous session's runs")
			}
			if lost, err = endLost(ctx, tx, locked, scheduler.WorkerRestarted, now, p.Rand); err != nil {
				return err
			}
		}
		w, err = scanWorker(tx.QueryRow(ctx, workerSQL+` WHERE w.id = $1`, p.ID))
		return translate(err, "read worker")
	})
	if err != nil {
		return nil, nil, fmt.Errorf("register worker %s: %w", p.ID, err)
	}
	if lost == nil {
		lost = []*model.Run{}
	}
	return w, lost, nil
}

// GetWorker returns one worker with Running and Used.
func (s *Store) GetWorker(ctx context.Context, p *store.GetWorkerParams) (*model.Worker, error) {
	id := p.ID
	w, err := scanWorker(s.pool.QueryRow(ctx, workerSQL+` WHERE w.id = $1`, id))
	if err != nil {
		return nil, translate(err, "get worker %s", id)
	}
	return w, nil
}

// ListWorkers returns every worker by id, with Running and Used.
func (s *Store) ListWorkers(ctx context.Context) ([]*model.Worker, error) {
	rows, err := s.pool.Query(ctx, workerSQL+` ORDER BY w.id`)
	if err != nil {
		return nil, translate(err, "list workers")
	}
	ws, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*model.Worker, error) { return scanWorker(row) })
	if err != nil {
		return nil, translate(err, "list workers")
	}
	if ws == nil {
		ws = []*model.Worker{}
	}
	return ws, nil
}

// SetWorkerState sets a worker's state.
func (s *Store) SetWorkerState(ctx context.Context, p *store.SetWorkerStateParams) error {
	tag, err := s.pool.Exec(ctx, `UPDATE workers SET state = $2 WHERE id = $1 AND ($3 = '' OR session = $3)`,
		p.ID, string(p.State), p.Session)
	if err != nil {
		return translate(err, "set state of worker %s", p.ID)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set state of worker %s: %w", p.ID, model.ErrNotFound)
	}
	return nil
}
