// Package metrics exposes stint's state in the Prometheus text format. Gauges are read from
// the store at scrape time (runs by queue and status, workers by state), so they are right
// on every server of a cluster and cost nothing between scrapes.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stint-dev/stint/internal/model"
)

// Source is what the collector reads at scrape time.
type Source interface {
	ListQueues(ctx context.Context) ([]*model.Queue, error)
	Workers(ctx context.Context) ([]*model.Worker, error)
	CronStats() model.CronStats
}

// Handler returns an http.Handler serving metrics read from src, plus the Go runtime's.
func Handler(src Source, log *slog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(&collector{src: src, log: log})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
}

var (
	runsDesc       = prometheus.NewDesc("stint_runs", "Runs by queue and status.", []string{"queue", "status"}, nil)
	queueDesc      = prometheus.NewDesc("stint_queue_paused", "1 when the queue is paused.", []string{"queue"}, nil)
	workersDesc    = prometheus.NewDesc("stint_workers", "Workers by state.", []string{"state"}, nil)
	workerUsedDesc = prometheus.NewDesc("stint_worker_running_attempts", "Attempts running on each worker.", []string{"worker"}, nil)
	scrapeErrDesc  = prometheus.NewDesc("stint_scrape_errors", "1 when reading the store for this scrape failed.", nil, nil)
	cronRunsDesc   = prometheus.NewDesc("stint_cron_runs_total", "Cron runs this server's cron loop created.", nil, nil)
	cronMissedDesc = prometheus.NewDesc("stint_cron_missed_instants_total",
		"Cron instants this server found missed (later than the misfire grace), counted up to each job's misfire cap.", nil, nil)
	cronDroppedDesc = prometheus.NewDesc("stint_cron_dropped_instants_total",
		"Missed cron instants that got no run under their job's misfire policy.", nil, nil)
)

type collector struct {
	src Source
	log *slog.Logger
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runsDesc
	ch <- queueDesc
	ch <- workersDesc
	ch <- workerUsedDesc
	ch <- scrapeErrDesc
	ch <- cronRunsDesc
	ch <- cronMissedDesc
	ch <- cronDroppedDesc
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	failed := 0.0
	queues, err := c.src.ListQueues(ctx)
	if err != nil {
		c.log.Warn("metrics: list queues", "err", err)
		failed = 1
	}
	for _, q := range queues {
		for _, st := range model.RunStatuses {
			ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(q.Depth[st]), q.Name, string(st))
		}
		paused := 0.0
		if q.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, paused, q.Name)
	}
	workers, err := c.src.Workers(ctx)
	if err != nil {
		c.log.Warn("metrics: list workers", "err", err)
		failed = 1
	}
	byState := map[model.WorkerState]int{model.WorkerActive: 0, model.WorkerDraining: 0, model.WorkerLost: 0}
	for _, w := range workers {
		byState[w.State]++
		ch <- prometheus.MustNewConstMetric(workerUsedDesc, prometheus.GaugeValue, float64(w.Running), w.ID)
	}
	for st, n := range byState {
		ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(n), string(st))
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, failed)
	cs := c.src.CronStats()
	ch <- prometheus.MustNewConstMetric(cronRunsDesc, prometheus.CounterValue, float64(cs.Runs))
	ch <- prometheus.MustNewConstMetric(cronMissedDesc, prometheus.CounterValue, float64(cs.Missed))
	ch <- prometheus.MustNewConstMetric(cronDroppedDesc, prometheus.CounterValue, float64(cs.Dropped))
}
