package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stint-dev/stint/internal/model"
)

// The state read from the store at each scrape: the same on every server of a cluster.
var (
	depthDesc = prometheus.NewDesc("stint_queue_depth",
		"Runs of each queue in each active state (waiting, scheduled, queued, running).", []string{"queue", "status"}, nil)
	pausedDesc    = prometheus.NewDesc("stint_queue_paused", "1 when the queue is paused.", []string{"queue"}, nil)
	oldestAgeDesc = prometheus.NewDesc("stint_queue_oldest_age_seconds",
		"How long the queue's earliest due queued run has been due; 0 when nothing is queued.", []string{"queue"}, nil)
	workersDesc  = prometheus.NewDesc("stint_workers", "Workers by state (lost: silent for longer than the lease TTL).", []string{"state"}, nil)
	capacityDesc = prometheus.NewDesc("stint_worker_capacity",
		"What the active and draining workers offer, summed, by kind (cpu, memory_mb, gpu, slots).", []string{"kind"}, nil)
	usedDesc = prometheus.NewDesc("stint_worker_used",
		"What their running attempts book, summed, by kind (cpu, memory_mb, gpu, slots).", []string{"kind"}, nil)
	scrapeErrDesc = prometheus.NewDesc("stint_scrape_errors", "1 when reading the store for this scrape failed.", nil, nil)
	// Counted by this server's cron firer while it leads.
	cronRunsDesc   = prometheus.NewDesc("stint_cron_runs_total", "Cron runs this server's cron firer created.", nil, nil)
	cronMissedDesc = prometheus.NewDesc("stint_cron_instants_missed_total",
		"Cron instants this server found missed (later than the misfire grace), counted up to each job's misfire cap.", nil, nil)
	cronDroppedDesc = prometheus.NewDesc("stint_cron_instants_dropped_total",
		"Missed cron instants that got no run under their job's misfire policy.", nil, nil)
)

// collector reads Source at each scrape.
type collector struct {
	src Source
	log *slog.Logger
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{depthDesc, pausedDesc, oldestAgeDesc, workersDesc, capacityDesc, usedDesc,
		scrapeErrDesc, cronRunsDesc, cronMissedDesc, cronDroppedDesc} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	failed := 0.0
	queues, err := c.src.ListQueues(ctx)
	if err != nil {
		c.log.Warn("metrics: list queues", "err", err)
		failed = 1
	}
	oldest, err := c.src.OldestQueued(ctx)
	if err != nil {
		c.log.Warn("metrics: oldest queued runs", "err", err)
		failed = 1
	}
	now := c.src.Clock().Now()
	for _, q := range queues {
		for _, st := range []model.RunStatus{model.RunWaiting, model.RunScheduled, model.RunQueued, model.RunRunning} {
			gauge(depthDesc, float64(q.Depth[st]), q.Name, string(st))
		}
		paused := 0.0
		if q.Paused {
			paused = 1
		}
		gauge(pausedDesc, paused, q.Name)
		age := 0.0
		if at, ok := oldest[q.Name]; ok {
			age = max(now.Sub(at), 0).Seconds()
		}
		gauge(oldestAgeDesc, age, q.Name)
	}

	workers, err := c.src.Workers(ctx)
	if err != nil {
		c.log.Warn("metrics: list workers", "err", err)
		failed = 1
	}
	byState := map[model.WorkerState]int{model.WorkerActive: 0, model.WorkerDraining: 0, model.WorkerDrained: 0, model.WorkerLost: 0}
	var offered, used model.Capacity
	for _, w := range workers {
		byState[w.State]++
		if w.State == model.WorkerLost || w.State == model.WorkerDrained {
			continue // its capacity is gone until it comes back
		}
		offered = add(offered, w.Capacity)
		used = add(used, w.Used)
	}
	for st, n := range byState {
		gauge(workersDesc, float64(n), string(st))
	}
	for _, k := range []struct {
		desc *prometheus.Desc
		c    model.Capacity
	}{{capacityDesc, offered}, {usedDesc, used}} {
		gauge(k.desc, k.c.CPU, "cpu")
		gauge(k.desc, float64(k.c.MemoryMB), "memory_mb")
		gauge(k.desc, float64(k.c.GPU), "gpu")
		gauge(k.desc, float64(k.c.Slots), "slots")
	}
	gauge(scrapeErrDesc, failed)

	cs := c.src.CronStats()
	ch <- prometheus.MustNewConstMetric(cronRunsDesc, prometheus.CounterValue, float64(cs.Runs))
	ch <- prometheus.MustNewConstMetric(cronMissedDesc, prometheus.CounterValue, float64(cs.Missed))
	ch <- prometheus.MustNewConstMetric(cronDroppedDesc, prometheus.CounterValue, float64(cs.Dropped))
}

func add(a, b model.Capacity) model.Capacity {
	return model.Capacity{CPU: a.CPU + b.CPU, MemoryMB: a.MemoryMB + b.MemoryMB, GPU: a.GPU + b.GPU, Slots: a.Slots + b.Slots}
}
