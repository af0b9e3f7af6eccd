package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/storetest"
)

// planCase is a statement, arguments to explain it with, and what its plan must show.
type planCase struct {
	name   string
	sql    string
	args   []any
	want   []string // each must appear in the plan; "a|b": a or b must
	forbid []string // none may appear in the plan
}

// hotPlanCases are the statements of the hot path: submit, promote, lease, heartbeat,
// complete, rescue. Their plans must not depend on statistics: they are checked on a fresh,
// never analyzed schema too, as a server meets it on its first run and keeps it in its
// connections' generic plans until autovacuum analyzes the tables.
func hotPlanCases(now time.Time) []planCase {
	lp := &store.LeaseRunsParams{WorkerID: "w", Max: 100, Handlers: []string{"noop"}, Commands: true}
	filter, fargs := handlerFilter(lp, 7)
	ufilter, ufargs := handlerFilter(lp, 6)
	qfilter, qargs := handlerFilter(lp, 2)
	ids := []string{id.New(now), id.New(now)}
	// A plan that reaches runs other than through its primary key or the index its state
	// names reads every run (or every running run) per batch or per row.
	noScan := []string{"Seq Scan on runs", "Seq Scan on jobs", "Hash Join", "Merge Join"}
	var batch []newJob
	for i := range 2 {
		j := &model.Job{ID: id.New(now), Namespace: model.DefaultNamespace, Name: fmt.Sprintf("plan-%d", i),
			Spec: model.JobSpec{Handler: "noop", Queue: model.DefaultQueue}, Enabled: true, CreatedAt: now, UpdatedAt: now}
		r := &model.Run{ID: id.New(now), JobID: j.ID, JobName: j.Name, Namespace: j.Namespace, Status: model.RunQueued,
			Queue: model.DefaultQueue, Trigger: model.TriggerSubmit, ScheduledFor: now, CreatedAt: now, MaxAttempts: 1}
		batch = append(batch, newJob{job: j, run: r, spec: []byte(`{}`)})
	}
	plainArgs := createJobsArgs(batch, now)
	plainArgs = append(plainArgs[:16:16], plainArgs[17:]...)
	return []planCase{
		{"lease candidates", fmt.Sprintf(candidatesSQL, filter), append([]any{"default", 8.0, int64(4096), 2, `{"zone": "eu"}`, 100}, fargs...),
			[]string{"runs_queued"}, noScan},
		{"lease, nothing to place", fmt.Sprintf(leaseUnplacedSQL, ufilter), append([]any{"default", 100, "w", now, now}, ufargs...),
			// The due scans walk runs_due, or runs_scheduled filtered by queue: either reads only
			// runs due now (leaseUnplacedSQL). With every run in one queue, as here, the two
			// cost alike, and which wins turns on the tables' page counts.
			[]string{"runs_queued", "runs_due|runs_scheduled", "Index Cond: (id = picked.id)", "jobs_pkey"}, noScan},
		{"duplicate of a new run", existingRunSQL, []any{"", false, ids[0], now}, nil, noScan},
		{"dependants met", meetSQL, []any{ids[0], []string{"succeeded", "finished"}}, []string{"run_deps_upstream", "Index Cond: (id = d.run_id)"}, append([]string{"Join Filter"}, noScan...)},
		{"dependants skipped", skipSQL, []any{now, ids[0], []string{"succeeded"}, []string{"skipped: why"}}, []string{"run_deps_upstream", "Index Cond: (id = d.run_id)"}, append([]string{"Join Filter"}, noScan...)},
		{"dependants released", setRunnableSQL, []any{ids, ids, ids, ids}, []string{"runs_pkey"}, noScan},
		{"upstream states", upstreamStatusSQL, []any{ids}, []string{"runs_pkey"}, noScan},
		{"graph unmet counts", depsPendingSQL, []any{ids, []int32{1, 2}}, []string{"runs_pkey"}, noScan},
		{"graph edges", edgesSQL, []any{ids, ids, []string{"succeeded", "failed"}}, []string{"runs_pkey"}, noScan},
		{"dependency edges", insertDepsSQL, []any{ids[0], ids, []string{"succeeded", "failed"}, 2}, []string{"runs_pkey"}, noScan},
		{"lease claim", claimSQL, []any{ids, "w", now, now}, []string{"Index Scan using runs_pkey on runs r", "jobs_pkey"}, noScan},
		{"worker booked", workerBookedSQL, []any{"w"}, []string{"runs_placed"}, noScan},
		{"live rooms", liveRoomsSQL, []any{now, "w"}, []string{"runs_placed"}, noScan},
		{"lease queues", fmt.Sprintf(leaseQueuesSQL, qfilter), append([]any{now}, qargs...), []string{"Index Scan Backward using runs_queued", "Index Scan Backward using runs_due|Index Scan Backward using runs_scheduled"}, noScan},
		// runs_running by its queue prefix, or, where the table has one queue, runs_worker:
		// either walks only the running runs.
		{"queue running count", countRunningSQL, []any{"default"}, nil, noScan},
		{"promote", promoteSQL, []any{now, 100}, []string{"runs_scheduled", "Index Cond: (id = due.id)"}, noScan},
		{"promote a queue's due runs", promoteQueueSQL, []any{"default", now, 100}, []string{"runs_due|runs_scheduled", "Index Cond: (id = due.id)"}, noScan},
		// Each completion locks its run by primary key (not by walking runs_running
		// with a filter on the id) and the update finds it by primary key.
		{"complete", endSQL, []any{ids, ids, ids, []*int32{nil, nil}, ids, ids, []*time.Time{nil, nil}, ids, ids, []*time.Time{nil, nil}, now, []int32{0, 0}},
			[]string{"Index Cond: (id = c.run_id)", "Index Cond: (id = (cur.run_id)::text)"},
			append([]string{"runs_running", "runs_worker"}, noScan...)},
		// Each listed lease is found by primary key: not by walking an index of running
		// runs (every worker's) and matching the input against each; each worker of the
		// batch, and each lease's worker, likewise.
		{"heartbeat", heartbeatSQL, heartbeatArgs(&store.HeartbeatParams{Now: now, LeaseTTL: time.Minute, Beats: []store.Beat{
			{WorkerID: "w", Session: "s", Held: []store.LeaseRef{{RunID: ids[0], Token: "t"}, {RunID: ids[1], Token: "t"}}},
			{WorkerID: "w2", Held: []store.LeaseRef{{RunID: ids[1], Token: "t"}}}}}),
			[]string{"Index Cond: (id = h.run_id)", "Index Cond: (id = (held.id)::text)", "Index Cond: (id = b.worker_id)", "Index Cond: (id = h.worker_id)"},
			append([]string{"runs_running", "runs_worker", "Join Filter", "Seq Scan on workers"}, noScan...)},
		// The insert joins its own inputs; it reads no table.
		{"submit", insertPlainSQL, textJSON(plainArgs), []string{"Insert on jobs", "Insert on runs"},
			[]string{"Seq Scan", "Scan using runs", "Scan using jobs"}},
		{"submit clashing", createJobsSQL, textJSON(createJobsArgs(batch, now)), []string{"Insert on jobs", "Insert on runs"},
			[]string{"Seq Scan on runs", "Seq Scan on jobs", "Scan using runs", "Scan using jobs"}},
	}
}

// textJSON turns the JSON documents among args ([][]byte) into text, which explain's simple
// protocol sends as JSON (it would send bytes as bytea).
func textJSON(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		docs, ok := a.([][]byte)
		if !ok {
			out[i] = a
			continue
		}
		txt := make([]*string, len(docs))
		for j, d := range docs {
			if d != nil {
				s := string(d)
				txt[j] = &s
			}
		}
		out[i] = txt
	}
	return out
}

// TestPlans checks, with EXPLAIN, that every dispatch and list statement uses its index.
// Statements run with generic plans (see Open), so that is what is explained: each one is
// prepared and explained through EXECUTE, on tables filled with a few thousand runs in every
// state and analyzed.
func TestPlans(t *testing.T) {
	s := openTest(t)
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fillForPlans(t, s, now)

	conn, err := s.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var mode string
	require.NoError(t, conn.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode))
	require.Equal(t, "force_generic_plan", mode)

	listRuns := func(p store.ListRunsParams) (string, []any) { return listRunsSQL(&p, 101) }
	listJobs := func(p store.ListJobsParams) (string, []any) { return listJobsSQL(&p, 101) }
	ids := []string{id.New(now), id.New(now)}

	// A count over a large share of the table may scan it.
	allowSeq := map[string]bool{"depth of a queue": true}
	cases := append(hotPlanCases(now), []planCase{
		// Not on the path of a run that succeeds: on a nearly empty table these scan it.
		{"run keys", `SELECT idempotency_key FROM runs WHERE idempotency_key = ANY($1)`, []any{ids}, []string{"runs_idempotency"}, nil},
		{"rescue", fmt.Sprintf(lockForEndSQL, policyOf(0), expiredWhere, " SKIP LOCKED"), []any{now, 100},
			[]string{"runs_running", "runs_pkey", "jobs_pkey"}, nil},
		{"completion lock", fmt.Sprintf(lockForEndSQL, policyOf(2), `r.id = ANY($1)`, ""), []any{ids, ids}, []string{"runs_pkey"}, nil},
		// The timers' minimums: on an empty table every index of running runs is as cheap.
		{"next due", nextDueSQL, []any{now}, []string{"runs_scheduled"}, nil},
		{"next lease expiry", nextExpirySQL, nil, []string{"runs_running"}, nil},
		{"worker runs", fmt.Sprintf(lockForEndSQL, policyOf(0), workerRunsWhere, ""), []any{"w"}, []string{"runs_worker"}, nil},
		{"worker usage", workerSQL + ` WHERE w.id = $1`, []any{"w"}, []string{"runs_worker"}, nil},
		// Probes of runs_queued, one per queue and priority: never every queued run.
		{"oldest queued", oldestQueuedSQL, nil, []string{"Scan using runs_queued", "Index Cond: ((queue = g_1.queue) AND (priority < g_1.priority))"},
			[]string{"Seq Scan on runs", "Sort"}},
		{"depth of a queue", depthOneSQL, []any{"default"}, []string{"runs_scheduled", "runs_rare_status"}, nil},
		{"cancel by job", `WITH t AS (SELECT r.id FROM runs r WHERE r.job_id = $3::text AND ` + cancelActive + ` ORDER BY r.id FOR UPDATE)
			UPDATE runs r SET ` + cancelSet + ` FROM t WHERE r.id = t.id AND ` + cancelActive + ` RETURNING ` + runCols,
			[]any{now, "x", "j"}, []string{"runs_job", "runs_pkey"}, nil},
		{"get job", `SELECT ` + jobCols + ` FROM jobs WHERE id = $1 OR (namespace = $2 AND name = $1) ORDER BY id = $1 DESC LIMIT 1`,
			[]any{"a", "default"}, []string{"jobs_pkey", "BitmapOr"}, nil},
		{"runs by key or cron instant", existingRunsSQL, []any{ids, ids, []time.Time{now, now}},
			[]string{"runs_idempotency", "runs_cron_instant"}, nil},
		{"run by key or cron instant", existingRunSQL, []any{"k", true, "j", now}, []string{"runs_idempotency", "runs_cron_instant"}, nil},
		{"fired instants", firedInstantsSQL, []any{"j", now, now}, []string{"runs_cron_instant"}, nil},
		{"drop runs made ahead", dropAheadSQL, []any{"j", now}, []string{"runs_cron_instant"}, nil},
		{"get run", `SELECT ` + runCols + `, a.n FROM runs r LEFT JOIN attempts a ON a.run_id = r.id WHERE r.id = $1 ORDER BY a.n`,
			[]any{"r"}, []string{"runs_pkey", "attempts_pkey"}, nil},
		{"read logs", `SELECT run_id, attempt, seq, stream, data, created_at FROM log_chunks
			WHERE run_id = $1 AND attempt = $2 AND seq > $3 ORDER BY seq LIMIT $4`, []any{"r", 1, 0, 10}, []string{"log_chunks_pkey"}, nil},
	}...)
	for _, c := range []struct {
		name string
		p    store.ListRunsParams
		want string
	}{
		{"list runs", store.ListRunsParams{}, "Index Scan Backward using runs_pkey"},
		{"list runs of a job", store.ListRunsParams{JobID: "j", Cursor: ids[0]}, "runs_job"},
		{"list failed runs", store.ListRunsParams{Status: model.RunFailed}, "runs_rare_status"},
		{"list scheduled runs", store.ListRunsParams{Status: model.RunScheduled, Cursor: ids[0]}, "runs_rare_status"},
		{"list runs of a worker", store.ListRunsParams{WorkerID: "w"}, "runs_worker"},
	} {
		q, args := listRuns(c.p)
		cases = append(cases, planCase{c.name, q, args, []string{c.want}, nil})
	}
	for _, c := range []struct {
		name string
		p    store.ListJobsParams
		want string
	}{
		{"list jobs", store.ListJobsParams{Cursor: "a" + cursorSep + "default"}, "jobs_name"},
		{"list jobs of a namespace", store.ListJobsParams{Namespace: "default", Cursor: "a"}, "Index Scan using jobs_"},
	} {
		q, args := listJobs(c.p)
		cases = append(cases, planCase{c.name, q, args, []string{c.want}, nil})
	}

	for i, c := range cases {
		plan := checkPlan(t, conn.Conn(), i, c)
		if !allowSeq[c.name] {
			require.NotContains(t, plan, "Seq Scan on runs", "%s:\n%s", c.name, plan)
		}
		require.NotContains(t, plan, "Seq Scan on jobs", "%s:\n%s", c.name, plan)
	}
}

// TestPlansFresh checks the hot statements' plans on a fresh schema whose tables were never
// analyzed, first empty, then holding a few thousand rows: a server's connections plan them
// at first use and keep those generic plans until autovacuum first analyzes the tables.
func TestPlansFresh(t *testing.T) {
	s := openTest(t)
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Autovacuum must not analyze the tables while the test runs.
	for _, table := range []string{"jobs", "runs", "queues", "workers"} {
		_, err := s.pool.Exec(ctx, "ALTER TABLE "+table+" SET (autovacuum_enabled = false)")
		require.NoError(t, err)
	}
	for _, filled := range []bool{false, true} {
		if filled {
			fillRuns(t, s, now, 3)
		}
		checkFresh(t, s, filled, hotPlanCases(now))
	}
}

// checkFresh checks cases on a connection of s, after checking that runs was never analyzed.
func checkFresh(t *testing.T, s *Store, filled bool, cases []planCase) {
	t.Helper()
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var analyzed *time.Time
	require.NoError(t, conn.QueryRow(ctx, `SELECT greatest(last_analyze, last_autoanalyze)
		FROM pg_stat_user_tables WHERE relname = 'runs' AND schemaname = current_schema()`).Scan(&analyzed))
	require.Nil(t, analyzed, "runs must not have been analyzed")
	for i, c := range cases {
		c.name = fmt.Sprintf("%s (fresh, filled %v)", c.name, filled)
		checkPlan(t, conn.Conn(), i, c)
		_, err := conn.Exec(ctx, fmt.Sprintf("DEALLOCATE plan_%d", i))
		require.NoError(t, err)
	}
}

// checkPlan explains c as prepared statement number i and checks its wants and forbids.
func checkPlan(t *testing.T, conn *pgx.Conn, i int, c planCase) string {
	t.Helper()
	plan := explain(t, conn, fmt.Sprintf("plan_%d", i), c.sql, c.args...)
	t.Logf("%s:\n%s", c.name, plan)
	for _, w := range c.want {
		require.True(t, slices.ContainsFunc(strings.Split(w, "|"), func(w string) bool { return strings.Contains(plan, w) }),
			"%s: want %q in the plan:\n%s", c.name, w, plan)
	}
	for _, f := range c.forbid {
		require.NotContains(t, plan, f, "%s:\n%s", c.name, plan)
	}
	return plan
}

// explain prepares sql as name and returns its generic plan.
func explain(t *testing.T, conn *pgx.Conn, name, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	_, err := conn.Exec(ctx, "PREPARE "+name+" AS "+sql)
	require.NoError(t, err, sql)
	ph := make([]string, len(args))
	for i := range ph {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	q := "EXPLAIN EXECUTE " + name
	if len(args) > 0 {
		q += "(" + strings.Join(ph, ", ") + ")"
	}
	rows, err := conn.Query(ctx, q, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	require.NoError(t, err, sql)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// fillRuns stores batches of 1000 jobs with a run each: queued, scheduled (one in ten),
// waiting (one in ten), some from cron.
func fillRuns(t *testing.T, s *Store, now time.Time, batches int) {
	t.Helper()
	ctx := context.Background()
	for b := range batches {
		var batch []store.NewJob
		for i := range 1000 {
			j := &model.Job{ID: id.New(now), Namespace: model.DefaultNamespace, Name: fmt.Sprintf("job-%d-%04d", b, i),
				Spec: model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Retry: model.RetryPolicy{MaxAttempts: 1}}, Enabled: true, CreatedAt: now, UpdatedAt: now}
			r := &model.Run{ID: id.New(now), JobID: j.ID, JobName: j.Name, Namespace: j.Namespace, Status: model.RunQueued,
				Queue: model.DefaultQueue, Trigger: model.TriggerSubmit, ScheduledFor: now, CreatedAt: now, MaxAttempts: 1}
			switch {
			case i%10 == 1:
				r.Status, r.ScheduledFor, r.PendingCode = model.RunScheduled, now.Add(time.Hour), model.PendingNotDue
			case i%10 == 2:
				r.Status, r.PendingCode = model.RunWaiting, model.PendingDependencies
			case i%10 == 3:
				r.Trigger, r.Instant = model.TriggerCron, &now
			}
			batch = append(batch, store.NewJob{Job: j, Run: r})
		}
		res, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: batch, Now: now})
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err)
		}
	}
}

// fillForPlans stores 3000 jobs with a run each, and moves runs through every state: the
// planner sees tables the size of a small deployment.
func fillForPlans(t *testing.T, s *Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	_, _, err := s.RegisterWorker(ctx, &store.RegisterWorkerParams{ID: "w", Session: "s", Capacity: model.Capacity{Slots: 10000}, Now: now})
	require.NoError(t, err)
	// A fleet: the heartbeat of many workers must find each by primary key.
	_, err = s.pool.Exec(ctx, `INSERT INTO workers (id, session, labels, cap_cpu, cap_memory_mb, cap_gpu, cap_slots,
			state, registered_at, last_heartbeat, handlers, commands)
		SELECT 'fleet-' || i, 's', 'null', 1, 1024, 0, 4, 'active', $1, $1, '["noop"]', false
		FROM generate_series(1, 2000) AS i`, now)
	require.NoError(t, err)
	fillRuns(t, s, now, 3)
	var ls []*model.Lease
	for w := range 30 {
		got, err := storetest.Leases(s.LeaseRuns(ctx, &store.LeaseRunsParams{WorkerID: fmt.Sprintf("w%d", w), Max: 50, LeaseTTL: time.Minute, Now: now}))
		require.NoError(t, err)
		ls = append(ls, got...)
	}
	// Logs are written while the attempts run (by their lease holders).
	var chunks []model.LogChunk
	for _, l := range ls[:300] {
		for seq := range 10 {
			chunks = append(chunks, model.LogChunk{RunID: l.Run.ID, Attempt: 1, Seq: int64(seq + 1), Stream: model.Stdout, Data: []byte("line\n"), CreatedAt: now, Token: l.Token})
		}
	}
	refused, err := s.AppendLogs(ctx, &store.AppendLogsParams{Chunks: chunks})
	require.NoError(t, err)
	for _, e := range refused {
		require.NoError(t, e)
	}
	var cs []store.Completion
	for i, l := range ls[:1200] {
		st := model.AttemptSucceeded
		if i%20 == 0 {
			st = model.AttemptFailed
		}
		cs = append(cs, store.Completion{RunID: l.Run.ID, Token: l.Token, Status: st})
	}
	_, err = s.CompleteAttempts(ctx, &store.CompleteAttemptsParams{Completions: cs, Now: now})
	require.NoError(t, err)
	for _, table := range []string{"jobs", "runs", "attempts", "workers", "queues", "log_chunks"} {
		_, err := s.pool.Exec(ctx, "ANALYZE "+table)
		require.NoError(t, err)
	}
}

// TestLeasePlansNeverSort checks that the lease transactions' statements walk runs_queued
// and runs_due in order whatever the planner's costs make of the alternatives. Without
// leasePlannerSQL, costs that make random reads dear (random_page_cost 100 with a tiny
// effective_cache_size here; on a growing, never analyzed table the same kind of flip came
// from the estimates alone, see leasePlannerSQL) give a plan that reads every queued run of
// the queue and sorts it: the test first checks that this is so, so that it proves the
// setting and not the costs.
func TestLeasePlansNeverSort(t *testing.T) {
	s := openTest(t)
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fillRuns(t, s, now, 3)
	lp := &store.LeaseRunsParams{WorkerID: "w", Max: 100, Handlers: []string{"noop"}, Commands: true}
	filter, fargs := handlerFilter(lp, 7)
	ufilter, ufargs := handlerFilter(lp, 6)
	walk := "Index Scan using runs_queued"
	cases := []planCase{
		{"lease, nothing to place", fmt.Sprintf(leaseUnplacedSQL, ufilter), append([]any{"default", 100, "w", now, now}, ufargs...),
			[]string{walk, "Index Scan using runs_due"}, nil},
		{"lease candidates", fmt.Sprintf(candidatesSQL, filter), append([]any{"default", 8.0, int64(4096), 2, `{"zone": "eu"}`, 100}, fargs...),
			[]string{walk}, nil},
		{"queue due runs", promoteQueueSQL, []any{"default", now, 100}, []string{"Index Scan using runs_due"}, nil},
	}
	for i, c := range cases {
		c.forbid = []string{"Bitmap Heap Scan on runs"}
		func() {
			tx, err := s.pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { require.NoError(t, tx.Rollback(ctx)) }()
			for _, set := range []string{"SET LOCAL random_page_cost = 100", "SET LOCAL effective_cache_size = '8kB'"} {
				_, err = tx.Exec(ctx, set)
				require.NoError(t, err)
			}
			if i == 0 {
				plan := explain(t, tx.Conn(), "unset", c.sql, c.args...)
				require.NotContains(t, plan, walk, "these costs must make the plan sort, or the test proves nothing:\n%s", plan)
			}
			_, err = tx.Exec(ctx, leasePlannerSQL)
			require.NoError(t, err)
			checkPlan(t, tx.Conn(), i, c)
		}()
	}
}

// TestLeasedVersionsStayOnTheirPage: runs are inserted with room left on their pages
// (migration 0017), so that the version a lease writes can stay on its run's page, where
// PostgreSQL logs it without the unchanged columns and dirties no other page. In full pages
// every leased run's new version would move to another page.
func TestLeasedVersionsStayOnTheirPage(t *testing.T) {
	s := openTest(t)
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 500
	res, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: oneOffJobs(now, n), Now: now})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	pages := func() map[string]int { // run id: the page of its current version
		rows, err := s.pool.Query(ctx, `SELECT id, (ctid::text::point)[0]::int FROM runs`)
		require.NoError(t, err)
		defer rows.Close()
		m := map[string]int{}
		for rows.Next() {
			var id string
			var page int
			require.NoError(t, rows.Scan(&id, &page))
			m[id] = page
		}
		require.NoError(t, rows.Err())
		return m
	}
	before := pages()
	require.Len(t, before, n)
	leased, err := storetest.Leases(s.LeaseRuns(ctx, &store.LeaseRunsParams{WorkerID: "w", Max: n, LeaseTTL: time.Minute, Now: now,
		Handlers: []string{"noop"}}))
	require.NoError(t, err)
	require.Len(t, leased, n)
	after, stayed := pages(), 0
	for id, page := range after {
		if before[id] == page {
			stayed++
		}
	}
	pageCount := len(slices.Compact(slices.Sorted(maps.Values(before))))
	t.Logf("%d of %d leased runs kept their page (%d pages)", stayed, n, pageCount)
	require.GreaterOrEqual(t, stayed, n/5, "leases must find room on their runs' pages")
}

// oneOffJobs are n one-off jobs (anonymous, store.Anonymous) of the noop handler in the
// default queue, queued at now, job i with args {"n": i}.
func oneOffJobs(now time.Time, n int) []store.NewJob {
	out := make([]store.NewJob, n)
	for i := range out {
		j := &model.Job{ID: id.New(now), Namespace: model.DefaultNamespace,
			Spec:    model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Args: []byte(fmt.Sprintf(`{"n":%d}`, i))},
			Enabled: true, CreatedAt: now, UpdatedAt: now}
		j.Name = j.ID
		r := &model.Run{ID: id.New(now), JobID: j.ID, JobName: j.Name, Namespace: j.Namespace, Status: model.RunQueued,
			Queue: model.DefaultQueue, Trigger: model.TriggerSubmit, Args: j.Spec.Args, ScheduledFor: now, CreatedAt: now, MaxAttempts: 1}
		out[i] = store.NewJob{Job: j, Run: r}
	}
	return out
}
