package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/app"
)

// DefaultSeedPlans is the history `stint bench plans` seeds when --seed-finished is not
// given: the big store of issue 11.
const DefaultSeedPlans = 1000000

// plansWorkload: the store holds the seeded history (Config.SeedFinished) and N queued
// runs in the bench's queue, inserted through the API with the queue paused; then the hot
// statements of the PostgreSQL store are explained on it (app.ExplainPlans: EXPLAIN
// (ANALYZE, BUFFERS) of each generic plan, in a transaction that is rolled back), after an
// ANALYZE of the tables. Figures
// are each statement's execution time; the plans themselves are printed after them.
func plansWorkload(ctx context.Context, r *runner) error {
	if r.storeURL == "" {
		return errors.New("needs --store with a postgres:// URL (the plans are PostgreSQL's)")
	}
	n := r.cfg.N
	r.res.Params["queued"] = strconv.Itoa(n)
	if err := r.setPaused(ctx, true); err != nil {
		return err
	}
	if _, err := r.insert(ctx, n, func(int) apitype.JobSpec {
		return apitype.JobSpec{Handler: r.kind, Queue: r.queue}
	}); err != nil {
		return err
	}
	// Statistics as autovacuum would have them once it noticed the new runs (a tenth of
	// the table): the plans are the ones a server makes most of the time.
	if err := analyze(ctx, r.storeURL); err != nil {
		return err
	}
	batch := max(min(500, n/2), 1) // and as many again left for the placing path
	r.res.Params["lease and completion batch"] = strconv.Itoa(batch)
	plans, err := app.ExplainPlans(ctx, r.storeURL, r.queue, batch, time.Now())
	if err != nil {
		return err
	}
	// The explaining ran in a transaction it rolled back: every run is still queued.
	d, err := r.depth(ctx)
	if err != nil {
		return err
	}
	if d["queued"] != n || d["running"] != 0 {
		return fmt.Errorf("after explaining, queue %s holds %v, not the %d queued runs inserted", r.queue, d, n)
	}
	r.res.add("queued after explaining", float64(d["queued"]), "runs")
	for _, p := range plans {
		ms, ok := executionTime(p.Plan)
		if !ok {
			return fmt.Errorf("plan of %q has no execution time:\n%s", p.Name, p.Plan)
		}
		r.res.add(p.Name, ms, "ms")
		r.res.Plans = append(r.res.Plans, Plan{Name: p.Name, Plan: p.Plan, Reads: planReads(p.Plan)})
	}
	return nil
}

// analyze runs ANALYZE on the tables the plans read.
func analyze(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `ANALYZE jobs, runs, attempts, queues`); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

// Plan is a statement's plan, as EXPLAIN (ANALYZE, BUFFERS) printed it, and how it reads
// the tables (planReads).
type Plan struct {
	Name  string `json:"name"`
	Reads string `json:"reads"`
	Plan  string `json:"plan"`
}

var execTimeRe = regexp.MustCompile(`(?m)^\s*Execution Time: ([0-9.]+) ms`)

// executionTime is the "Execution Time" of an EXPLAIN ANALYZE output, in ms.
func executionTime(plan string) (float64, bool) {
	m := execTimeRe.FindStringSubmatch(plan)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

var (
	scanRe   = regexp.MustCompile(`(Seq Scan|Index Only Scan(?: Backward)?|Index Scan(?: Backward)?)(?: using (\S+))? on (\S+)(?: \S+)?\s+\(cost.*actual time=\S+ rows=(\d+) loops=(\d+)\)`)
	bitmapRe = regexp.MustCompile(`Bitmap Index Scan on (\S+)\s+\(cost.*actual time=\S+ rows=(\d+) loops=(\d+)\)`)
)

var removedRe = regexp.MustCompile(`^\s*Rows Removed by Filter: (\d+)`)

// planReads sums up how a plan reads tables: each scan node as "index (rows)" or "Seq Scan
// on table (rows)", rows being the rows it returned over all its loops, and the rows its
// filter removed when any did, in plan order; repeated nodes are listed once with their
// rows added. (EXPLAIN prints rows and rows removed per loop.)
func planReads(plan string) string {
	type reads struct{ rows, removed int }
	var order []string
	got := map[string]*reads{}
	cur, loops := "", 0 // the scan node the lines below belong to
	add := func(what string, rows, l int) {
		if got[what] == nil {
			order = append(order, what)
			got[what] = &reads{}
		}
		got[what].rows += rows * l
		cur, loops = what, l
	}
	for _, line := range strings.Split(plan, "\n") {
		if strings.Contains(line, "->") {
			cur = "" // another node
		}
		if m := bitmapRe.FindStringSubmatch(line); m != nil {
			r, _ := strconv.Atoi(m[2])
			l, _ := strconv.Atoi(m[3])
			add(m[1], r, l)
			continue
		}
		if m := scanRe.FindStringSubmatch(line); m != nil {
			r, _ := strconv.Atoi(m[4])
			l, _ := strconv.Atoi(m[5])
			what := m[2]
			if m[1] == "Seq Scan" {
				what = "Seq Scan on " + m[3]
			} else if strings.HasPrefix(m[1], "Index Only Scan") {
				what += " (index only)"
			}
			add(what, r, l)
			continue
		}
		if m := removedRe.FindStringSubmatch(line); m != nil && cur != "" {
			n, _ := strconv.Atoi(m[1])
			got[cur].removed += n * loops
		}
	}
	out := make([]string, len(order))
	for i, w := range order {
		out[i] = fmt.Sprintf("%s (%d rows)", w, got[w].rows)
		if r := got[w].removed; r > 0 {
			out[i] = fmt.Sprintf("%s (%d rows, %d more removed by its filter)", w, got[w].rows, r)
		}
	}
	return strings.Join(out, ", ")
}

// printPlans writes the plans after the figures.
func printPlans(w io.Writer, plans []Plan) {
	if len(plans) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, p := range plans {
		fmt.Fprintf(w, "== %s\nreads: %s\n%s\n\n", p.Name, p.Reads, p.Plan)
	}
}
