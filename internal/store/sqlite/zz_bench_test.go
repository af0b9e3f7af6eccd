package sqlite_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

// BenchmarkZLease/ZComplete time each half separately, sync OFF (CPU only).
func BenchmarkZSplit(b *testing.B) {
	benchSplit(b, openBench(b, "OFF"))
}

func benchSplit(b *testing.B, s *sqlite.Store) {
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
	var tl, tc time.Duration
	n := 0
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		t0 := time.Now()
		ls, err := s.LeaseRuns(ctx, &store.LeaseRunsParams{WorkerID: "w", Max: batch, LeaseTTL: time.Minute, Now: now})
		require.NoError(b, err)
		tl += time.Since(t0)
		if len(ls) < batch {
			b.StopTimer()
			fill()
			b.StartTimer()
		}
		cs = cs[:0]
		for _, l := range ls {
			cs = append(cs, store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded, ExitCode: new(int)})
		}
		t1 := time.Now()
		res, err := s.CompleteAttempts(ctx, &store.CompleteAttemptsParams{Completions: cs, Now: now})
		require.NoError(b, err)
		tc += time.Since(t1)
		n += len(ls)
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
	b.ReportMetric(float64(tl.Microseconds())/float64(n), "lease-us/run")
	b.ReportMetric(float64(tc.Microseconds())/float64(n), "complete-us/run")
}

func BenchmarkZSplitDrop(b *testing.B) {
	for _, idx := range []string{"runs_worker", "runs_rare_status", "runs_job", "runs_cron_instant", "runs_idempotency"} {
		b.Run(idx, func(b *testing.B) {
			s := openBench(b, "OFF")
			_, err := sqlite.SqliteExecForTest(s, "DROP INDEX "+idx)
			require.NoError(b, err)
			benchSplit(b, s)
		})
	}
}
