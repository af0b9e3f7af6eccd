package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/storetest"
)

// Run with, for example:
//
//	STINT_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	    go test -run XXX -bench . -benchtime 40x ./internal/store/postgres/
//
// Each benchmark reports its throughput (jobs/s, runs/s) besides ns/op. "parallel" runs
// 2*GOMAXPROCS callers at once, as the engine's group committers and many workers do.

// benchJobs builds n no-op handler jobs, each with a queued first run.
func benchJobs(seq *atomic.Int64, n int, now time.Time) []store.NewJob {
	return benchJobsNamed(seq, n, now, true)
}

// benchJobsNamed is benchJobs with named jobs, or with unnamed ones, named by their id as
// the API names them: one-off jobs that store.Anonymous stores as their run alone.
func benchJobsNamed(seq *atomic.Int64, n int, now time.Time, named bool) []store.NewJob {
	out := make([]store.NewJob, n)
	for i := range out {
		j := &model.Job{
			ID: id.New(now), Namespace: model.DefaultNamespace, Name: fmt.Sprintf("bench-%09d", seq.Add(1)),
			Spec:    model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Retry: model.RetryPolicy{MaxAttempts: 3}},
			Enabled: true, CreatedAt: now, UpdatedAt: now,
		}
		if !named {
			j.Name = j.ID
		}
		r := &model.Run{
			ID: id.New(now), JobID: j.ID, JobName: j.Name, Namespace: j.Namespace,
			Status: model.RunQueued, Queue: j.Spec.Queue, Trigger: model.TriggerSubmit,
			ScheduledFor: now, CreatedAt: now, MaxAttempts: 3,
		}
		out[i] = store.NewJob{Job: j, Run: r}
	}
	return out
}

// createAll stores jobs and fails on any error, the batch's or an entry's.
func createAll(ctx context.Context, s store.Store, jobs []store.NewJob, now time.Time) error {
	res, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: jobs, Now: now})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// BenchmarkCreateJobs inserts batches of 1000 jobs, each with its first run: one
// CreateJobs call per iteration.
func BenchmarkCreateJobs(b *testing.B) {
	const batch = 1000
	ctx := context.Background()
	b.Run("sequential", func(b *testing.B) {
		s := openTest(b)
		var seq atomic.Int64
		now := time.Now()
		for b.Loop() {
			b.StopTimer()
			jobs := benchJobs(&seq, batch, now)
			b.StartTimer()
			if err := createAll(ctx, s, jobs, now); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(seq.Load())/b.Elapsed().Seconds(), "jobs/s")
	})
	b.Run("parallel", func(b *testing.B) {
		s := openTest(b)
		var seq atomic.Int64
		now := time.Now()
		b.SetParallelism(2)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := createAll(ctx, s, benchJobs(&seq, batch, now), now); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(seq.Load())/b.Elapsed().Seconds(), "jobs/s")
	})
}

// BenchmarkLeaseComplete leases batches of 500 runs and completes them (succeeded): one
// LeaseRuns and one CompleteAttempts call per iteration. The runs are inserted while the
// timer is stopped.
func BenchmarkLeaseComplete(b *testing.B) {
	const batch = 500
	ctx := context.Background()
	setup := func(b *testing.B) (step func() (int, error), fill func(runs int)) {
		s := openTest(b)
		var seq atomic.Int64
		now := time.Now()
		fill = func(runs int) {
			for runs > 0 {
				n := min(runs, 1000)
				if err := createAll(ctx, s, benchJobs(&seq, n, now), now); err != nil {
					b.Fatal(err)
				}
				runs -= n
			}
		}
		step = func() (int, error) {
			ls, err := storetest.Leases(s.LeaseRuns(ctx, &store.LeaseRunsParams{WorkerID: "w", Max: batch, LeaseTTL: time.Minute, Handlers: []string{"noop"}, Now: now}))
			if err != nil || len(ls) == 0 {
				return 0, err
			}
			cs := make([]store.Completion, len(ls))
			for i, l := range ls {
				cs[i] = store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded, ExitCode: new(int)}
			}
			res, err := s.CompleteAttempts(ctx, &store.CompleteAttemptsParams{Completions: cs, Now: now})
			if err != nil {
				return 0, err
			}
			for _, r := range res {
				if r.Err != nil {
					return 0, r.Err
				}
			}
			return len(ls), nil
		}
		return step, fill
	}
	b.Run("sequential", func(b *testing.B) {
		step, fill := setup(b)
		var processed int
		for b.Loop() {
			n, err := step()
			if err == nil && n == 0 { // ran dry: refill outside the timer
				b.StopTimer()
				fill(20 * batch)
				b.StartTimer()
				n, err = step()
			}
			if err != nil {
				b.Fatal(err)
			}
			processed += n
		}
		b.ReportMetric(float64(processed)/b.Elapsed().Seconds(), "runs/s")
	})
	b.Run("parallel", func(b *testing.B) {
		step, fill := setup(b)
		fill(b.N * batch)
		b.ResetTimer()
		var processed atomic.Int64
		b.SetParallelism(2)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n, err := step()
				if err == nil && n == 0 {
					err = errors.New("ran out of queued runs")
				}
				if err != nil {
					b.Error(err)
					return
				}
				processed.Add(int64(n))
			}
		})
		b.ReportMetric(float64(processed.Load())/b.Elapsed().Seconds(), "runs/s")
	})
}

// BenchmarkLeaseCompleteCPU leases 500 runs and completes them, as
// BenchmarkLeaseComplete/sequential does, and reports the CPU time each run costs: the
// benchmark process's own (go-us/run) and that of its PostgreSQL backends, found by their
// application_name (pg-us/run); and the WAL written meanwhile (wal-B/run, and by table
// with STINT_BENCH_WALINSPECT_URL, as BenchmarkCreateJobsCPU). On a busy machine the wall-clock rate swings by 2x from
// one run to the next while these stay within about 10%, so compare commits by them.
//
// "batch=N" leases and completes N unnamed runs a call instead: what a worker's small leases
// and completions cost a run (a worker with every slot busy leases as slots free).
func BenchmarkLeaseCompleteCPU(b *testing.B) {
	b.Run("named", func(b *testing.B) { leaseCompleteCPU(b, true, 500) })
	b.Run("unnamed", func(b *testing.B) { leaseCompleteCPU(b, false, 500) })
	for _, n := range []int{20, 100} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) { leaseCompleteCPU(b, false, n) })
	}
}

// leaseCompleteCPU is BenchmarkLeaseCompleteCPU over the runs of named jobs, or of unnamed
// one-off jobs, batch a call.
func leaseCompleteCPU(b *testing.B, named bool, batch int) {
	ctx := context.Background()
	app := fmt.Sprintf("cpubench%d", os.Getpid())
	s := openURL(b, newSchema(b)+"&application_name="+app)
	var seq atomic.Int64
	now := time.Now()
	fill := func(runs int) {
		for runs > 0 {
			n := min(runs, 1000)
			if err := createAll(ctx, s, benchJobsNamed(&seq, n, now, named), now); err != nil {
				b.Fatal(err)
			}
			runs -= n
		}
	}
	var pg, self time.Duration
	var wal int64
	walTables := map[string]int64{}
	inspect := os.Getenv("STINT_BENCH_WALINSPECT_URL")
	processed := 0
	for b.Loop() {
		b.StopTimer()
		fill(batch)
		pg0, self0, lsn0 := backendsCPU(b, s, app), selfCPU(), walLSN(b, s)
		b.StartTimer()
		ls, err := storetest.Leases(s.LeaseRuns(ctx, &store.LeaseRunsParams{WorkerID: "w", Max: batch, LeaseTTL: time.Minute, Handlers: []string{"noop"}, Now: now}))
		if err != nil || len(ls) != batch {
			b.Fatal(err, len(ls))
		}
		cs := make([]store.Completion, len(ls))
		for i, l := range ls {
			cs[i] = store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded, ExitCode: new(int)}
		}
		res, err := s.CompleteAttempts(ctx, &store.CompleteAttemptsParams{Completions: cs, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		b.StopTimer()
		pg += backendsCPU(b, s, app) - pg0
		self += selfCPU() - self0
		lsn1 := walLSN(b, s)
		wal += lsn1 - lsn0
		if inspect != "" {
			for t, n := range walByTable(b, s, inspect, lsn0, lsn1) {
				walTables[t] += n
			}
		}
		b.StartTimer()
		processed += len(ls)
	}
	b.ReportMetric(float64(processed)/b.Elapsed().Seconds(), "runs/s")
	b.ReportMetric(float64(pg.Microseconds())/float64(processed), "pg-us/run")
	b.ReportMetric(float64(self.Microseconds())/float64(processed), "go-us/run")
	b.ReportMetric(float64(wal)/float64(processed), "wal-B/run")
	for t, n := range walTables {
		b.ReportMetric(float64(n)/float64(processed), t+"-wal-B/run")
	}
}

// backendsCPU is the CPU time used so far by the PostgreSQL backends whose
// application_name is app (read from /proc: the database runs on this machine).
func backendsCPU(b *testing.B, s *Store, app string) time.Duration {
	rows, err := s.pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var total time.Duration
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		total += procCPU(pid)
	}
	return total
}

// procCPU is the user and system CPU time of process pid (0 once it is gone).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var u, s int64
	fmt.Sscan(f[11], &u)
	fmt.Sscan(f[12], &s)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCreateJobsCPU inserts batches of 1000 one-off jobs from 4 callers at once (two
// per core, as BenchmarkCreateJobs/parallel), and reports what a job costs: CPU of this
// process (go-us/job) and of its PostgreSQL backends (pg-us/job), WAL written while it ran
// (wal-B/job: pg_current_wal_lsn, the whole cluster's, so other sessions add to it) and the
// wall time of one batch (ms/batch). With STINT_BENCH_WALINSPECT_URL set to a database
// where the pg_walinspect extension is installed, the WAL records are also read back and
// split by the table they touch (jobs-wal-B/job, runs-wal-B/job: a table's heap and its
// indexes; the rest is commits and other tables), so that others' WAL is left out.
//
// Sub-benchmarks: "unnamed" are one-off jobs without a name (what POST /v1/jobs/batch
// submits without names: since issue 15 their runs alone, see store.Anonymous); "named"
// are named one-off jobs (a jobs row and a runs row each); "definition" are named jobs
// with no run, the jobs row alone.
func BenchmarkCreateJobsCPU(b *testing.B) {
	const batch, callers = 1000, 4
	shapes := []struct {
		name  string
		build func(seq *atomic.Int64, now time.Time) []store.NewJob
	}{
		{"unnamed", func(seq *atomic.Int64, now time.Time) []store.NewJob { return benchJobsNamed(seq, batch, now, false) }},
		{"named", func(seq *atomic.Int64, now time.Time) []store.NewJob { return benchJobs(seq, batch, now) }},
		{"definition", func(seq *atomic.Int64, now time.Time) []store.NewJob {
			jobs := benchJobs(seq, batch, now)
			for i := range jobs {
				jobs[i].Run = nil
			}
			return jobs
		}},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			ctx := context.Background()
			app := fmt.Sprintf("cpubench%d", os.Getpid())
			s := openURL(b, newSchema(b)+"&application_name="+app)
			var seq atomic.Int64
			now := time.Now()
			// Warm the pool's connections, the queue cache and the statement caches.
			if err := createAll(ctx, s, sh.build(&seq, now), now); err != nil {
				b.Fatal(err)
			}
			jobs0 := seq.Load()
			var wall, self time.Duration
			lsn0 := walLSN(b, s)
			pg0 := backendsCPU(b, s, app)
			for b.Loop() {
				b.StopTimer()
				work := make([][]store.NewJob, callers)
				for i := range work {
					work[i] = sh.build(&seq, now)
				}
				b.StartTimer()
				start, self0 := time.Now(), selfCPU()
				errs := make(chan error, callers)
				for _, w := range work {
					go func() { errs <- createAll(ctx, s, w, now) }()
				}
				for range work {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
				wall += time.Since(start)
				self += selfCPU() - self0
			}
			pg := backendsCPU(b, s, app) - pg0
			lsn1 := walLSN(b, s)
			n := float64(seq.Load() - jobs0)
			b.ReportMetric(n/wall.Seconds(), "jobs/s")
			b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "ms/batch")
			b.ReportMetric(float64(pg.Microseconds())/n, "pg-us/job")
			b.ReportMetric(float64(self.Microseconds())/n, "go-us/job")
			b.ReportMetric(float64(lsn1-lsn0)/n, "wal-B/job")
			if u := os.Getenv("STINT_BENCH_WALINSPECT_URL"); u != "" {
				for table, bytes := range walByTable(b, s, u, lsn0, lsn1) {
					b.ReportMetric(float64(bytes)/n, table+"-wal-B/job")
				}
			}
		})
	}
}

// walLSN is the current WAL insert position, in bytes.
func walLSN(b *testing.B, s *Store) int64 {
	var lsn int64
	if err := s.pool.QueryRow(context.Background(), `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn`).Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}

// walByTable reads the WAL records between positions lsn0 and lsn1 through pg_walinspect (in
// the database at inspectURL) and adds up the bytes of those whose first block is in s's
// jobs or runs table or one of their indexes, by table.
func walByTable(b *testing.B, s *Store, inspectURL string, lsn0, lsn1 int64) map[string]int64 {
	ctx := context.Background()
	rels := map[string]string{} // "spc/db/relfilenode" -> table
	rows, err := s.pool.Query(ctx, `SELECT t.relname, coalesce(c.reltablespace, 0), c.relfilenode,
			(SELECT oid FROM pg_database WHERE datname = current_database())
		FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = current_schema()
		LEFT JOIN pg_index i ON i.indrelid = t.oid
		JOIN pg_class c ON c.oid = t.oid OR c.oid = i.indexrelid
		WHERE t.relname IN ('jobs', 'runs')`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var (
			table    string
			spc      uint32
			node, db uint32
		)
		if err := rows.Scan(&table, &spc, &node, &db); err != nil {
			b.Fatal(err)
		}
		if spc == 0 {
			spc = 1663 // pg_default
		}
		rels[fmt.Sprintf("%d/%d/%d", spc, db, node)] = table
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	ins, err := pgx.Connect(ctx, inspectURL) // the WAL is the cluster's: any database reads it
	if err != nil {
		b.Fatal(err)
	}
	defer ins.Close(ctx)
	out := map[string]int64{}
	wr, err := ins.Query(ctx, `SELECT record_length, coalesce(substring(block_ref from 'rel ([0-9]+/[0-9]+/[0-9]+)'), '')
		FROM pg_get_wal_records_info('0/0'::pg_lsn + $1::numeric, '0/0'::pg_lsn + $2::numeric)`, lsn0, lsn1)
	if err != nil {
		b.Fatal(err)
	}
	for wr.Next() {
		var (
			n   int64
			rel string
		)
		if err := wr.Scan(&n, &rel); err != nil {
			b.Fatal(err)
		}
		if t, ok := rels[rel]; ok {
			out[t] += n
		}
	}
	if err := wr.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}
