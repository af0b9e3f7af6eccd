package sqlite_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
	"github.com/stint-dev/stint/internal/store/storetest"
)

var benchT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func openBench(b *testing.B, sync string) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(b.Context(), sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: sync})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// newJobBatch builds n no-op jobs, each with one queued run, as the drain workload submits.
func newJobBatch(n, seq int) []store.NewJob { return newJobBatchNamed(n, seq, true) }

// newJobBatchNamed is newJobBatch with named jobs, or with unnamed ones, named by their id
// as the API names them: one-off jobs that store.Anonymous stores as their run alone.
func newJobBatchNamed(n, seq int, named bool) []store.NewJob {
	batch := make([]store.NewJob, n)
	for i := range batch {
		// Ids carry their creation time as a submission would: about 100 per millisecond.
		at := benchT0.Add(time.Duration(seq*n+i) * 10 * time.Microsecond)
		jid := id.New(at)
		j := &model.Job{
			ID: jid, Namespace: model.DefaultNamespace, Name: fmt.Sprintf("job-%d-%d", seq, i),
			Spec:    model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Retry: model.RetryPolicy{MaxAttempts: 3}},
			Enabled: true, CreatedAt: benchT0, UpdatedAt: benchT0,
		}
		if !named {
			j.Name = jid
		}
		r := &model.Run{
			ID: id.New(at), JobID: jid, JobName: j.Name, Namespace: j.Namespace, Status: model.RunQueued,
			Queue: model.DefaultQueue, Trigger: model.TriggerSubmit, ScheduledFor: benchT0, CreatedAt: benchT0, MaxAttempts: 3,
		}
		batch[i] = store.NewJob{Job: j, Run: r}
	}
	return batch
}

// BenchmarkCreateJobs inserts batches of 1000 jobs, each with its first run, in one call.
func BenchmarkCreateJobs(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sync="+sync, func(b *testing.B) {
			s := openBench(b, sync)
			const batch = 1000
			seq := 0
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				jobs := newJobBatch(batch, seq)
				seq++
				b.StartTimer()
				res, err := s.CreateJobs(b.Context(), &store.CreateJobsParams{Jobs: jobs, Now: benchT0})
				if err != nil || res[0].Err != nil {
					b.Fatal(err, res[0].Err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkLeaseComplete leases batches of 500 runs and completes them succeeded: the store
// side of draining a backlog.
func BenchmarkLeaseComplete(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sync="+sync, func(b *testing.B) {
			s := openBench(b, sync)
			const batch = 500
			ctx := b.Context()
			seq := 0
			fill := func() {
				for range 60 {
					_, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: newJobBatch(1000, seq), Now: benchT0})
					require.NoError(b, err)
					seq++
				}
			}
			fill()
			now := benchT0
			cs := make([]store.Completion, 0, batch)
			b.ResetTimer()
			for b.Loop() {
				now = now.Add(time.Millisecond)
				ls, err := storetest.Leases(s.LeaseRuns(ctx, &store.LeaseRunsParams{WorkerID: "w", Max: batch, LeaseTTL: time.Minute, Now: now}))
				require.NoError(b, err)
				if len(ls) < batch {
					b.StopTimer()
					fill()
					b.StartTimer()
				}
				cs = cs[:0]
				for _, l := range ls {
					cs = append(cs, store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded, ExitCode: new(int)})
				}
				res, err := s.CompleteAttempts(ctx, &store.CompleteAttemptsParams{Completions: cs, Now: now})
				require.NoError(b, err)
				for _, r := range res {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "runs/s")
		})
	}
}

// BenchmarkCreateJobsCPU inserts batches of 1000 one-off jobs from 4 callers at once (the
// writer takes them one transaction at a time) and reports what a job costs: CPU of the
// process (us/job: SQLite runs inside it), bytes it wrote (written-B/job: the WAL, and the
// checkpoints that copy it to the database file) and the wall time of the 4 batches
// (ms/batch). Sub-benchmarks as postgres' BenchmarkCreateJobsCPU: "unnamed" one-off jobs
// (their runs alone, store.Anonymous), "named" ones (a jobs row and a runs row each),
// "definition" (named jobs with no run: the jobs row alone).
func BenchmarkCreateJobsCPU(b *testing.B) {
	const batch, callers = 1000, 4
	shapes := []struct {
		name  string
		build func(seq int) []store.NewJob
	}{
		{"unnamed", func(seq int) []store.NewJob { return newJobBatchNamed(batch, seq, false) }},
		{"named", func(seq int) []store.NewJob { return newJobBatchNamed(batch, seq, true) }},
		{"definition", func(seq int) []store.NewJob {
			jobs := newJobBatchNamed(batch, seq, true)
			for i := range jobs {
				jobs[i].Run = nil
			}
			return jobs
		}},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			s := openBench(b, "FULL")
			ctx := b.Context()
			// Warm the statement caches.
			_, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: sh.build(0), Now: benchT0})
			require.NoError(b, err)
			seq := 1
			var wall, cpu time.Duration
			var written int64
			for b.Loop() {
				b.StopTimer()
				work := make([][]store.NewJob, callers)
				for i := range work {
					work[i] = sh.build(seq)
					seq++
				}
				b.StartTimer()
				start, cpu0, w0 := time.Now(), selfCPU(), selfWritten(b)
				errs := make(chan error, callers)
				for _, w := range work {
					go func() {
						res, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: w, Now: benchT0})
						if err == nil && res[0].Err != nil {
							err = res[0].Err
						}
						errs <- err
					}()
				}
				for range work {
					require.NoError(b, <-errs)
				}
				wall += time.Since(start)
				cpu += selfCPU() - cpu0
				written += selfWritten(b) - w0
			}
			n := float64(b.N * callers * batch)
			b.ReportMetric(n/wall.Seconds(), "jobs/s")
			b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "ms/batch")
			b.ReportMetric(float64(cpu.Microseconds())/n, "us/job")
			b.ReportMetric(float64(written)/n, "written-B/job")
		})
	}
}

// BenchmarkLeaseCompleteCPU leases 500 runs and completes them succeeded, as
// BenchmarkLeaseComplete does, and reports the CPU each run costs (us/run), for the runs
// of named jobs and of unnamed one-off jobs.
func BenchmarkLeaseCompleteCPU(b *testing.B) {
	for _, named := range []bool{true, false} {
		name := "unnamed"
		if named {
			name = "named"
		}
		b.Run(name, func(b *testing.B) {
			s := openBench(b, "FULL")
			const batch = 500
			ctx := b.Context()
			seq := 0
			now := benchT0
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				_, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: newJobBatchNamed(batch, seq, named), Now: benchT0})
				require.NoError(b, err)
				seq++
				now = now.Add(time.Millisecond)
				b.StartTimer()
				cpu0 := selfCPU()
				ls, err := storetest.Leases(s.LeaseRuns(ctx, &store.LeaseRunsParams{WorkerID: "w", Max: batch, LeaseTTL: time.Minute, Now: now}))
				require.NoError(b, err)
				require.Len(b, ls, batch)
				cs := make([]store.Completion, 0, batch)
				for _, l := range ls {
					cs = append(cs, store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded, ExitCode: new(int)})
				}
				res, err := s.CompleteAttempts(ctx, &store.CompleteAttemptsParams{Completions: cs, Now: now})
				require.NoError(b, err)
				for _, r := range res {
					require.NoError(b, r.Err)
				}
				cpu += selfCPU() - cpu0
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*batch), "us/run")
		})
	}
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// selfWritten is how many bytes this process has written so far (wchar of /proc/self/io).
func selfWritten(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/io")
	require.NoError(b, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(b, err)
			return n
		}
	}
	b.Fatal("no wchar in /proc/self/io")
	return 0
}
