package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// Explained is one statement of ExplainHot and what EXPLAIN (ANALYZE, BUFFERS) printed.
type Explained struct {
	Name string // what the statement is for, e.g. "lease, nothing to place"
	Plan string
}

// ExplainParams says what ExplainHot works on.
type ExplainParams struct {
	// Queue is a queue with queued runs: the lease, heartbeat and completion statements
	// take Batch of its runs, and the placing path's claim Batch more (in the transaction
	// that is rolled back), so it should hold 2 x Batch. It may be paused.
	Queue string
	Batch int // runs per lease and completion (default 500)
	Now   time.Time
}

// ExplainHot runs EXPLAIN (ANALYZE, BUFFERS) of the statements on the store's hot paths,
// on the data the store holds: listing queues with work, leasing (one statement, and the
// placing path's candidates and claim), heartbeat, completion, the timers of the
// promoter, the rescuer, the releaser and the cron firer, a queue's depth, and the reads
// of the API (lists of runs by status, queue and job, one run with its attempts, lists of
// jobs and workers). It is for `stint bench plans`, which seeds a big store first.
//
// Everything happens in one transaction that is rolled back: the statements that write
// (lease, heartbeat, completion) run for real on Batch runs of p.Queue, so that the
// plans show real row counts, and nothing of it remains. Rows it locks are locked until
// it returns. Each statement is prepared and explained through EXECUTE, so the plan is
// the generic plan the store's connections use (plan_cache_mode=force_generic_plan).
func (s *Store) ExplainHot(ctx context.Context, p *ExplainParams) ([]Explained, error) {
	if p.Queue == "" {
		return nil, errors.New("explain: no queue given")
	}
	batch := p.Batch
	if batch <= 0 {
		batch = 500
	}
	now := utc(p.Now)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	var out []Explained
	explain := func(name, sql string, args ...any) error {
		if _, err := tx.Exec(ctx, "PREPARE stint_explain AS "+sql); err != nil {
			return fmt.Errorf("explain %s: prepare: %w", name, err)
		}
		q := "EXPLAIN (ANALYZE, BUFFERS) EXECUTE stint_explain"
		if len(args) > 0 {
			ph := make([]string, len(args))
			for i := range ph {
				ph[i] = fmt.Sprintf("$%d", i+1)
			}
			q += "(" + strings.Join(ph, ", ") + ")"
		}
		rows, err := tx.Query(ctx, q, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
		if err != nil {
			return fmt.Errorf("explain %s: %w", name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("explain %s: %w", name, err)
		}
		if _, err := tx.Exec(ctx, "DEALLOCATE stint_explain"); err != nil {
			return fmt.Errorf("explain %s: deallocate: %w", name, err)
		}
		out = append(out, Explained{Name: name, Plan: strings.Join(lines, "\n")})
		return nil
	}
	// pick reads what the statements are explained with (not explained itself).
	pick := func(what, sql string, args ...any) (string, error) {
		var v string
		if err := tx.QueryRow(ctx, sql, args...).Scan(&v); err != nil {
			return "", fmt.Errorf("explain: find %s: %w", what, err)
		}
		return v, nil
	}

	// The lease, as the one-statement path takes it, by a worker that serves the bench's
	// handler and commands; the queue is unpaused in this transaction only.
	const workerID, session = "stint-explain", "stint-explain"
	if _, err := tx.Exec(ctx, `UPDATE queues SET paused = false WHERE name = $1`, p.Queue); err != nil {
		return nil, fmt.Errorf("explain: resume queue: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO workers (id, session, labels, cap_cpu, cap_memory_mb, cap_gpu, cap_slots,
			state, registered_at, last_heartbeat, handlers, commands)
		VALUES ($1, $2, 'null', 2, 4096, 0, $3, 'active', $4, $4, '["noop"]', true)`, workerID, session, batch, now); err != nil {
		return nil, fmt.Errorf("explain: register worker: %w", err)
	}
	lp := &store.LeaseRunsParams{WorkerID: workerID, Max: batch, Handlers: []string{"noop"}, Commands: true}
	exp := utc(p.Now.Add(15 * time.Second))
	qfilter, qargs := handlerFilter(lp, 2)
	ufilter, uargs := handlerFilter(lp, 6)
	cfilter, cargs := handlerFilter(lp, 7)
	steps := []struct {
		name string
		sql  string
		args []any
	}{
		{"lease: queues with work", fmt.Sprintf(leaseQueuesSQL, qfilter), append([]any{now}, qargs...)},
		{"lease, nothing to place (one statement)", fmt.Sprintf(leaseUnplacedSQL, ufilter), append([]any{p.Queue, batch, workerID, exp, now}, uargs...)},
	}
	for _, st := range steps {
		if err := explain(st.name, st.sql, st.args...); err != nil {
			return nil, err
		}
	}
	rows, err := tx.Query(ctx, `SELECT id, lease_token FROM runs WHERE status = 'running' AND worker_id = $1 ORDER BY id`, workerID)
	if err != nil {
		return nil, fmt.Errorf("explain: read the leases: %w", err)
	}
	var ids, tokens []string
	var rid, tok string
	if _, err := pgx.ForEachRow(rows, []any{&rid, &tok}, func() error {
		ids, tokens = append(ids, rid), append(tokens, tok)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("explain: read the leases: %w", err)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("explain: queue %s has no queued run a noop worker takes", p.Queue)
	}
	es := make([]ending, len(ids))
	for i := range ids {
		es[i] = decided(store.Completion{RunID: ids[i], Token: tokens[i], Status: model.AttemptSucceeded}, now)
	}
	later := utc(p.Now.Add(time.Hour))
	held := make([]store.LeaseRef, len(ids))
	for i := range ids {
		held[i] = store.LeaseRef{RunID: ids[i], Token: tokens[i]}
	}
	beat := &store.HeartbeatParams{Beats: []store.Beat{{WorkerID: workerID, Session: session, Held: held}},
		LeaseTTL: exp.Sub(now), Now: p.Now}
	if err := explain("heartbeat", heartbeatSQL, heartbeatArgs(beat)...); err != nil {
		return nil, err
	}
	if err := explain("rescue: expired leases (an hour later)", fmt.Sprintf(lockForEndSQL, policyOf(0), expiredWhere, " SKIP LOCKED"), later, batch); err != nil {
		return nil, err
	}
	if err := explain("completion with failures: lock the runs", fmt.Sprintf(lockForEndSQL, policyOf(2), `r.id = ANY($1)`, ""), ids, ids[:1]); err != nil {
		return nil, err
	}
	if err := explain("complete (successes, one statement)", endSQL, endArgs(now, es)...); err != nil {
		return nil, err
	}

	// The placing path: candidates in lease order, then the claim of the ones picked.
	labels := `{}`
	if err := explain("lease candidates (placing path)", fmt.Sprintf(candidatesSQL, cfilter),
		append([]any{p.Queue, 2.0, int64(4096), 0, labels, batch}, cargs...)...); err != nil {
		return nil, err
	}
	rows, err = tx.Query(ctx, `SELECT id FROM runs WHERE status = 'queued' AND queue = $1
		ORDER BY priority DESC, scheduled_for, id LIMIT $2`, p.Queue, batch)
	if err != nil {
		return nil, fmt.Errorf("explain: pick runs to claim: %w", err)
	}
	claim, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("explain: pick runs to claim: %w", err)
	}
	if err := explain("lease claim (placing path)", claimSQL, claim, workerID, exp, now); err != nil {
		return nil, err
	}

	// What the statements below read about: another queue (the history's), a job with
	// runs, a failed run, a cron run.
	other, err := pick("another queue", `SELECT name FROM queues WHERE name <> $1 ORDER BY name LIMIT 1`, p.Queue)
	if err != nil {
		return nil, err
	}
	oldest, err := pick("the oldest run", `SELECT id FROM runs ORDER BY id LIMIT 1`)
	if err != nil {
		return nil, err
	}
	oldJob, err := pick("its job", `SELECT job_id FROM runs WHERE id = $1`, oldest)
	if err != nil {
		return nil, err
	}
	failed, err := pick("a failed run", `SELECT coalesce(min(id), '') FROM runs WHERE status = 'failed'`)
	if err != nil {
		return nil, err
	}
	var cronJob string
	var cronAt *time.Time
	if err := tx.QueryRow(ctx, `SELECT job_id, scheduled_for FROM runs WHERE trigger_kind = 'cron' ORDER BY id LIMIT 1`).Scan(&cronJob, &cronAt); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("explain: find a cron run: %w", err)
	}
	if cronAt == nil {
		cronAt = &now
	}
	type stmt struct {
		name string
		sql  string
		args []any
	}
	listStmt := func(name string, lp store.ListRunsParams) stmt {
		q, args := listRunsSQL(&lp, 101)
		return stmt{name, q, args}
	}
	jobsQ, jobsArgs := listJobsSQL(&store.ListJobsParams{}, 101)
	rest := []stmt{
		{"promote due runs", promoteSQL, []any{now, 1000}},
		{"promoter: next due", nextDueSQL, []any{time.Time{}}},
		{"rescuer: next lease expiry", nextExpirySQL, nil},
		{"releaser: keys due", releaseDueSQL, []any{now}},
		{"releaser: next release", nextReleaseSQL, nil},
		{"cron: next fire", nextFireSQL, []any{nil}},
		{"cron: due jobs", dueJobsSQL, []any{now, 100}},
		{"cron: duplicate of a fire", existingRunSQL, []any{"", true, cronJob, *cronAt}},
		{"depth of a queue (GET /v1/queues/{name})", depthOneSQL, []any{p.Queue}},
		{"depth of every queue (GET /v1/queues)", depthAllSQL, nil},
		listStmt("list runs, newest first", store.ListRunsParams{}),
		listStmt("list runs, succeeded", store.ListRunsParams{Status: model.RunSucceeded}),
		listStmt("list runs, failed", store.ListRunsParams{Status: model.RunFailed}),
		listStmt("list runs, queued", store.ListRunsParams{Status: model.RunQueued}),
		listStmt("list runs, running", store.ListRunsParams{Status: model.RunRunning}),
		listStmt("list runs of the bench queue", store.ListRunsParams{Queue: p.Queue}),
		listStmt("list runs of a history queue", store.ListRunsParams{Queue: other}),
		listStmt("list runs of a history queue, failed", store.ListRunsParams{Queue: other, Status: model.RunFailed}),
		listStmt("list runs of a queue that has none", store.ListRunsParams{Queue: "stint-explain-no-such-queue"}),
		listStmt("list runs of a job", store.ListRunsParams{JobID: oldJob}),
		listStmt("list runs, succeeded, page after the oldest", store.ListRunsParams{Status: model.RunSucceeded, Cursor: oldest}),
		{"get a run with its attempts", getRunSQL, []any{failed}},
		{"list jobs", jobsQ, jobsArgs},
		{"list workers", workerSQL + ` ORDER BY w.id`, nil},
	}
	for _, st := range rest {
		if err := explain(st.name, st.sql, st.args...); err != nil {
			return nil, err
		}
	}
	return out, nil
}
