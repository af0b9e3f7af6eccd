package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/metrics"
	"github.com/stint-dev/stint/internal/store/sqlite"
	"github.com/stint-dev/stint/internal/version"
)

// setupMetrics is setup wired as app wires a server: the engine observed by a Metrics, the
// store timed by it, and the API counting requests into it and serving it at /metrics.
func setupMetrics(t *testing.T, clk clock.Clock) *testBundle {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	sq, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "stint.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sq.Close() })
	m := metrics.New(version.Build{Version: "v9.9.9", Commit: "abc", GoVersion: "go1.26"})
	st := m.Store(sq)
	eng := engine.New(engine.Config{Store: st, Logger: log, Clock: clk, Observer: m})
	require.NoError(t, eng.Start(ctx))
	t.Cleanup(eng.Stop)
	a, err := New(Config{Engine: eng, Logger: log, Open: true, Metrics: m.Handler(eng, log), Requests: m.Request})
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return &testBundle{srv: srv, handler: a.Handler(), eng: eng, store: st}
}

// scrapeMetrics reads /metrics.
func scrapeMetrics(t *testing.T, b *testBundle) string {
	t.Helper()
	r := b.do(t, "GET", "/metrics", nil)
	require.Equal(t, http.StatusOK, r.status)
	return string(r.body)
}

// leaseOne leases exactly one run for workerID.
func leaseOne(t *testing.T, b *testBundle, workerID string) apitype.Lease {
	t.Helper()
	got := b.lease(t, workerID, 1)
	require.Len(t, got.Leases, 1)
	return got.Leases[0]
}

// driveOutcomes runs jobs to every outcome the counters tell apart, on clk: one succeeds
// 3 s late after 2 s, one fails and is retried then cancelled, one fails for good, and the
// attempt of a fourth is lost when its worker restarts. It returns the run ids.
func driveOutcomes(t *testing.T, b *testBundle, clk *clock.Fake) []string {
	t.Helper()
	b.register(t, "w1")
	var ids []string

	ok := b.createJob(t, `{"name": "ok", "command": ["true"]}`)
	clk.Advance(3 * time.Second)
	l := leaseOne(t, b, "w1")
	require.Equal(t, ok.Run.ID, l.RunID)
	clk.Advance(2 * time.Second)
	require.Empty(t, b.complete(t, apitype.Completion{RunID: l.RunID, Token: l.Token, Status: "succeeded", ExitCode: new(0)}).Error)
	ids = append(ids, l.RunID)

	retried := b.createJob(t, `{"name": "retried", "command": ["false"], "retry": {"max_attempts": 2, "initial_delay": "1h"}}`)
	l = leaseOne(t, b, "w1")
	require.Equal(t, retried.Run.ID, l.RunID)
	b.complete(t, apitype.Completion{RunID: l.RunID, Token: l.Token, Status: "failed", ExitCode: new(1)})
	require.Equal(t, "scheduled", b.getRun(t, l.RunID).Status, "retried after its backoff")
	require.Equal(t, http.StatusOK, b.do(t, "POST", "/v1/runs/"+l.RunID+"/cancel", nil).status)
	ids = append(ids, l.RunID)

	failed := b.createJob(t, `{"name": "failed", "command": ["false"]}`)
	l = leaseOne(t, b, "w1")
	require.Equal(t, failed.Run.ID, l.RunID)
	b.complete(t, apitype.Completion{RunID: l.RunID, Token: l.Token, Status: "failed", ExitCode: new(1)})
	ids = append(ids, l.RunID)

	lost := b.createJob(t, `{"name": "lost", "command": ["sleep", "60"]}`)
	l = leaseOne(t, b, "w1")
	require.Equal(t, lost.Run.ID, l.RunID)
	b.register(t, "w1") // a new process with the same id: its attempts are lost
	require.Equal(t, "queued", b.getRun(t, l.RunID).Status, "a disruption is retried")
	ids = append(ids, l.RunID)
	return ids
}

// TestMetricsCountOutcomes drives real outcomes through the API and checks what each
// changes in a scrape.
func TestMetricsCountOutcomes(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	b := setupMetrics(t, clk)
	before := scrapeMetrics(t, b)
	for _, want := range []string{
		`stint_runs_total{queue="default",status="succeeded"} 0`,
		`stint_leases_lost_total{cause="expired"} 0`,
		`stint_build_info{commit="abc",go_version="go1.26",version="v9.9.9"} 1`,
	} {
		require.Contains(t, before, want)
	}

	ids := driveOutcomes(t, b, clk)
	clk.Advance(10 * time.Second) // the lost run has been queued for 10 s
	// A path with an id and a made-up method: neither becomes a label value.
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", "/v1/nothing/"+ids[0], nil).status)
	req, err := http.NewRequest("BREW", b.srv.URL+"/v1/runs/"+ids[0], nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()

	body := scrapeMetrics(t, b)
	for _, want := range []string{
		`stint_runs_total{queue="default",status="succeeded"} 1`,
		`stint_runs_total{queue="default",status="failed"} 1`,
		`stint_runs_total{queue="default",status="cancelled"} 1`,
		// The failed attempt with one left, and the lost one.
		`stint_attempts_retried_total{queue="default"} 2`,
		`stint_leases_lost_total{cause="restarted"} 1`,
		`stint_leases_lost_total{cause="expired"} 0`,
		// Leased 3 s after it was due, then the others at once.
		`stint_schedule_lateness_seconds_count{queue="default"} 4`,
		`stint_schedule_lateness_seconds_sum{queue="default"} 3`,
		`stint_schedule_lateness_seconds_bucket{queue="default",le="2.5"} 3`,
		// From start to end: 2 s for the one that succeeded, 0 for the one that failed.
		`stint_run_duration_seconds_sum{queue="default",status="succeeded"} 2`,
		`stint_run_duration_seconds_count{queue="default",status="failed"} 1`,
		`stint_queue_depth{queue="default",status="queued"} 1`,
		`stint_queue_oldest_age_seconds{queue="default"} 10`,
		`stint_workers{state="active"} 1`,
		`stint_worker_capacity{kind="cpu"} 4`,
		`stint_worker_capacity{kind="slots"} 4`,
		`stint_worker_used{kind="slots"} 0`,
		`stint_store_duration_seconds_count{op="LeaseRuns"}`,
		`stint_store_duration_seconds_count{op="CompleteAttempts"}`,
		`stint_http_requests_total{code="200",method="POST",route="/v1/workers/{id}/lease"} 4`,
		`stint_http_requests_total{code="201",method="POST",route="/v1/jobs"} 4`,
		`stint_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`stint_http_request_duration_seconds_count{method="POST",route="/v1/attempts/complete"} 3`,
		`stint_scrape_errors 0`,
	} {
		require.Contains(t, body, want)
	}
	// The mux matched no route for the made-up method (405): neither it nor the path is kept.
	require.Contains(t, body, `stint_http_requests_total{code="405",method="other",route="unmatched"} 1`)

	// Labels are bounded: no id of a run, job or worker session, and no raw path.
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "stint_") {
			continue
		}
		for _, id := range ids {
			require.NotContains(t, line, id)
		}
		require.NotContains(t, line, "w1", "no per-worker series")
		require.NotContains(t, line, "BREW")
	}
}

// TestDeployedMetricsExist checks that every stint_ metric the Grafana dashboard and the
// alert rules under deploy/ name is in a real scrape, so they cannot drift apart. With
// promtool on the PATH (CI installs it) the scrape also passes `promtool check metrics`.
func TestDeployedMetricsExist(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	b := setupMetrics(t, clk)
	driveOutcomes(t, b, clk)
	body := scrapeMetrics(t, b)

	scraped := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(name, " ")
			scraped[name] = true
			if kind == "histogram" {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					scraped[name+suffix] = true
				}
			}
		}
	}
	names := regexp.MustCompile(`\bstint_[a-z0-9_]+`)
	for _, file := range []string{"../../deploy/grafana/stint.json", "../../deploy/prometheus/alerts.yml"} {
		raw, err := readFile(file)
		require.NoError(t, err)
		used := names.FindAllString(raw, -1)
		require.NotEmpty(t, used, file)
		for _, n := range used {
			require.True(t, scraped[n], "%s names %s, which no scrape has", file, n)
		}
	}
	checkWithPromtool(t, body)
}
