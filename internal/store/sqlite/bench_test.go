package sqlite_test

import (
	"fmt"
	"path/filepath"
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
func newJobBatch(n, seq int) []store.NewJob {
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
