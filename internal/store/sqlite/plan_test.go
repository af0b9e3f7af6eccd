package sqlite

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// TestQueryPlans checks that every dispatch query walks the index meant for it, so that
// nothing on the hot path scans all runs.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "plan.db"), Synchronous: "OFF"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	cases := []struct {
		name  string
		sql   string
		args  int
		want  []string // substrings the plan must contain
		avoid []string
	}{
		{"lease candidates", candidatesSQL(0, false), 7, []string{"INDEX runs_queued (queue=?)", "INDEX runs_due (queue=? AND scheduled_for<?)"}, nil},
		{"lease candidates, commands", candidatesSQL(0, true), 7, []string{"INDEX runs_queued (queue=?)", "INDEX runs_due (queue=? AND scheduled_for<?)"}, nil},
		{"lease candidates, handlers", candidatesSQL(2, true), 9, []string{"INDEX runs_queued (queue=?)", "INDEX runs_due (queue=? AND scheduled_for<?)"}, nil},
		{"claim", claimSQL, 6, []string{"INTEGER PRIMARY KEY (rowid=?)"}, nil},
		{"booked on a worker", workerBookedSQL, 1, []string{"INDEX runs_placed (worker_id=?)"}, nil},
		{"dependants met", meetSQL, 4, []string{"run_deps_upstream (upstream_run_id=?)"}, nil},
		{"dependants skipped", skipSQL, 8, []string{"run_deps_upstream (upstream_run_id=?)"}, nil},
		{"booked", bookedSQL, 0, []string{"INDEX runs_placed"}, nil},
		{"promote due", promoteDueSQL, 2, []string{"INTEGER PRIMARY KEY (rowid=?)", "COVERING INDEX runs_scheduled (scheduled_for<?)"}, []string{"TEMP B-TREE"}},
		{"next due", nextDueSQL, 1, []string{"runs_scheduled (scheduled_for>?)"}, []string{"TEMP B-TREE"}},
		{"next lease expiry", nextLeaseExpirySQL, 0, []string{"INDEX runs_running (queue=?)"}, []string{"TEMP B-TREE"}},
		{"expired", expiredSQL, 2, []string{"USING INDEX runs_running (queue=? AND lease_expires_at<?)"}, nil},
		{"worker runs", workerRunsSQL, 1, []string{"USING INDEX runs_worker (worker_id=?)"}, nil},
		{"worker usage", workerUsageSQL, 1, []string{"USING INDEX runs_worker (worker_id=?)"}, nil},
		{"running in queue", runningCountSQL, 1, []string{"INDEX runs_running (queue=?)"}, nil},
		{"oldest queued", oldestQueuedSQL, 0, []string{"INDEX runs_queued (queue=? AND priority<?)", "INTEGER PRIMARY KEY (rowid=?)"},
			[]string{"SCAN runs", "TEMP B-TREE FOR ORDER BY"}},
		{"depth queued", depthQueuedSQL, 1, []string{"runs_queued (queue=?)"}, nil},
		{"depth scheduled", depthScheduledSQL, 1, []string{"runs_scheduled"}, nil},
		{"depth waiting", depthWaitingSQL, 1, []string{"runs_rare_status (status=?)"}, nil},
		{"cancel job pending", cancelJobPendingSQL, 3, []string{"runs_job (job_id=?)"}, nil},
		{"cancel job running", cancelJobRunningSQL, 2, []string{"runs_job (job_id=?)"}, nil},
		{"finish batch", finishBatchSQL(4, 0), 17, []string{"sqlite_autoindex_runs_1 (id=?)"}, []string{"SCAN runs"}},
		{"finish batch, status and error shared", finishBatchSQL(4, 0b1100), 11, []string{"sqlite_autoindex_runs_1 (id=?)"}, []string{"SCAN runs"}},
		{"insert runs, shared columns", runsInsert.sql(4, 0b111_1111_1111_1111_1111_1111_1000), 4*3 + 24, nil, []string{"SCAN runs"}},
		{"anonymous run", anonymousRunSQL, 1, []string{"runs_job (job_id=?)"}, []string{"SCAN runs", "TEMP B-TREE"}},
		{"spec of a job", jobSpecSQL, 1, []string{"runs_job (job_id=?)"}, []string{"SCAN"}},
		{"materialize jobs", materializeJobsSQL, 1, []string{"runs_job (job_id=?)"}, []string{"SCAN runs"}},
		{"materialize runs", materializeRunsSQL, 1, []string{"runs_job (job_id=?)"}, []string{"SCAN runs"}},
		{"alert cron", alertCronSQL, 2, []string{"jobs_next_fire", "INDEX runs_cron_instant (job_id=? AND instant<?)", "INTEGER PRIMARY KEY (rowid=?)"}, []string{"SCAN runs"}},
		{"run by cron instant", runByCronSQL, 2, []string{"INDEX runs_cron_instant (job_id=? AND instant=?)"}, nil},
		{"fired instants", firedInstantsSQL, 3, []string{"INDEX runs_cron_instant (job_id=? AND instant>? AND instant<?)"}, []string{"TEMP B-TREE"}},
		{"drop runs made ahead", dropAheadSQL, 2, []string{"INDEX runs_cron_instant (job_id=? AND instant>?)"}, nil},
		{"finish run", `UPDATE runs SET status = ? WHERE id = ? AND status = 'running' AND lease_token = ?`, 3, []string{"sqlite_autoindex_runs_1 (id=?)"}, nil},
		{"list jobs", `SELECT id FROM jobs WHERE (name, namespace) > (?, ?) ORDER BY name, namespace LIMIT ?`, 3, []string{"jobs_name"}, []string{"TEMP B-TREE"}},
		{"list jobs in namespace", `SELECT id FROM jobs WHERE namespace = ? AND name > ? ORDER BY name LIMIT ?`, 3, []string{"jobs_namespace_name (namespace=? AND name>?)"}, []string{"TEMP B-TREE"}},
		{"next fire", `SELECT id FROM jobs WHERE next_fire_at IS NOT NULL AND enabled = 1 ORDER BY next_fire_at LIMIT 1`, 0, []string{"jobs_next_fire"}, []string{"TEMP B-TREE"}},
	}
	for _, l := range []struct {
		p     store.ListRunsParams
		want  string
		avoid []string
	}{
		{store.ListRunsParams{}, "sqlite_autoindex_runs_1", []string{"TEMP B-TREE"}},
		{store.ListRunsParams{Cursor: "x"}, "sqlite_autoindex_runs_1 (id<?)", []string{"TEMP B-TREE"}},
		{store.ListRunsParams{Status: model.RunSucceeded, Cursor: "x"}, "sqlite_autoindex_runs_1 (id<?)", []string{"TEMP B-TREE"}},
		{store.ListRunsParams{Queue: "q"}, "sqlite_autoindex_runs_1", []string{"TEMP B-TREE"}},
		{store.ListRunsParams{JobID: "j", Status: model.RunQueued, Cursor: "x"}, "runs_job (job_id=? AND id<?)", []string{"TEMP B-TREE"}},
		{store.ListRunsParams{Status: model.RunFailed, Cursor: "x"}, "runs_rare_status (status=? AND id<?)", []string{"TEMP B-TREE"}},
		{store.ListRunsParams{Status: model.RunWaiting, Queue: "q"}, "runs_rare_status (status=?)", []string{"TEMP B-TREE"}},
		{store.ListRunsParams{Status: model.RunScheduled}, "runs_rare_status (status=?)", []string{"TEMP B-TREE"}},
		{store.ListRunsParams{Status: model.RunScheduled, Queue: "q"}, "runs_scheduled", nil},
		{store.ListRunsParams{Status: model.RunQueued, Queue: "q"}, "runs_queued (queue=?)", nil},
		{store.ListRunsParams{Status: model.RunQueued}, "runs_queued", nil},
		{store.ListRunsParams{Status: model.RunRunning}, "runs_running", nil},
		{store.ListRunsParams{Status: model.RunRunning, Queue: "q"}, "runs_running (queue=?)", nil},
		{store.ListRunsParams{WorkerID: "w", Queue: "q"}, "runs_worker (worker_id=?)", nil},
	} {
		q, args, ok := listRunsSQL(&l.p, 10)
		require.True(t, ok)
		cases = append(cases, struct {
			name  string
			sql   string
			args  int
			want  []string
			avoid []string
		}{fmt.Sprintf("list runs %+v", l.p), q, len(args), []string{l.want}, l.avoid})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := make([]any, c.args)
			for i := range args {
				args[i] = "x"
			}
			rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+c.sql, args...)
			require.NoError(t, err)
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, notused int
				var detail string
				require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
				plan = append(plan, detail)
			}
			require.NoError(t, rows.Err())
			text := strings.Join(plan, "\n")
			for _, w := range c.want {
				require.Contains(t, text, w, "plan:\n%s", text)
			}
			for _, a := range c.avoid {
				require.NotContains(t, text, a, "plan:\n%s", text)
			}
			require.NotRegexp(t, `(?m)^SCAN runs$`, text, "a full scan of runs:\n%s", text)
		})
	}
}
