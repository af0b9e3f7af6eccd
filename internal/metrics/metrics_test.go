package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
)

type fakeSource struct {
	queues  []*model.Queue
	workers []*model.Worker
	cron    model.CronStats
	err     error
}

func (f *fakeSource) ListQueues(context.Context) ([]*model.Queue, error) { return f.queues, f.err }
func (f *fakeSource) Workers(context.Context) ([]*model.Worker, error)   { return f.workers, nil }
func (f *fakeSource) CronStats() model.CronStats                         { return f.cron }

func scrape(t *testing.T, src Source) string {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler(src, slog.New(slog.DiscardHandler)).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	b, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	return string(b)
}

func TestMetricsReadTheStore(t *testing.T) {
	t.Parallel()
	body := scrape(t, &fakeSource{
		queues: []*model.Queue{{Name: "reports", Paused: true, Depth: map[model.RunStatus]int{model.RunQueued: 3, model.RunRunning: 1}}},
		workers: []*model.Worker{
			{ID: "w1", State: model.WorkerActive, Running: 2},
			{ID: "w2", State: model.WorkerLost},
		},
		cron: model.CronStats{Runs: 40, Missed: 13, Dropped: 12},
	})
	for _, want := range []string{
		`stint_runs{queue="reports",status="queued"} 3`,
		`stint_runs{queue="reports",status="running"} 1`,
		`stint_queue_paused{queue="reports"} 1`,
		`stint_workers{state="active"} 1`,
		`stint_workers{state="lost"} 1`,
		`stint_worker_running_attempts{worker="w1"} 2`,
		`stint_scrape_errors 0`,
		`stint_cron_runs_total 40`,
		`stint_cron_missed_instants_total 13`,
		`stint_cron_dropped_instants_total 12`,
		`go_goroutines`,
	} {
		require.Contains(t, body, want)
	}
}

func TestMetricsReportStoreErrors(t *testing.T) {
	t.Parallel()
	body := scrape(t, &fakeSource{err: errors.New("database is down")})
	require.Contains(t, body, `stint_scrape_errors 1`)
}
