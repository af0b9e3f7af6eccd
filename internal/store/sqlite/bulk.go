package sqlite

import (
	"bytes"
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

// maxDynStmts bounds the statements prepareLater keeps: batch statements come in shapes
// (row buckets, shared columns) of which a workload uses a handful; past the bound a rare
// shape is prepared for each use.
const maxDynStmts = 1024

// prepareLater prepares on the writer the statements that transactions asked for.
func (s *writeStmts) prepareLater(ctx context.Context, qs [][2]string) {
	for _, kq := range qs {
		s.mu.Lock()
		_, ok := s.dyn[kq[0]]
		full := len(s.dyn) >= maxDynStmts
		s.mu.Unlock()
		if ok || full {
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

// finishCols are the values of one row of finishBatchSQL; status and error are bound once
// when every row of a chunk has the same (the common case: all succeeded, no error).
var finishCols = &multiInsert{name: "finish", cols: []string{"vid", "vtok", "vstatus", "verr"}}

// finishBatchSQL ends a chunk of runs: the rows of v (run id, lease token, status, error),
// then finished_at. shared marks the columns bound once for the chunk (see multiInsert).
func finishBatchSQL(rows int, shared colMask) string {
	var sel strings.Builder
	perRow := 0
	for j := range finishCols.cols {
		if j > 0 {
			sel.WriteString(", ")
		}
		if shared&(1<<j) != 0 {
			sel.WriteString("?")
			continue
		}
		perRow++
		fmt.Fprintf(&sel, "column%d", perRow)
	}
	return `WITH v (vid, vtok, vstatus, verr) AS (SELECT ` + sel.String() + ` FROM (VALUES ` + valuesSQL(rows, perRow) + `))
		UPDATE runs INDEXED BY sqlite_autoindex_runs_1
		SET status = v.vstatus, finished_at = ?, error = v.verr, pending_code = '', pending_reason = ''
		FROM v WHERE runs.id = v.vid AND runs.status = 'running' AND runs.lease_token = v.vtok
		RETURNING ` + runCols
}

// multiInsert is a multi-row INSERT of whole rows.
//
// A column whose value is the same in every row of a chunk is bound once, as a parameter
// of the SELECT list, instead of once per row. In a typical batch only the ids differ
// (same queue, handler, spec, times, state...), and binding a value through database/sql
// and the driver costs about as much as SQLite's own work for it: this takes the
// parameters of a batch of jobs with their runs from 39 per job to about 5.
type multiInsert struct {
	name       string   // statement cache key
	table      string   // table
	cols       []string // columns in row order; cols[0] is never NULL in a real row
	onConflict string   // appended: what to do with a row whose key is taken
}

var (
	jobsInsert = &multiInsert{name: "jobs", table: "jobs", cols: []string{"id", "namespace", "name", "spec", "queue",
		"handler", "req_cpu", "req_memory_mb", "req_gpu", "req_labels", "enabled", "next_fire_at", "idempotency_key",
		"request_hash", "created_at", "updated_at"}, onConflict: "ON CONFLICT DO NOTHING"}
	runsInsert = &multiInsert{name: "runs", table: "runs", cols: []string{"id", "job_id", "job_name", "namespace",
		"status", "pending_code", "pending_reason", "queue", "priority", "trigger_kind", "args", "handler", "req_cpu",
		"req_memory_mb", "req_gpu", "req_labels", "scheduled_for", "created_at", "started_at", "finished_at", "attempt",
		"max_attempts", "idempotency_key", "cancel_requested", "error", "instant", "spec"}, onConflict: "ON CONFLICT DO NOTHING"}
	attemptsInsert = &multiInsert{name: "attempts", table: "attempts", cols: []string{"run_id", "n", "worker_id",
		"status", "exit_code", "error", "started_at", "finished_at"}}
)

// colMask has bit j set when column j is bound once for all rows.
type colMask uint64

// sharedCols returns the columns (other than the first, the key that marks padding rows)
// whose value is the same in all rows of args (rows of k values each).
func sharedCols(args []any, k int) colMask {
	var m colMask
	n := len(args) / k
	for j := 1; j < k; j++ {
		v := args[j]
		same := true
		for r := 1; r < n && same; r++ {
			same = sameValue(v, args[r*k+j])
		}
		if same {
			m |= 1 << j
		}
	}
	return m
}

// sameValue reports whether two bound values are equal (and of one type).
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case int:
		y, ok := b.(int)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	}
	return false
}

// sql returns the statement for rows rows (padding included) with the shared columns bound
// once: INSERT INTO t (cols) SELECT <? for a shared column, columnN for the others> FROM
// (VALUES <the others, row by row>) WHERE column1 IS NOT NULL.
func (m *multiInsert) sql(rows int, shared colMask) string {
	var sel strings.Builder
	perRow := 0
	for j := range m.cols {
		if j > 0 {
			sel.WriteString(", ")
		}
		if shared&(1<<j) != 0 {
			sel.WriteString("?")
			continue
		}
		perRow++
		fmt.Fprintf(&sel, "column%d", perRow)
	}
	return `INSERT INTO ` + m.table + ` (` + strings.Join(m.cols, ", ") + `)
		SELECT ` + sel.String() + ` FROM (VALUES ` + valuesSQL(rows, perRow) + `) WHERE column1 IS NOT NULL
		` + m.onConflict
}

// args lays out the values of rows (k each) for sql: the shared columns' values once, then
// the other columns row by row, padded with NULL rows up to padRows.
func (m *multiInsert) args(dst, rows []any, shared colMask, padRows int) []any {
	k := len(m.cols)
	for j := range k {
		if shared&(1<<j) != 0 {
			dst = append(dst, rows[j])
		}
	}
	n := len(rows) / k
	perRow := 0
	for r := range n {
		for j := range k {
			if shared&(1<<j) == 0 {
				dst = append(dst, rows[r*k+j])
				if r == 0 {
					perRow++
				}
			}
		}
	}
	for range (padRows - n) * perRow {
		dst = append(dst, nil)
	}
	return dst
}
