package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
)

// Statement is what PostgreSQL's pg_stat_statements counted of one statement of the store's
// database over a workload's measured window.
type Statement struct {
	Query   string  `json:"query"` // normalized, whitespace collapsed
	Calls   int64   `json:"calls"`
	TotalMS float64 `json:"total_ms"` // time the backends spent executing it, waits included
	MeanMS  float64 `json:"mean_ms"`
	Rows    int64   `json:"rows"`
	// Share is its part of the total time of all the database's statements in the window.
	Share float64 `json:"share"`
}

// topStatements is how many statements a result lists, by total time.
const topStatements = 10

// statementsOff says why a result has no statements: the reason is printed as a parameter.
const statementsOff = `off: pg_stat_statements is not in shared_preload_libraries (docs/benchmarks.md, "Where PostgreSQL's time goes")`

// resetStatements clears pg_stat_statements' counts for conn's database, creating the
// extension there first. It returns false when the module is not loaded by the server (the
// view then fails), which only means the result has no statements.
func resetStatements(ctx context.Context, conn *pgx.Conn) bool {
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return false
	}
	_, err := conn.Exec(ctx, `SELECT pg_stat_statements_reset(0,
		(SELECT oid FROM pg_database WHERE datname = current_database()), 0)`)
	return err == nil
}

// readStatements returns the statements of conn's database that took the most time since
// resetStatements, leaving out the bench's own reads of pg_stat_activity and of the view.
func readStatements(ctx context.Context, conn *pgx.Conn) ([]Statement, error) {
	rows, err := conn.Query(ctx, `WITH s AS (
		SELECT query, calls, total_exec_time, rows FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND query NOT LIKE '%pg_stat_%'
	)
	SELECT query, calls, total_exec_time, rows,
		total_exec_time / nullif(sum(total_exec_time) OVER (), 0)
	FROM s ORDER BY total_exec_time DESC LIMIT $1`, topStatements)
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	defer rows.Close()
	var out []Statement
	for rows.Next() {
		var s Statement
		var share *float64
		if err := rows.Scan(&s.Query, &s.Calls, &s.TotalMS, &s.Rows, &share); err != nil {
			return nil, fmt.Errorf("read pg_stat_statements: %w", err)
		}
		s.Query = strings.Join(strings.Fields(s.Query), " ")
		if s.Calls > 0 {
			s.MeanMS = s.TotalMS / float64(s.Calls)
		}
		if share != nil {
			s.Share = *share
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	return out, nil
}

// printStatements writes the statements after the figures, each query cut to one line.
func printStatements(w io.Writer, ss []Statement) {
	if len(ss) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "share\ttotal ms\tcalls\tmean ms\trows\t\tstatement (pg_stat_statements, the window)")
	for _, s := range ss {
		q := s.Query
		if len(q) > 100 {
			q = q[:97] + "..."
		}
		fmt.Fprintf(tw, "%.1f%%\t%.0f\t%d\t%.3f\t%d\t\t%s\n", 100*s.Share, s.TotalMS, s.Calls, s.MeanMS, s.Rows, q)
	}
	tw.Flush()
}
