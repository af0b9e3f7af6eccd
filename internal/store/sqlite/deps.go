package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// settle does, in the transaction that ended runs, what their ends entail: held runs take
// the concurrency slots they free, and their dependants are released or skipped. It returns
// the runs that changed because of it.
func (t *wtx) settle(runs []*model.Run, now time.Time) ([]*model.Run, error) {
	admitted, err := t.freeSlots(runs, now)
	if err != nil {
		return nil, err
	}
	resolved, err := store.Resolve(depTx{t}, runs, now)
	if err != nil {
		return nil, err
	}
	return append(admitted, resolved...), nil
}

// depTx is store.DepTx over a write transaction.
type depTx struct{ t *wtx }

// condArgs are the conditions of an edge filter, as the three parameters of
// "condition IN (?, ?, ?)" (unused ones never match).
func condArgs(cs []model.Condition) []any {
	out := []any{"", "", ""}
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// meetSQL counts one dependency as met for the waiting dependants of ?1 through edges of
// the given conditions; it returns them (their unmet count, deps_pending, is in runCols,
// and scanRun words their wait from it).
const meetSQL = `UPDATE runs SET deps_pending = deps_pending - 1
	WHERE status = 'waiting' AND pending_code = 'waiting_on_dependencies' AND id IN (
		SELECT run_id FROM run_deps WHERE upstream_run_id = ? AND condition IN (?, ?, ?))
	RETURNING ` + runCols

func (d depTx) MeetDependants(upstream string, met []model.Condition) ([]*model.Run, error) {
	counted, err := scanRuns(d.t.stmt(d.t.ws.meetDeps).QueryContext(d.t.ctx, append([]any{upstream}, condArgs(met)...)...))
	if err != nil {
		return nil, err
	}
	var ready []*model.Run
	for _, rr := range counted {
		if rr.depsPending == 0 {
			ready = append(ready, rr.run)
		}
	}
	return ready, nil
}

// skipSQL skips the waiting dependants of ?2 through edges of the conditions ?3, ?4, ?5;
// the error of each is the reason (?6, ?7, ?8) in the place of its edge's condition.
const skipSQL = `UPDATE runs SET status = 'skipped', finished_at = ?1, pending_code = '', pending_reason = '',
		error = (SELECT CASE condition WHEN ?3 THEN ?6 WHEN ?4 THEN ?7 WHEN ?5 THEN ?8 END
			FROM run_deps WHERE run_id = runs.id AND upstream_run_id = ?2)
	WHERE status = 'waiting' AND id IN (
		SELECT run_id FROM run_deps WHERE upstream_run_id = ?2 AND condition IN (?3, ?4, ?5))
	RETURNING ` + runCols

func (d depTx) SkipDependants(upstream string, broken []model.Condition, reasons []string, now time.Time) ([]*model.Run, error) {
	args := append([]any{micros(now), upstream}, condArgs(broken)...)
	for i := range 3 {
		reason := ""
		if i < len(reasons) {
			reason = reasons[i]
		}
		args = append(args, reason)
	}
	skipped, err := scanRuns(d.t.stmt(d.t.ws.skipDeps).QueryContext(d.t.ctx, args...))
	if err != nil {
		return nil, err
	}
	return runsOf(skipped), nil
}

func (d depTx) SetRunnable(runs []*model.Run) error {
	st := d.t.stmt(d.t.ws.setRunnable)
	for _, r := range runs {
		if _, err := st.ExecContext(d.t.ctx, string(r.Status), string(r.PendingCode), r.PendingReason, r.ID); err != nil {
			return fmt.Errorf("release run %s: %w", r.ID, err)
		}
	}
	return nil
}

// prepareDeps reads the states of r's upstream runs and sets r's starting state from them
// (scheduler.PrepareDependencies). It returns the number of unmet dependencies, or a
// model.ErrNotFound naming an upstream run that does not exist.
func (t *wtx) prepareDeps(r *model.Run, now time.Time) (int, error) {
	ups := make(map[string]model.RunStatus, len(r.DependsOn))
	q := t.stmt(t.ws.runStatus)
	for _, d := range r.DependsOn {
		var status string
		err := q.QueryRowContext(t.ctx, d.RunID).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("run %s: upstream run %s: %w", r.ID, d.RunID, model.ErrNotFound)
		}
		if err != nil {
			return 0, fmt.Errorf("run %s: upstream run %s: %w", r.ID, d.RunID, err)
		}
		ups[d.RunID] = model.RunStatus(status)
	}
	return scheduler.PrepareDependencies(r, ups, now), nil
}

// insertDeps writes the edges of the new run r, its unmet count, and marks its upstream
// runs as having dependants.
func (t *wtx) insertDeps(r *model.Run, unmet int) error {
	ins, mark := t.stmt(t.ws.insertDep), t.stmt(t.ws.markUpstream)
	for _, d := range r.DependsOn {
		if _, err := ins.ExecContext(t.ctx, r.ID, d.RunID, string(d.Condition)); err != nil {
			return fmt.Errorf("run %s: dependency on %s: %w", r.ID, d.RunID, err)
		}
		if _, err := mark.ExecContext(t.ctx, d.RunID); err != nil {
			return fmt.Errorf("run %s: mark upstream %s: %w", r.ID, d.RunID, err)
		}
	}
	if unmet > 0 {
		if _, err := t.stmt(t.ws.setDepsPending).ExecContext(t.ctx, unmet, r.ID); err != nil {
			return fmt.Errorf("run %s: dependencies: %w", r.ID, err)
		}
	}
	return nil
}

// ResolvePending has nothing to do: SQLite resolves dependants in the transaction that
// ends their upstream run.
func (s *Store) ResolvePending(context.Context, *store.ResolvePendingParams) ([]*model.Run, error) {
	return nil, nil
}

// ReopenRuns runs final runs again, upstream first; see store.Store.
func (s *Store) ReopenRuns(ctx context.Context, p *store.ReopenRunsParams) ([]*model.Run, error) {
	var out []*model.Run
	err := s.write(ctx, func(t *wtx) error {
		out = out[:0]
		e := t.ender(p.Now, nil)
		for _, id := range p.RunIDs {
			r, err := t.reopen(e, id, p.Now)
			if err != nil {
				return fmt.Errorf("run %s: %w", id, err)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reopen runs: %w", err)
	}
	return out, nil
}

// reopen runs one final run again.
func (t *wtx) reopen(e *ender, id string, now time.Time) (*model.Run, error) {
	var job int
	rr, err := scanRun(t.tx.QueryRowContext(t.ctx, `SELECT `+runCols+`, `+runHasJobSQL+`
		FROM runs WHERE id = ?`, id), &job)
	if err != nil {
		return nil, mapErr(err)
	}
	r := rr.run
	switch {
	case !r.Status.Final():
		return nil, fmt.Errorf("run is %s: %w", r.Status, model.ErrInvalidState)
	case job == 0:
		return nil, fmt.Errorf("its job was deleted: %w", model.ErrInvalidState)
	}
	policy, err := e.policy(r.JobID)
	if err != nil {
		return nil, err
	}
	rows, err := t.tx.QueryContext(t.ctx, `SELECT d.upstream_run_id, d.condition, u.status FROM run_deps d
		JOIN runs u ON u.id = d.upstream_run_id WHERE d.run_id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("dependencies: %w", err)
	}
	ups := map[string]model.RunStatus{}
	r.DependsOn = nil
	for rows.Next() {
		var (
			d      model.Dependency
			status string
		)
		if err := rows.Scan(&d.RunID, &d.Condition, &status); err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("dependencies: %w", err)
		}
		r.DependsOn = append(r.DependsOn, d)
		ups[d.RunID] = model.RunStatus(status)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("dependencies: %w", err)
	}
	unmet := scheduler.Reopen(r, ups, now)
	updated, err := scanRun(t.tx.QueryRowContext(t.ctx, `UPDATE runs SET status = ?, pending_code = ?, pending_reason = ?,
		scheduled_for = ?, max_attempts = attempt - disruptions + ?, finished_at = ?, error = ?, cancel_requested = 0, deps_pending = ?
		WHERE id = ? RETURNING `+runCols,
		string(r.Status), string(r.PendingCode), r.PendingReason, micros(r.ScheduledFor), max(1, policy.MaxAttempts),
		nullMicros(r.FinishedAt), r.Error, unmet, id))
	if err != nil {
		return nil, fmt.Errorf("reopen: %w", err)
	}
	if len(r.DependsOn) == 0 {
		return t.readmit(updated.run, now)
	}
	updated.run.DependsOn = r.DependsOn
	return updated.run, nil
}
