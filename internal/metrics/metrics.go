// Package metrics exposes stint in the Prometheus text format (docs/metrics.md lists every
// metric). Two kinds live here:
//
//   - events this server saw, counted as they happen: runs that ended, attempts retried,
//     leases lost, lateness and duration, store calls, HTTP requests. In a cluster each
//     server counts its own doings, so sum() over the servers is the cluster's total;
//   - state read from the store at scrape time (queue depth and oldest age, workers and
//     their capacity): the same on every server of a cluster, so take max(), not sum().
//
// A Metrics is made by the composition root and handed to the engine (as its Observer),
// the API (as its HTTP observer) and the store wrapper; nothing is registered globally.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/version"
)

// Buckets of the histograms, in seconds.
var (
	// A run lasts from under a second to hours.
	runBuckets = []float64{0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 12 * 3600}
	// A due run normally starts within milliseconds; seconds mean a backlog, minutes an outage.
	latenessBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900}
	// Store calls take a millisecond; a group commit of thousands takes tens.
	storeBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
	// Requests: the store's, plus the workers' long polls (up to 30 s).
	httpBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// Metrics holds this server's instruments and its registry.
type Metrics struct {
	reg *prometheus.Registry

	runs        *prometheus.CounterVec
	runDuration *prometheus.HistogramVec
	lateness    *prometheus.HistogramVec
	retried     *prometheus.CounterVec
	leasesLost  *prometheus.CounterVec
	store       *prometheus.HistogramVec
	requests    *prometheus.CounterVec
	reqDuration *prometheus.HistogramVec
}

// New returns the instruments of one server, registered with a registry of their own
// together with the Go runtime's, the process's and stint_build_info for b.
func New(b version.Build) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stint_runs_total",
			Help: "Runs that reached a final state through this server, by queue and final status."},
			[]string{"queue", "status"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stint_run_duration_seconds",
			Help:    "From a run's first start to its end, for runs that ended through this server after starting.",
			Buckets: runBuckets}, []string{"queue", "status"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stint_schedule_lateness_seconds",
			Help:    "How late attempts leased by this server started: lease time minus the cron instant (a cron run's first attempt) or the time the run was due.",
			Buckets: latenessBuckets}, []string{"queue"}),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stint_attempts_retried_total",
			Help: "Attempts that ended (failed or lost) through this server and whose run will be tried again."},
			[]string{"queue"}),
		leasesLost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stint_leases_lost_total",
			Help: "Attempts this server ended as lost: lease expired (the leader's rescuer) or worker restarted."},
			[]string{"cause"}),
		store: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stint_store_duration_seconds",
			Help:    "Duration of this server's calls of the store's hot operations, by operation.",
			Buckets: storeBuckets}, []string{"op"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "stint_http_requests_total",
			Help: "HTTP requests this server answered, by route pattern, method and status code."},
			[]string{"route", "method", "code"}),
		reqDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "stint_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern and method.",
			Buckets: httpBuckets}, []string{"route", "method"}),
	}
	for _, st := range []model.RunStatus{model.RunSucceeded, model.RunFailed, model.RunCancelled, model.RunSkipped} {
		m.runs.WithLabelValues(model.DefaultQueue, string(st)) // present at 0 before the first end
	}
	for _, c := range []string{LostExpired, LostRestarted} {
		m.leasesLost.WithLabelValues(c)
	}
	m.retried.WithLabelValues(model.DefaultQueue)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.runs, m.runDuration, m.lateness, m.retried, m.leasesLost, m.store, m.requests, m.reqDuration,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stint_build_info",
			Help:        "Always 1; the labels name the running build.",
			ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "go_version": b.GoVersion}},
			func() float64 { return 1 }))
	return m
}

// Causes of a lost lease (the cause label of stint_leases_lost_total).
const (
	LostExpired   = "expired"   // no heartbeat for a lease TTL: the rescuer ended it
	LostRestarted = "restarted" // its worker registered a new session: that process is gone
)

// Ended counts the runs among runs that are in a final state: runs a change of this server
// ended. Each run must be given once, by the change that ended it.
func (m *Metrics) Ended(runs []*model.Run) {
	for _, r := range runs {
		if !r.Status.Final() {
			continue
		}
		m.runs.WithLabelValues(r.Queue, string(r.Status)).Inc()
		if r.StartedAt != nil && r.FinishedAt != nil {
			m.runDuration.WithLabelValues(r.Queue, string(r.Status)).Observe(max(r.FinishedAt.Sub(*r.StartedAt), 0).Seconds())
		}
	}
}

// Retried counts the runs among runs that are not final: runs whose attempt ended through
// this server (a completion) and that will be tried again.
func (m *Metrics) Retried(runs []*model.Run) {
	for _, r := range runs {
		if r.Status.Active() {
			m.retried.WithLabelValues(r.Queue).Inc()
		}
	}
}

// LeasesExpired counts the attempts the leader's rescuer ended as lost because their lease
// expired, among runs (the runs whose error says so; the runs admitted after them are not
// counted), and those of their runs that will be tried again.
func (m *Metrics) LeasesExpired(runs []*model.Run) { m.lost(LostExpired, scheduler.LeaseExpired, runs) }

// WorkerRestarted counts, as LeasesExpired, the attempts a worker's new session ended as lost.
func (m *Metrics) WorkerRestarted(runs []*model.Run) {
	m.lost(LostRestarted, scheduler.WorkerRestarted, runs)
}

func (m *Metrics) lost(cause, reason string, runs []*model.Run) {
	for _, r := range runs {
		if r.Error != reason {
			continue
		}
		m.leasesLost.WithLabelValues(cause).Inc()
		if r.Status.Active() {
			m.retried.WithLabelValues(r.Queue).Inc()
		}
	}
}

// Leased observes the lateness of attempts leased at now: now minus the cron instant for a
// cron run's first attempt (a misfired instant counts from the instant), else minus the
// time the run was due (a retry counts from its backoff's end).
func (m *Metrics) Leased(leases []*model.Lease, now time.Time) {
	for _, l := range leases {
		due := l.Run.ScheduledFor
		if l.Run.Instant != nil && l.Run.Attempt <= 1 {
			due = *l.Run.Instant
		}
		m.lateness.WithLabelValues(l.Run.Queue).Observe(max(now.Sub(due), 0).Seconds())
	}
}

// StoreCall observes one store call of op that took d.
func (m *Metrics) StoreCall(op string, d time.Duration) {
	m.store.WithLabelValues(op).Observe(d.Seconds())
}

// Unmatched is the route label of requests that matched no route.
const Unmatched = "unmatched"

// Request counts one HTTP request: route is the pattern path it matched (Unmatched for
// none), so that ids in paths do not multiply the series; a method outside the standard
// ones is counted as "other".
func (m *Metrics) Request(route, method string, code int, d time.Duration) {
	if route == "" {
		route = Unmatched
	}
	method = knownMethod(method)
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.reqDuration.WithLabelValues(route, method).Observe(d.Seconds())
}

func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// Source is what the scrape reads from the store.
type Source interface {
	ListQueues(ctx context.Context) ([]*model.Queue, error)
	OldestQueued(ctx context.Context) (map[string]time.Time, error)
	Workers(ctx context.Context) ([]*model.Worker, error)
	CronStats() model.CronStats
	Clock() clock.Clock
}

// Handler serves the instruments plus the state read from src at each scrape.
func (m *Metrics) Handler(src Source, log *slog.Logger) http.Handler {
	scraped := prometheus.NewRegistry()
	scraped.MustRegister(&collector{src: src, log: log})
	return promhttp.HandlerFor(prometheus.Gatherers{m.reg, scraped},
		promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
}
