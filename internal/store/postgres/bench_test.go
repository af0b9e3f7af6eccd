package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// benchJobs builds n no-op handler jobs, each with a queued first run, named from seq.
func benchJobs(seq *atomic.Int64, n int, now time.Time) []store.NewJob {
	out := make([]store.NewJob, n)
	for i := range out {
		k := seq.Add(1)
		j := &model.Job{
			ID: id.New(now), Namespace: model.DefaultNamespace, Name: fmt.Sprintf("bench-%09d", k),
			Spec: model.JobSpec{
				Handler: "noop", Queue: model.DefaultQueue,
				Retry: model.RetryPolicy{MaxAttempts: 3},
			},
			Enabled: true, CreatedAt: now, UpdatedAt: now,
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

func createAll(b *testing.B, s store.Store, jobs []store.NewJob, now time.Time) {
	b.Helper()
	res, err := s.CreateJobs(context.Background(), &store.CreateJobsParams{Jobs: jobs, Now: now})
	require.NoError(b, err)
	for _, r := range res {
		require.NoError(b, r.Err)
	}
}

// BenchmarkCreateJobs inserts batches of 1000 jobs, each with its first run: one
// CreateJobs call per iteration (sequential), and with GOMAXPROCS*2 callers at once
// (parallel, as the engine's group committers do).
func BenchmarkCreateJobs(b *testing.B) {
	const batch = 1000
	for _, mode := range []string{"sequential", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			s := open(b)
			var seq atomic.Int64
			now := time.Now()
			b.ResetTimer()
			if mode == "sequential" {
				for b.Loop() {
					b.StopTimer()
					jobs := benchJobs(&seq, batch, now)
					b.StartTimer()
					createAll(b, s, jobs, now)
				}
			} else {
				b.SetParallelism(2)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						createAll(b, s, benchJobs(&seq, batch, now), now)
					}
				})
			}
			b.ReportMetric(float64(seq.Load())/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkLeaseComplete leases batches of 500 runs and completes them (succeeded): one
// lease and one completion call per iteration. The runs are inserted before the timer.
func BenchmarkLeaseComplete(b *testing.B) {
	const batch = 500
	for _, mode := range []string{"sequential", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			var seq atomic.Int64
			now := time.Now()
			// Enough runs for the whole benchmark: b.N is not known up front with b.Loop,
			// so refill when the queue runs dry (outside the timer).
			refill := func() {
				for range 20 {
					createAll(b, s, benchJobs(&seq, 1000, now), now)
				}
			}
			var processed atomic.Int64
			step := func() bool {
				ls, err := s.LeaseRuns(ctx, &store.LeaseRunsParams{WorkerID: "w", Max: batch, LeaseTTL: time.Minute, Handlers: []string{"noop"}, Now: now})
				require.NoError(b, err)
				if len(ls) == 0 {
					return false
				}
				cs := make([]store.Completion, len(ls))
				for i, l := range ls {
					cs[i] = store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded, ExitCode: new(int)}
				}
				res, err := s.CompleteAttempts(ctx, &store.CompleteAttemptsParams{Completions: cs, Now: now})
				require.NoError(b, err)
				for _, r := range res {
					require.NoError(b, r.Err)
				}
				processed.Add(int64(len(ls)))
				return true
			}
			refill()
			b.ResetTimer()
			if mode == "sequential" {
				for b.Loop() {
					if !step() {
						b.StopTimer()
						refill()
						b.StartTimer()
						step()
					}
				}
			} else {
				b.StopTimer()
				for range 10 {
					refill()
				}
				b.StartTimer()
				b.SetParallelism(2)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						step()
					}
				})
			}
			b.ReportMetric(float64(processed.Load())/b.Elapsed().Seconds(), "runs/s")
		})
	}
}
