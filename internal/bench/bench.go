package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/id"
)

// Config is one bench invocation.
type Config struct {
	Server    string        // a running server; empty: start one on Store
	Store     string        // "sqlite" (a temp dir), sqlite:///path, or a postgres:// URL
	N         int           // jobs for drain, scheduled and exec
	Duration  time.Duration // steady
	Producers int           // steady
	Slots     int           // local worker slots when the bench starts the server
	Handler   string        // no-op handler kind (default "noop")
	BatchSize int           // jobs per batch insert
	Lead      time.Duration // scheduled: how far ahead the instant is
	Logger    *slog.Logger
}

// Result is what a workload measured: named figures in print order.
type Result struct {
	Workload string            `json:"workload"`
	Store    string            `json:"store"`
	Figures  []Figure          `json:"figures"`
	Params   map[string]string `json:"params"`
}

// Figure is one measured number.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

func (r *Result) add(name string, v float64, unit string) {
	r.Figures = append(r.Figures, Figure{Name: name, Value: v, Unit: unit})
}

// Print writes the result as a table.
func (r *Result) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "workload\t%s\n", r.Workload)
	fmt.Fprintf(tw, "store\t%s\n", r.Store)
	keys := make([]string, 0, len(r.Params))
	for k := range r.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\n", k, r.Params[k])
	}
	for _, f := range r.Figures {
		fmt.Fprintf(tw, "%s\t%.1f %s\n", f.Name, f.Value, f.Unit)
	}
	tw.Flush()
}

// PrintJSON writes the result as one JSON object.
func (r *Result) PrintJSON(w io.Writer) error {
	return json.NewEncoder(w).Encode(r)
}

// Workloads lists the workload names Run accepts.
var Workloads = []string{"drain", "steady", "scheduled", "exec"}

// Run runs one workload.
func Run(ctx context.Context, workload string, cfg Config) (*Result, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if cfg.Handler == "" {
		cfg.Handler = "noop"
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	var w func(context.Context, *runner) error
	switch workload {
	case "drain":
		w = drain
	case "steady":
		w = steady
	case "scheduled":
		w = scheduled
	case "exec":
		w = execWorkload
	default:
		return nil, fmt.Errorf("workload %q: want one of %s", workload, strings.Join(Workloads, ", "))
	}
	storeName := "external server " + cfg.Server
	srvURL := cfg.Server
	if srvURL == "" {
		srv, err := startServer(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer srv.stop()
		srvURL, storeName = srv.url, srv.storeName
	}
	c, err := client.New(srvURL)
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	r := &runner{
		cfg:   cfg,
		c:     c,
		queue: "bench-" + workload + "-" + id.New(time.Now())[:10],
		res:   &Result{Workload: workload, Store: storeName, Params: map[string]string{}},
	}
	if err := w(ctx, r); err != nil {
		return nil, fmt.Errorf("bench %s: %w", workload, err)
	}
	return r.res, nil
}

// runner carries one workload's state.
type runner struct {
	cfg   Config
	c     *client.Client
	queue string
	res   *Result
}

// setPaused pauses or resumes the bench queue.
func (r *runner) setPaused(ctx context.Context, paused bool) error {
	_, err := r.c.UpdateQueue(ctx, r.queue, &apitype.QueuePatch{Paused: &paused})
	if err != nil {
		return fmt.Errorf("set queue %s paused=%v: %w", r.queue, paused, err)
	}
	return nil
}

// insert creates n jobs made by spec in batches, and returns how long it took.
func (r *runner) insert(ctx context.Context, n int, spec func(i int) apitype.JobSpec) (time.Duration, error) {
	start := time.Now()
	for off := 0; off < n; off += r.cfg.BatchSize {
		end := min(off+r.cfg.BatchSize, n)
		req := &apitype.BatchCreateJobsRequest{Jobs: make([]apitype.JobSpec, 0, end-off)}
		for i := off; i < end; i++ {
			req.Jobs = append(req.Jobs, spec(i))
		}
		if _, err := r.c.CreateJobs(ctx, req); err != nil {
			return 0, fmt.Errorf("insert jobs %d..%d: %w", off, end, err)
		}
	}
	return time.Since(start), nil
}

// depth returns the bench queue's run counts by status (active states only).
func (r *runner) depth(ctx context.Context) (map[string]int, error) {
	q, err := r.c.GetQueue(ctx, r.queue)
	if err != nil {
		var p *apitype.Problem
		if errors.As(err, &p) && p.Status == http.StatusNotFound {
			return map[string]int{}, nil
		}
		return nil, fmt.Errorf("get queue %s: %w", r.queue, err)
	}
	return q.Depth, nil
}

// idlePoll is how often waitIdle asks for the queue's depth. Each poll counts the queue's
// active runs on the server, so it is not free; the figures do not depend on it, since they
// come from the runs' own timestamps (see finished).
const idlePoll = 150 * time.Millisecond

// waitIdle polls the queue's depth (its active runs) until none is left. Call it only after
// every run of the workload exists. When the queue went idle is not what this returns: it
// is known only to within a poll; take it from the runs (finished).
func (r *runner) waitIdle(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		d, err := r.depth(ctx)
		if err != nil {
			return err
		}
		if d["queued"]+d["running"]+d["scheduled"]+d["waiting"] == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still %v after %s", d, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(idlePoll):
		}
	}
}

// statusCount is what countStatus found: how many runs, and the span of their server-side
// start and finish times.
type statusCount struct {
	n            int
	firstStarted time.Time // earliest started_at
	lastFinished time.Time // latest finished_at
}

// countStatus counts the queue's runs in one status and finds their earliest start and
// latest finish (server timestamps).
func (r *runner) countStatus(ctx context.Context, status string) (statusCount, error) {
	var sc statusCount
	cursor := ""
	for {
		page, err := r.c.ListRuns(ctx, client.ListRunsOptions{Queue: r.queue, Status: status, Limit: 1000, Cursor: cursor})
		if err != nil {
			return statusCount{}, fmt.Errorf("list runs: %w", err)
		}
		sc.n += len(page.Items)
		for _, run := range page.Items {
			if run.StartedAt != nil && (sc.firstStarted.IsZero() || run.StartedAt.Before(sc.firstStarted)) {
				sc.firstStarted = *run.StartedAt
			}
			if run.FinishedAt != nil && run.FinishedAt.After(sc.lastFinished) {
				sc.lastFinished = *run.FinishedAt
			}
		}
		if page.NextCursor == "" {
			return sc, nil
		}
		cursor = page.NextCursor
	}
}

// allRuns lists every run of the bench queue.
func (r *runner) allRuns(ctx context.Context) ([]*apitype.Run, error) {
	var out []*apitype.Run
	cursor := ""
	for {
		page, err := r.c.ListRuns(ctx, client.ListRunsOptions{Queue: r.queue, Limit: 1000, Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, page.Items...)
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// percentile returns the p-th percentile (0..100) of sorted durations, in milliseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return float64(sorted[i]) / float64(time.Millisecond)
}
