package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// settle does, in the transaction that ended runs, what their ends entail: held runs take
// the concurrency slots they free, and their dependants are released or skipped. It returns
// the runs that changed because of it.
func settle(ctx context.Context, tx pgx.Tx, runs []*model.Run, now time.Time) ([]*model.Run, error) {
	admitted, err := freeSlots(ctx, tx, runs, now)
	if err != nil {
		return nil, err
	}
	resolved, err := store.Resolve(depTx{ctx, tx}, runs, now)
	if err != nil {
		return nil, err
	}
	return append(admitted, resolved...), nil
}

// depTx is store.DepTx over a transaction.
type depTx struct {
	ctx context.Context
	tx  pgx.Tx
}

func condTexts(cs []model.Condition) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// Plans of the dependency statements must not depend on statistics (see TestPlansFresh):
// on a never analyzed runs table the planner walked every waiting run per upstream run,
// which made a 10,000-run DAG quadratic. As endSQL does, they lock each run they touch
// by primary key in a LATERAL subquery (LIMIT 1: nothing else can serve it), check its
// state there, and update the locked runs by primary key; sets of ids come in through a
// materialized CTE with an always true test on a column without statistics ("k = 1"),
// which looks like a row or two, so that probes win whatever the table's size.

// meetSQL counts one dependency as met for the waiting dependants of $1 through edges
// whose condition is in $2; it returns them (their unmet count, deps_pending, is in
// runCols, and fixRun words their wait from it). Two upstream runs of one dependant ending
// at once update its row one after the other (the second, locking it, sees the first's
// count), so exactly one of them brings it to zero.
const meetSQL = `WITH d AS MATERIALIZED (
		SELECT e.run_id FROM run_deps e
		CROSS JOIN LATERAL (SELECT r.status, r.pending_code FROM runs r WHERE r.id = e.run_id FOR UPDATE LIMIT 1) l
		WHERE e.upstream_run_id = $1 AND e.condition = ANY($2::text[])
			AND l.status = 'waiting' AND l.pending_code = 'waiting_on_dependencies'
	)
	UPDATE runs r SET deps_pending = r.deps_pending - 1
	FROM d WHERE r.id = d.run_id
	RETURNING ` + runCols

func (d depTx) MeetDependants(upstream string, met []model.Condition) ([]*model.Run, error) {
	rows, err := d.tx.Query(d.ctx, meetSQL, upstream, condTexts(met))
	if err != nil {
		return nil, err
	}
	counted, err := collectRuns(rows)
	if err != nil {
		return nil, err
	}
	var ready []*model.Run
	for _, r := range counted {
		if r.depsPending == 0 {
			ready = append(ready, &r.Run)
		}
	}
	return ready, nil
}

// skipSQL skips the waiting dependants of $2 through edges whose condition is in $3; the
// error of each is the reason of $4 in the place of its edge's condition in $3.
const skipSQL = `WITH d AS MATERIALIZED (
		SELECT e.run_id, e.condition FROM run_deps e
		CROSS JOIN LATERAL (SELECT r.status FROM runs r WHERE r.id = e.run_id FOR UPDATE LIMIT 1) l
		WHERE e.upstream_run_id = $2 AND e.condition = ANY($3::text[]) AND l.status = 'waiting'
	)
	UPDATE runs r SET status = 'skipped', finished_at = $1, pending_code = '', pending_reason = '',
		error = ($4::text[])[array_position($3::text[], d.condition)]
	FROM d WHERE r.id = d.run_id
	RETURNING ` + runCols

func (d depTx) SkipDependants(upstream string, broken []model.Condition, reasons []string, now time.Time) ([]*model.Run, error) {
	rows, err := d.tx.Query(d.ctx, skipSQL, utc(now), upstream, condTexts(broken), reasons)
	if err != nil {
		return nil, err
	}
	skipped, err := collectRuns(rows)
	return models(skipped), err
}

func (d depTx) SetRunnable(runs []*model.Run) error {
	if len(runs) == 0 {
		return nil
	}
	ids, status, code, reason := make([]string, len(runs)), make([]string, len(runs)), make([]string, len(runs)), make([]string, len(runs))
	for i, r := range runs {
		ids[i], status[i], code[i], reason[i] = r.ID, string(r.Status), string(r.PendingCode), r.PendingReason
	}
	_, err := d.tx.Exec(d.ctx, setRunnableSQL, ids, status, code, reason)
	if err != nil {
		return fmt.Errorf("release runs: %w", err)
	}
	return nil
}

// setRunnableSQL writes the status, pending code and reason ($2..$4) of runs $1.
const setRunnableSQL = `WITH v AS MATERIALIZED (
		SELECT v.*, 1 AS k FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS v(id, status, code, reason)
	)
	UPDATE runs r SET status = v.status, pending_code = v.code, pending_reason = v.reason
	FROM v WHERE r.id = v.id AND v.k = 1`

// upstreamStatusSQL reads the states of runs $1.
const upstreamStatusSQL = `WITH u AS MATERIALIZED (SELECT u.id, 1 AS k FROM unnest($1::text[]) AS u(id))
	SELECT r.id, r.status FROM u JOIN runs r ON r.id = u.id WHERE u.k = 1`

// insertDepsSQL writes the edges of run $1 to runs $2 with conditions $3, marks those runs
// as having dependants, and sets $1's unmet count to $4.
const insertDepsSQL = `WITH e AS (
		INSERT INTO run_deps (run_id, upstream_run_id, condition)
		SELECT $1, u, c FROM unnest($2::text[], $3::text[]) AS v(u, c)
		ON CONFLICT DO NOTHING
	), u AS MATERIALIZED (
		SELECT u.id, 1 AS k FROM unnest($2::text[]) AS u(id)
	), m AS (
		UPDATE runs r SET has_dependants = true FROM u WHERE r.id = u.id AND u.k = 1 AND NOT r.has_dependants
	)
	UPDATE runs SET deps_pending = $4 WHERE id = $1 AND $4 > 0`

// prepareDeps reads the states of r's upstream runs and sets r's starting state from them
// (scheduler.PrepareDependencies). It returns the number of unmet dependencies, or a
// model.ErrNotFound naming an upstream run that does not exist.
func prepareDeps(ctx context.Context, tx pgx.Tx, r *model.Run, now time.Time) (int, error) {
	ids := make([]string, len(r.DependsOn))
	for i, d := range r.DependsOn {
		ids[i] = d.RunID
	}
	rows, err := tx.Query(ctx, upstreamStatusSQL, ids)
	if err != nil {
		return 0, fmt.Errorf("run %s: upstream runs: %w", r.ID, err)
	}
	ups := map[string]model.RunStatus{}
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			rows.Close()
			return 0, fmt.Errorf("run %s: upstream runs: %w", r.ID, err)
		}
		ups[id] = model.RunStatus(status)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("run %s: upstream runs: %w", r.ID, err)
	}
	for _, d := range r.DependsOn {
		if _, ok := ups[d.RunID]; !ok {
			return 0, fmt.Errorf("run %s: upstream run %s: %w", r.ID, d.RunID, model.ErrNotFound)
		}
	}
	return scheduler.PrepareDependencies(r, ups, now), nil
}

// insertDeps writes the edges of the new run r and its unmet count, and marks its upstream
// runs as having dependants.
func insertDeps(ctx context.Context, tx pgx.Tx, r *model.Run, unmet int) error {
	ups, conds := make([]string, len(r.DependsOn)), make([]string, len(r.DependsOn))
	for i, d := range r.DependsOn {
		ups[i], conds[i] = d.RunID, string(d.Condition)
	}
	_, err := tx.Exec(ctx, insertDepsSQL, r.ID, ups, conds, unmet)
	if err != nil {
		return fmt.Errorf("run %s: dependencies: %w", r.ID, err)
	}
	return nil
}

// ResolvePending resolves the dependants of the runs in dep_outbox: runs whose end was
// recorded by a statement of its own (see endSQL), whose resolution right after did not
// happen (a crash, or another server's, in between). It returns the runs it changed.
func (s *Store) ResolvePending(ctx context.Context, p *store.ResolvePendingParams) ([]*model.Run, error) {
	byRun, err := s.resolveOutbox(ctx, nil, p.Now)
	if err != nil {
		return nil, err
	}
	var out []*model.Run
	for _, rs := range byRun {
		out = append(out, rs...)
	}
	return out, nil
}

// outboxBatch bounds the outbox rows one resolution transaction takes.
const outboxBatch = 1000

// resolveOutbox resolves, in one transaction, the dependants of the outbox's runs (those of
// ids, or any when ids is nil), removing them from the outbox. Rows another server is
// resolving are skipped. It returns the runs it changed, by the upstream run that caused it.
func (s *Store) resolveOutbox(ctx context.Context, ids []string, now time.Time) (map[string][]*model.Run, error) {
	now = utc(now)
	var out map[string][]*model.Run
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = map[string][]*model.Run{}
		rows, err := tx.Query(ctx, `WITH o AS (
				DELETE FROM dep_outbox WHERE run_id IN (
					SELECT run_id FROM dep_outbox WHERE $1::text[] IS NULL OR run_id = ANY($1::text[])
					ORDER BY run_id LIMIT $2 FOR UPDATE SKIP LOCKED)
				RETURNING run_id
			)
			SELECT `+runCols+` FROM runs r JOIN o ON r.id = o.run_id ORDER BY r.id`, ids, outboxBatch)
		if err != nil {
			return err
		}
		ended, err := collectRuns(rows)
		if err != nil {
			return err
		}
		for _, u := range models(ended) {
			changed, err := store.Resolve(depTx{ctx, tx}, []*model.Run{u}, now)
			if err != nil {
				return err
			}
			out[u.ID] = changed
		}
		return nil
	})
	if err != nil {
		return nil, translate(err, "resolve dependencies")
	}
	return out, nil
}

// dependantsEnded lists the ids of the final runs among runs that have dependants.
func dependantsEnded(runs []*model.Run) []string {
	var ids []string
	for _, r := range runs {
		if r != nil && r.HasDependants && r.Status.Final() {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// ReopenRuns runs final runs again, upstream first; see store.Store.
func (s *Store) ReopenRuns(ctx context.Context, p *store.ReopenRunsParams) ([]*model.Run, error) {
	now := utc(p.Now)
	var out []*model.Run
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		for _, id := range p.RunIDs {
			r, err := reopenTx(ctx, tx, id, now)
			if err != nil {
				return fmt.Errorf("run %s: %w", id, err)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, translate(err, "reopen runs")
	}
	return out, nil
}

// reopenTx runs one final run again.
func reopenTx(ctx context.Context, tx pgx.Tx, id string, now time.Time) (*model.Run, error) {
	var (
		row                      runRow
		status, pending, trigger string
		args, spec               []byte
	)
	err := tx.QueryRow(ctx, `SELECT `+runCols+`, `+runSpec+`
		FROM runs r WHERE r.id = $1 FOR UPDATE`, id).Scan(append(runDest(&row, &status, &pending, &trigger, &args), &spec)...)
	if err != nil {
		return nil, translate(err, "run %s", id)
	}
	fixRun(&row, status, pending, trigger, args)
	r := &row.Run
	switch {
	case !r.Status.Final():
		return nil, fmt.Errorf("run is %s: %w", r.Status, model.ErrInvalidState)
	case spec == nil:
		return nil, fmt.Errorf("its job was deleted: %w", model.ErrInvalidState)
	}
	var js model.JobSpec
	if err := decodeSpec(spec, &js); err != nil {
		return nil, fmt.Errorf("job %s: %w", r.JobID, err)
	}
	rows, err := tx.Query(ctx, `SELECT d.upstream_run_id, d.condition, u.status FROM run_deps d
		JOIN runs u ON u.id = d.upstream_run_id WHERE d.run_id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("dependencies: %w", err)
	}
	ups := map[string]model.RunStatus{}
	r.DependsOn = nil
	for rows.Next() {
		var (
			d  model.Dependency
			st string
		)
		if err := rows.Scan(&d.RunID, &d.Condition, &st); err != nil {
			rows.Close()
			return nil, fmt.Errorf("dependencies: %w", err)
		}
		r.DependsOn = append(r.DependsOn, d)
		ups[d.RunID] = model.RunStatus(st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dependencies: %w", err)
	}
	unmet := scheduler.Reopen(r, ups, now)
	updated, err := scanRun(tx.QueryRow(ctx, `UPDATE runs r SET status = $2, pending_code = $3, pending_reason = $4,
		scheduled_for = $5, max_attempts = r.attempt - r.disruptions + $6, finished_at = $7, error = $8, cancel_requested = false,
		deps_pending = $9
		WHERE r.id = $1 RETURNING `+runCols,
		id, string(r.Status), string(r.PendingCode), r.PendingReason, utc(r.ScheduledFor), max(1, js.Retry.MaxAttempts),
		utcPtr(r.FinishedAt), r.Error, unmet))
	if err != nil {
		return nil, fmt.Errorf("reopen: %w", err)
	}
	if len(r.DependsOn) == 0 {
		return readmit(ctx, tx, &updated.Run, now)
	}
	updated.DependsOn = r.DependsOn
	return &updated.Run, nil
}
