package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/version"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fakeSource struct {
	queues  []*model.Queue
	oldest  map[string]time.Time
	workers []*model.Worker
	cron    model.CronStats
	err     error
}

func (f *fakeSource) ListQueues(context.Context) ([]*model.Queue, error) { return f.queues, f.err }
func (f *fakeSource) OldestQueued(context.Context) (map[string]time.Time, error) {
	return f.oldest, f.err
}
func (f *fakeSource) Workers(context.Context) ([]*model.Worker, error) { return f.workers, nil }
func (f *fakeSource) CronStats() model.CronStats                       { return f.cron }
func (f *fakeSource) Clock() clock.Clock                               { return clock.NewFake(t0) }

func scrape(t *testing.T, m *Metrics, src Source) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(src, slog.New(slog.DiscardHandler)).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	b, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	return string(b)
}

func TestScrapeReadsTheStore(t *testing.T) {
	t.Parallel()
	body := scrape(t, New(version.Get()), &fakeSource{
		queues: []*model.Queue{
			{Name: "reports", Paused: true, Depth: map[model.RunStatus]int{model.RunQueued: 3, model.RunRunning: 1}},
			{Name: "idle", Depth: map[model.RunStatus]int{}},
		},
		oldest: map[string]time.Time{"reports": t0.Add(-90 * time.Second)},
		workers: []*model.Worker{
			{ID: "w1", State: model.WorkerActive, Running: 2,
				Capacity: model.Capacity{CPU: 4, MemoryMB: 1024, GPU: 1, Slots: 8}, Used: model.Capacity{CPU: 1.5, MemoryMB: 512, Slots: 2}},
			{ID: "w2", State: model.WorkerDraining, Capacity: model.Capacity{CPU: 2, Slots: 2}},
			{ID: "w3", State: model.WorkerLost, Capacity: model.Capacity{CPU: 64, Slots: 64}, Used: model.Capacity{Slots: 1}},
		},
		cron: model.CronStats{Runs: 40, Missed: 13, Dropped: 12},
	})
	for _, want := range []string{
		`stint_queue_depth{queue="reports",status="queued"} 3`,
		`stint_queue_depth{queue="reports",status="running"} 1`,
		`stint_queue_depth{queue="reports",status="waiting"} 0`,
		`stint_queue_paused{queue="reports"} 1`,
		`stint_queue_oldest_age_seconds{queue="reports"} 90`,
		`stint_queue_oldest_age_seconds{queue="idle"} 0`,
		`stint_workers{state="active"} 1`,
		`stint_workers{state="draining"} 1`,
		`stint_workers{state="lost"} 1`,
		`stint_workers{state="drained"} 0`, // a series from the first scrape, before any worker leaves
		// The lost worker's capacity is not counted.
		`stint_worker_capacity{kind="cpu"} 6`,
		`stint_worker_capacity{kind="memory_mb"} 1024`,
		`stint_worker_capacity{kind="gpu"} 1`,
		`stint_worker_capacity{kind="slots"} 10`,
		`stint_worker_used{kind="cpu"} 1.5`,
		`stint_worker_used{kind="slots"} 2`,
		`stint_scrape_errors 0`,
		`stint_cron_runs_total 40`,
		`stint_cron_instants_missed_total 13`,
		`stint_cron_instants_dropped_total 12`,
		`stint_build_info{`,
		`go_goroutines`,
	} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, "w1", "no per-worker series")
}

func TestScrapeReportsStoreErrors(t *testing.T) {
	t.Parallel()
	body := scrape(t, New(version.Get()), &fakeSource{err: errors.New("database is down")})
	require.Contains(t, body, `stint_scrape_errors 1`)
}

func TestHandlerTwice(t *testing.T) {
	t.Parallel()
	m := New(version.Get())
	src := &fakeSource{}
	require.Contains(t, scrape(t, m, src), "stint_scrape_errors 0")
	require.Contains(t, scrape(t, m, src), "stint_scrape_errors 0", "a second handler registers nothing twice")
}

func TestLostCountsOnlyTheLostAttempts(t *testing.T) {
	t.Parallel()
	m := New(version.Get())
	m.LeasesExpired([]*model.Run{
		{Queue: "q", Status: model.RunQueued, Error: scheduler.LeaseExpired},  // retried
		{Queue: "q", Status: model.RunFailed, Error: scheduler.LeaseExpired},  // no attempt left
		{Queue: "q", Status: model.RunQueued, PendingCode: model.PendingNone}, // admitted after them
	})
	m.WorkerRestarted([]*model.Run{{Queue: "q", Status: model.RunQueued, Error: scheduler.WorkerRestarted}})
	m.Ended([]*model.Run{{Queue: "q", Status: model.RunFailed}, {Queue: "q", Status: model.RunQueued}})
	body := scrape(t, m, &fakeSource{})
	for _, want := range []string{
		`stint_leases_lost_total{cause="expired"} 2`,
		`stint_leases_lost_total{cause="restarted"} 1`,
		`stint_attempts_retried_total{queue="q"} 2`,
		`stint_runs_total{queue="q",status="failed"} 1`,
	} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, `status="queued"`, "only final states are counted")
}

func TestLatenessCountsFromTheCronInstant(t *testing.T) {
	t.Parallel()
	m := New(version.Get())
	instant := t0.Add(-time.Minute)
	m.Leased([]*model.Lease{
		// A misfired instant whose run was due later: late from the instant.
		{Run: &model.Run{Queue: "cron", Attempt: 1, Instant: &instant, ScheduledFor: t0.Add(-time.Second)}},
		// Its retry: late from the end of its backoff.
		{Run: &model.Run{Queue: "retry", Attempt: 2, Instant: &instant, ScheduledFor: t0.Add(-2 * time.Second)}},
		// Leased before it was due (a clock a little ahead): not early, 0.
		{Run: &model.Run{Queue: "early", Attempt: 1, ScheduledFor: t0.Add(time.Second)}},
	}, t0)
	body := scrape(t, m, &fakeSource{})
	for _, want := range []string{
		`stint_schedule_lateness_seconds_sum{queue="cron"} 60`,
		`stint_schedule_lateness_seconds_sum{queue="retry"} 2`,
		`stint_schedule_lateness_seconds_sum{queue="early"} 0`,
	} {
		require.Contains(t, body, want)
	}
}

func TestRequestLabelsAreBounded(t *testing.T) {
	t.Parallel()
	m := New(version.Get())
	m.Request("/v1/runs/{id}", "GET", 200, time.Millisecond)
	m.Request("", "PROPFIND", 405, time.Millisecond)
	body := scrape(t, m, &fakeSource{})
	require.Contains(t, body, `stint_http_requests_total{code="200",method="GET",route="/v1/runs/{id}"} 1`)
	require.Contains(t, body, `stint_http_requests_total{code="405",method="other",route="unmatched"} 1`)
}
