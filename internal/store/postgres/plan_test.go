package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

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

	lp := &store.LeaseRunsParams{WorkerID: "w", Max: 100, Handlers: []string{"noop"}, Commands: true}
	filter, fargs := handlerFilter(lp, 6)
	qfilter, qargs := handlerFilter(lp, 1)
	listRuns := func(p store.ListRunsParams) (string, []any) { return listRunsSQL(&p, 101) }
	listJobs := func(p store.ListJobsParams) (string, []any) { return listJobsSQL(&p, 101) }
	ids := []string{id.New(now), id.New(now)}

	type tc struct {
		name string
		sql  string
		args []any
		want []string // each must appear in the plan
	}
	// A count over a large share of the table may scan it.
	allowSeq := map[string]bool{"depth of a queue": true}
	cases := []tc{
		{"lease", fmt.Sprintf(leaseSQL, filter), append([]any{"default", 100, "w", now, now}, fargs...), []string{"runs_queued", "runs_pkey", "jobs_pkey"}},
		{"lease queues", fmt.Sprintf(leaseQueuesSQL, qfilter), qargs, []string{"Index Scan Backward using runs_queued"}},
		{"queue running count", countRunningSQL, []any{"default"}, []string{"runs_running_queue"}},
		{"promote", promoteSQL, []any{now, 100}, []string{"runs_scheduled", "runs_pkey"}},
		{"next due", nextDueSQL, nil, []string{"runs_scheduled"}},
		{"next lease expiry", nextExpirySQL, nil, []string{"runs_lease_expiry"}},
		{"complete", endSQL, []any{ids, ids, ids, []*int32{nil, nil}, ids, ids, []*time.Time{nil, nil}, ids, ids, now}, []string{"runs_pkey"}},
		{"heartbeat", heartbeatSQL, []any{"w", now, ids, ids, now}, []string{"runs_pkey"}},
		{"rescue", fmt.Sprintf(lockForEndSQL, policyOf(0), expiredWhere, " SKIP LOCKED"), []any{now, 100}, []string{"runs_lease_expiry", "runs_pkey", "jobs_pkey"}},
		{"completion lock", fmt.Sprintf(lockForEndSQL, policyOf(2), `r.id = ANY($1)`, ""), []any{ids, ids}, []string{"runs_pkey"}},
		{"worker runs", fmt.Sprintf(lockForEndSQL, policyOf(0), workerRunsWhere, ""), []any{"w"}, []string{"runs_worker"}},
		{"worker usage", workerSQL + ` WHERE w.id = $1`, []any{"w"}, []string{"runs_worker"}},
		{"depth of a queue", depthOneSQL, []any{"default"}, []string{"runs_running_queue", "runs_scheduled", "runs_rare_status"}},
		{"cancel by job", `WITH t AS (SELECT r.id FROM runs r WHERE r.job_id = $3::text AND ` + cancelActive + ` ORDER BY r.id FOR UPDATE)
			UPDATE runs r SET ` + cancelSet + ` FROM t WHERE r.id = t.id AND ` + cancelActive + ` RETURNING ` + runCols,
			[]any{now, "x", "j"}, []string{"runs_job", "runs_pkey"}},
		{"get job", `SELECT ` + jobCols + ` FROM jobs WHERE id = $1 OR (namespace = $2 AND name = $1) ORDER BY id = $1 DESC LIMIT 1`,
			[]any{"a", "default"}, []string{"jobs_pkey", "BitmapOr"}},
		{"run keys", `SELECT idempotency_key FROM runs WHERE idempotency_key = ANY($1)`, []any{ids}, []string{"runs_idempotency"}},
		{"cron instants", `SELECT ` + runCols + ` FROM runs r WHERE r.trigger_kind = 'cron'
			AND (r.job_id, r.scheduled_for) IN (SELECT * FROM unnest($1::text[], $2::timestamptz[]))`,
			[]any{ids, []time.Time{now, now}}, []string{"runs_cron_instant"}},
		{"get run", `SELECT ` + runCols + `, a.n FROM runs r LEFT JOIN attempts a ON a.run_id = r.id WHERE r.id = $1 ORDER BY a.n`,
			[]any{"r"}, []string{"runs_pkey", "attempts_pkey"}},
		{"read logs", `SELECT run_id, attempt, seq, stream, data, created_at FROM log_chunks
			WHERE run_id = $1 AND attempt = $2 AND seq > $3 ORDER BY seq LIMIT $4`, []any{"r", 1, 0, 10}, []string{"log_chunks_pkey"}},
	}
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
		cases = append(cases, tc{c.name, q, args, []string{c.want}})
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
		cases = append(cases, tc{c.name, q, args, []string{c.want}})
	}

	for i, c := range cases {
		plan := explain(t, conn.Conn(), fmt.Sprintf("plan_%d", i), c.sql, c.args...)
		t.Logf("%s:\n%s", c.name, plan)
		for _, w := range c.want {
			require.Contains(t, plan, w, "%s:\n%s", c.name, plan)
		}
		if !allowSeq[c.name] {
			require.NotContains(t, plan, "Seq Scan on runs", "%s:\n%s", c.name, plan)
		}
		require.NotContains(t, plan, "Seq Scan on jobs", "%s:\n%s", c.name, plan)
	}
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

// fillForPlans stores 3000 jobs with a run each, and moves runs through every state: the
// planner sees tables the size of a small deployment.
func fillForPlans(t *testing.T, s *Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	_, _, err := s.RegisterWorker(ctx, &store.RegisterWorkerParams{ID: "w", Session: "s", Capacity: model.Capacity{Slots: 10000}, Now: now})
	require.NoError(t, err)
	for b := range 3 {
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
				r.Trigger = model.TriggerCron
			}
			batch = append(batch, store.NewJob{Job: j, Run: r})
		}
		res, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: batch, Now: now})
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err)
		}
	}
	var ls []*model.Lease
	for w := range 30 {
		got, err := s.LeaseRuns(ctx, &store.LeaseRunsParams{WorkerID: fmt.Sprintf("w%d", w), Max: 50, LeaseTTL: time.Minute, Now: now})
		require.NoError(t, err)
		ls = append(ls, got...)
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
	var chunks []model.LogChunk
	for _, l := range ls[:300] {
		for seq := range 10 {
			chunks = append(chunks, model.LogChunk{RunID: l.Run.ID, Attempt: 1, Seq: int64(seq + 1), Stream: model.Stdout, Data: []byte("line\n"), CreatedAt: now})
		}
	}
	require.NoError(t, s.AppendLogs(ctx, chunks))
	for _, table := range []string{"jobs", "runs", "attempts", "workers", "queues", "log_chunks"} {
		_, err := s.pool.Exec(ctx, "ANALYZE "+table)
		require.NoError(t, err)
	}
}
