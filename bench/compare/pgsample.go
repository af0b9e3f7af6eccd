package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// activitySampler reads pg_stat_activity of one database at a fixed period and counts,
// per statement and wait event, how often a backend was seen running it: a sampling
// profile of where the database's time goes, for a server without pg_stat_statements
// (which needs a restart to load). It also reads the database's commit count and the
// cluster's WAL counters (pg_stat_wal, every database's) at the start and the end.
type activitySampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	counts  map[[2]string]int
	samples int
	errs    int
	began   time.Time
	before  pgCounters
	after   pgCounters
	pool    *pgxpool.Pool
	db      string
}

type pgCounters struct {
	commits, walRecords, walBytes, walSyncs int64
}

// sqlcName finds the name sqlc puts at the start of its statements ("-- name: JobGetAvailable :many").
var sqlcName = regexp.MustCompile(`--\s*name:\s*(\w+)`)

func statementLabel(q string) string {
	if m := sqlcName.FindStringSubmatch(q); m != nil {
		return m[1]
	}
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 70 {
		q = q[:70] + "…"
	}
	return q
}

func startActivitySampler(ctx context.Context, pool *pgxpool.Pool, db string, every time.Duration) *activitySampler {
	ctx, cancel := context.WithCancel(ctx)
	a := &activitySampler{cancel: cancel, done: make(chan struct{}), counts: map[[2]string]int{}, began: time.Now(), pool: pool, db: db}
	a.before, _ = readCounters(ctx, pool, db)
	go func() {
		defer close(a.done)
		conn, err := pool.Acquire(ctx)
		if err != nil {
			a.errs++
			return
		}
		defer conn.Release()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rows, err := conn.Query(ctx, `SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type || ':' || wait_event, 'on CPU') ELSE state END, query
				FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()
				AND state IN ('active', 'idle in transaction')`, db)
			if err != nil {
				a.errs++
				continue
			}
			for rows.Next() {
				var wait, q string
				if err := rows.Scan(&wait, &q); err != nil {
					a.errs++
					break
				}
				a.counts[[2]string{statementLabel(q), wait}]++
			}
			rows.Close()
			a.samples++
		}
	}()
	return a
}

func readCounters(ctx context.Context, pool *pgxpool.Pool, db string) (pgCounters, error) {
	var c pgCounters
	err := pool.QueryRow(ctx, `SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = $1),
		wal_records, wal_bytes::bigint, wal_sync FROM pg_stat_wal`, db).Scan(&c.commits, &c.walRecords, &c.walBytes, &c.walSyncs)
	return c, err
}

// stop ends the sampling and writes the profile to w.
func (a *activitySampler) stop(w io.Writer) {
	a.cancel()
	<-a.done
	window := time.Since(a.began)
	// Backends report their statistics when idle, at most once a second: wait for them.
	time.Sleep(1500 * time.Millisecond)
	a.after, _ = readCounters(context.Background(), a.pool, a.db)
	type row struct {
		stmt, wait string
		n          int
	}
	var rows []row
	for k, n := range a.counts {
		rows = append(rows, row{k[0], k[1], n})
	}
	slices.SortFunc(rows, func(x, y row) int { return cmp.Compare(y.n, x.n) })
	fmt.Fprintf(w, "pg_stat_activity of %s: %d samples over %s (%d errors); backends seen per sample, by statement and wait event:\n",
		a.db, a.samples, window.Round(time.Millisecond), a.errs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  backends\tstatement\twait\n")
	for _, r := range rows[:min(len(rows), 20)] {
		fmt.Fprintf(tw, "  %.2f\t%s\t%s\n", float64(r.n)/float64(max(a.samples, 1)), r.stmt, r.wait)
	}
	tw.Flush()
	fmt.Fprintf(w, "commits in %s: %d; cluster WAL (all databases): %d records, %d bytes, %d syncs\n",
		a.db, a.after.commits-a.before.commits, a.after.walRecords-a.before.walRecords,
		a.after.walBytes-a.before.walBytes, a.after.walSyncs-a.before.walSyncs)
}
