package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Set-based statements take a batch of rows as one VALUES list. To keep the number of
// prepared statements small, a batch is cut into chunks of at most maxChunk rows and each
// chunk is padded with NULL rows up to a power of two; the statements ignore NULL rows.

// maxChunk is the most rows one set-based statement carries (8 columns * 512 rows stays
// far below SQLite's 32766 variables).
const maxChunk = 512

// bucket returns the padded row count for n rows (1 <= n <= maxChunk).
func bucket(n int) int {
	b := 1
	for b < n {
		b <<= 1
	}
	return b
}

// valuesSQL returns "(?, ?), (?, ?), ..." for n rows of k columns.
func valuesSQL(n, k int) string {
	row := "(?" + strings.Repeat(", ?", k-1) + ")"
	return row + strings.Repeat(", "+row, n-1)
}

// chunks calls fn for each [lo, hi) slice of n items, at most maxChunk long.
func chunks(n int, fn func(lo, hi int) error) error {
	for lo := 0; lo < n; lo += maxChunk {
		if err := fn(lo, min(lo+maxChunk, n)); err != nil {
			return err
		}
	}
	return nil
}

// padded returns args extended with NULLs to rows*k values.
func padded(args []any, rows, k int) []any {
	for len(args) < rows*k {
		args = append(args, nil)
	}
	return args
}

// batch returns the statement named name for a bucket of rows, bound to the transaction.
// The writer's one connection is busy with the transaction, so a statement not prepared
// yet is prepared on the transaction for this use, and on the writer (for reuse) once the
// transaction is over.
func (t *wtx) batch(name string, rows int, build func(rows int) string) (*sql.Stmt, error) {
	key := fmt.Sprintf("%s/%d", name, rows)
	t.ws.mu.Lock()
	st, ok := t.ws.dyn[key]
	t.ws.mu.Unlock()
	if ok {
		return t.stmt(st), nil
	}
	q := build(rows)
	st, err := t.tx.PrepareContext(t.ctx, q)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", key, err)
	}
	t.later = append(t.later, [2]string{key, q})
	return st, nil
}

// prepareLater prepares on the writer the statements that transactions asked for.
func (s *writeStmts) prepareLater(ctx context.Context, qs [][2]string) {
	for _, kq := range qs {
		s.mu.Lock()
		_, ok := s.dyn[kq[0]]
		s.mu.Unlock()
		if ok {
			continue
		}
		st, err := s.db.PrepareContext(ctx, kq[1])
		if err != nil {
			continue // the next transaction that needs it prepares it again
		}
		s.mu.Lock()
		if _, ok := s.dyn[kq[0]]; ok {
			_ = st.Close()
		} else {
			s.dyn[kq[0]] = st
		}
		s.mu.Unlock()
	}
}

// Builders of the set-based statements.

func finishBatchSQL(rows int) string {
	return `WITH v (vid, vtok, vstatus, verr) AS (VALUES ` + valuesSQL(rows, 4) + `)
		UPDATE runs INDEXED BY sqlite_autoindex_runs_1
		SET status = v.vstatus, finished_at = ?, error = v.verr, pending_code = '', pending_reason = ''
		FROM v WHERE runs.id = v.vid AND runs.status = 'running' AND runs.lease_token = v.vtok
		RETURNING ` + runCols
}

func insertAttemptsSQL(rows int) string {
	return `INSERT INTO attempts (run_id, n, worker_id, status, exit_code, error, started_at, finished_at)
		SELECT * FROM (VALUES ` + valuesSQL(rows, 8) + `) WHERE column1 IS NOT NULL`
}

const jobInsertCols = 15

func insertJobsSQL(rows int) string {
	return `INSERT INTO jobs (id, namespace, name, spec, queue, handler, req_cpu, req_memory_mb, req_gpu,
		enabled, next_fire_at, idempotency_key, request_hash, created_at, updated_at)
		SELECT * FROM (VALUES ` + valuesSQL(rows, jobInsertCols) + `) WHERE column1 IS NOT NULL
		ON CONFLICT DO NOTHING`
}

const runInsertCols = 24

func insertRunsSQL(rows int) string {
	return `INSERT INTO runs (id, job_id, job_name, namespace, status, pending_code, pending_reason, queue, priority,
		trigger_kind, args, handler, req_cpu, req_memory_mb, req_gpu, scheduled_for, created_at, started_at, finished_at,
		attempt, max_attempts, idempotency_key, cancel_requested, error)
		SELECT * FROM (VALUES ` + valuesSQL(rows, runInsertCols) + `) WHERE column1 IS NOT NULL
		ON CONFLICT DO NOTHING`
}
