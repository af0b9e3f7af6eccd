package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
)

// seedStats is what seedStore wrote and how long it took.
type seedStats struct {
	jobs, runs, attempts int
	byStatus             map[model.RunStatus]int
	wrote                time.Duration // the COPYs
	vacuumed             time.Duration // VACUUM (ANALYZE) afterwards
}

// seedSource seeds the random draws of the history (outcomes, workers, durations): every
// bench seeds the same history, so that runs of one configuration compare, and report the
// same "seeded" counts.
const seedSource = 1

// seedChunk is how many runs go in one COPY of runs (and one of their attempts).
const seedChunk = 20000

// The columns seedStore copies: every column of the tables (migrations 0001 to 0009), so
// that nothing is left to a default the store would not have written.
var (
	seedJobCols = []string{"id", "namespace", "name", "spec", "queue", "handler", "req_cpu", "req_memory_mb",
		"req_gpu", "req_labels", "enabled", "next_fire_at", "idempotency_key", "request_hash", "created_at", "updated_at"}
	seedRunCols = []string{"id", "job_id", "job_name", "namespace", "status", "pending_code", "pending_reason",
		"queue", "priority", "trigger_kind", "args", "handler", "req_cpu", "req_memory_mb", "req_gpu", "req_labels",
		"scheduled_for", "created_at", "started_at", "finished_at", "attempt", "max_attempts", "idempotency_key",
		"cancel_requested", "error", "worker_id", "lease_token", "lease_expires_at", "attempt_started_at",
		"deps_pending", "has_dependants", "disruptions"}
	seedAttemptCols = []string{"run_id", "n", "worker_id", "status", "exit_code", "error", "started_at", "finished_at"}
)

// seedStore writes runs finished runs (seedGen's history, made at now) and their jobs,
// queues and attempts into the PostgreSQL database at url, whose schema the server has
// migrated, with COPY; then it runs VACUUM (ANALYZE) on the tables it wrote, as
// autovacuum would have on a store that grew to that size, so that the bench measures a
// store in its usual state rather than one that autovacuum is about to visit.
func seedStore(ctx context.Context, url string, runs int, now time.Time) (*seedStats, error) {
	g, err := newSeedGen(runs, now, seedSource)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("seed: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st := &seedStats{byStatus: map[model.RunStatus]int{}}
	began := time.Now()

	queues := make([]string, 0, seedQueues)
	for _, j := range g.jobs[:min(len(g.jobs), seedQueues)] {
		queues = append(queues, j.job.Spec.Queue)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO queues (name, created_at, updated_at)
		SELECT unnest($1::text[]), $2, $2 ON CONFLICT DO NOTHING`, queues, g.start); err != nil {
		return nil, fmt.Errorf("seed: queues: %w", err)
	}
	jobRows := make([][]any, len(g.jobs))
	for i, sj := range g.jobs {
		j := sj.job
		jobRows[i] = []any{j.ID, j.Namespace, j.Name, string(sj.spec), j.Spec.Queue, j.Spec.Handler, 0.0, int64(0),
			int32(0), nil, j.Enabled, j.NextFireAt, nil, j.RequestHash, j.CreatedAt, j.UpdatedAt}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"jobs"}, seedJobCols, pgx.CopyFromRows(jobRows)); err != nil {
		return nil, fmt.Errorf("seed: copy jobs: %w", err)
	}
	st.jobs = len(jobRows)

	// One goroutine makes the next chunk while this one copies the last.
	chunks := make(chan []seedRun, 1)
	genCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		defer close(chunks)
		for {
			c := g.next(seedChunk)
			if len(c) == 0 {
				return
			}
			select {
			case chunks <- c:
			case <-genCtx.Done():
				return
			}
		}
	}()
	for c := range chunks {
		runRows := make([][]any, len(c))
		var attRows [][]any
		for i, sr := range c {
			r := sr.run
			runRows[i] = []any{r.ID, r.JobID, r.JobName, r.Namespace, string(r.Status), string(r.PendingCode), r.PendingReason,
				r.Queue, int32(r.Priority), string(r.Trigger), nil, "noop", 0.0, int64(0), int32(0), nil,
				r.ScheduledFor, r.CreatedAt, r.StartedAt, r.FinishedAt, int32(r.Attempt), int32(r.MaxAttempts), nil,
				r.CancelRequested, r.Error, r.WorkerID, nil, nil, sr.attemptStartedAt,
				int32(0), false, int32(r.Disruptions)}
			st.byStatus[r.Status]++
			for _, a := range sr.attempts {
				attRows = append(attRows, []any{a.RunID, int32(a.N), a.WorkerID, string(a.Status), nil, a.Error, a.StartedAt, a.FinishedAt})
			}
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"runs"}, seedRunCols, pgx.CopyFromRows(runRows)); err != nil {
			return nil, fmt.Errorf("seed: copy runs: %w", err)
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"attempts"}, seedAttemptCols, pgx.CopyFromRows(attRows)); err != nil {
			return nil, fmt.Errorf("seed: copy attempts: %w", err)
		}
		st.runs += len(runRows)
		st.attempts += len(attRows)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st.wrote = time.Since(began)
	began = time.Now()
	if _, err := conn.Exec(ctx, `VACUUM (ANALYZE) jobs, runs, attempts, queues`); err != nil {
		return nil, fmt.Errorf("seed: vacuum: %w", err)
	}
	st.vacuumed = time.Since(began)
	return st, nil
}
