package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/specjson"
	"github.com/stint-dev/stint/worker"
)

// Config is one bench invocation.
type Config struct {
	Server    string        // a running server; empty: start one on Store
	Token     string        // bearer token for Server (the global --token / STINT_TOKEN)
	Store     string        // "sqlite" (a temp dir), sqlite:///path, or a postgres:// URL
	N         int           // jobs for drain, scheduled and exec; processes per way for spawn
	Duration  time.Duration // steady
	Producers int           // steady
	Slots     int           // worker slots when the bench starts the server (split among Workers); spawn: processes at once (0: 4 per CPU)
	// Workers, when above 0, runs the workers as that many agents of the worker package in
	// the bench's process, speaking the worker protocol over HTTP as a user's own worker does,
	// instead of the server's local worker. With Server the bench always runs its own
	// workers (default 1).
	Workers int
	// Servers, when above 0, runs that many `stint server` processes on the fresh store
	// (several need PostgreSQL) instead of a server in the bench's process; the workers
	// (Workers, required) are spread over them, and so are submissions. agents: the
	// servers the agents are spread over (default 1).
	Servers int
	// Agents is how many simulated agents the agents workload runs, and Hold how many
	// leases each keeps running (0: idle agents).
	Agents int
	Hold   int
	// PIDs are the process ids of the servers named by Server, whose CPU and memory the
	// agents workload reads from /proc (none: it reports the agents' side only).
	PIDs []int
	// WorkerBinary is the stint executable those processes run (default: this one).
	WorkerBinary string
	// ServerProfile, when set, makes each server process started for Servers (and for the
	// agents workload) write a CPU profile of its life to ServerProfile.<id> (s1, s2...).
	ServerProfile string
	// Handler is the handler kind of the jobs (default "noop"; with Server, a kind of the
	// bench's own, so that only its workers take them). The bench's workers run it with a
	// handler that notes when each run started and succeeds.
	Handler string
	// CPU, when above 0, makes each job of drain and steady ask that many CPUs, so that
	// leases take the placing path (the local worker offers the host's CPUs).
	CPU       float64
	BatchSize int // jobs per batch insert
	// InsertWorkers is how many batch inserts are in flight at once (drain, scheduled, exec).
	InsertWorkers int
	Lead          time.Duration // scheduled: how far ahead the instant is
	Shape         string        // dag: ShapeFanout (default) or ShapeChain
	// FullAnswers asks batch inserts for the full answer (every job and run) instead of
	// the minimal one (ids only, "Prefer: return=minimal").
	FullAnswers bool
	// Insert is how drain, scheduled and exec insert their jobs: InsertBatch (default:
	// POST /v1/jobs/batch, BatchSize jobs a request) or InsertStream (POST /v1/jobs/stream:
	// InsertWorkers streams side by side, each of its share of the jobs).
	Insert string
	// SeedFinished, when above 0, fills the fresh PostgreSQL store with that many finished
	// runs (and their jobs and attempts) before the workload runs: see seed.go.
	SeedFinished int
	// Retention, when above 0, has the bench's server delete finished runs this long after
	// they finished (no run kept per job, batches and pause as the server's defaults), so a
	// workload on a seeded store runs while retention deletes the seeded history.
	Retention time.Duration
	// RetentionPause is the server's pause between two delete batches under Retention
	// (0: the server's default, app.DefaultRetainPause): it bounds the delete rate.
	RetentionPause time.Duration
	// Progress, when set, is called as work advances: phase "insert" (jobs inserted of the
	// workload's), "submit" (steady: seconds of the duration gone), "run" (runs whose handler
	// started, or, for exec, that left the queue). One call at a time.
	Progress func(phase string, done, total int)
	Logger   *slog.Logger
}

// Result is what a workload measured: named figures in print order.
type Result struct {
	Workload string            `json:"workload"`
	Store    string            `json:"store"`
	Figures  []Figure          `json:"figures"`
	Params   map[string]string `json:"params"`
	Plans    []Plan            `json:"plans,omitempty"` // plans: the statements' plans
	// Statements are the store's busiest statements over the measured window, by
	// PostgreSQL's pg_stat_statements, when its server loads it.
	Statements []Statement `json:"statements,omitempty"`
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

// figure returns the value of the figure named name, if r has one.
func (r *Result) figure(name string) (float64, bool) {
	for _, f := range r.Figures {
		if f.Name == name {
			return f.Value, true
		}
	}
	return 0, false
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
	printStatements(w, r.Statements)
	printPlans(w, r.Plans)
}

// PrintJSON writes the result as one JSON object.
func (r *Result) PrintJSON(w io.Writer) error {
	return json.NewEncoder(w).Encode(r)
}

// Workloads lists the workload names Run accepts.
var Workloads = []string{"drain", "steady", "scheduled", "cron", "exec", "spawn", "dag", "failover", "plans", "agents"}

// DefaultN is each workload's job count when Config.N is zero (the workloads of BENCHMARKS.md).
var DefaultN = map[string]int{"drain": 100000, "scheduled": 10000, "cron": 10000, "exec": 10000, "spawn": 5000, "dag": 10000, "plans": 100000}

// Run runs one workload.
func Run(ctx context.Context, workload string, cfg Config) (*Result, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.InsertWorkers <= 0 {
		cfg.InsertWorkers = 1
	}
	if cfg.N <= 0 {
		cfg.N = DefaultN[workload]
	}
	switch workload {
	case "failover":
		return runFailover(ctx, cfg) // its own servers, as processes it can kill
	case "agents":
		return runAgents(ctx, cfg) // servers as processes, or --server with --pid
	case "spawn":
		return runSpawn(ctx, cfg) // no server: the machine's own limit
	}
	var w func(context.Context, *runner) error
	switch workload {
	case "drain":
		w = drain
	case "steady":
		w = steady
	case "scheduled":
		w = scheduled
	case "cron":
		w = cronWorkload
	case "exec":
		w = execWorkload
	case "dag":
		w = dagWorkload
	case "plans":
		w = plansWorkload
	default:
		return nil, fmt.Errorf("workload %q: want one of %s", workload, strings.Join(Workloads, ", "))
	}
	if cfg.Servers > 0 && cfg.Workers == 0 && workload != "plans" {
		return nil, errors.New("--servers: give --workers too (a `stint server` runs no local worker)")
	}
	if cfg.SeedFinished > 0 && (cfg.Server != "" || !isPostgres(cfg.Store)) {
		return nil, errors.New("--seed-finished: needs --store with a postgres:// URL (the bench writes the history into the scratch database)")
	}
	var limit *spawned
	if workload == "exec" && cfg.Server == "" {
		// The commands run on this machine: measure its own limit first, back to back.
		l, err := machineLimit(ctx, cfg)
		if err != nil {
			return nil, err
		}
		limit = &l
	}
	storeName := "external server " + cfg.Server
	srvURL := cfg.Server
	queue := "bench-" + workload + "-" + id.New(time.Now())[:10]
	kind := cfg.Handler
	if kind == "" {
		kind = "noop"
		if cfg.Server != "" {
			kind = queue // no other worker of that server offers it
		}
	}
	rec := newRecorder(time.Now)
	var (
		seeded       *seedStats
		storeURL     string
		urls         = []string{srvURL}
		pids         = cfg.PIDs
		token        = cfg.Token // the in-process server runs open on loopback
		benchProcess = "the bench"
	)
	switch {
	case srvURL != "":
	case cfg.Servers > 0:
		cl, err := startCluster(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer cl.stop()
		srvURL, urls, pids, storeName, storeURL, token = cl.urls[0], cl.urls, cl.pids, cl.storeName, cl.storeURL, cl.token
		seeded = cl.seeded // written before the servers started
	default:
		var local map[string]worker.Handler
		if cfg.Workers == 0 {
			local = map[string]worker.Handler{kind: rec.handler}
			benchProcess = "the bench, the server and its local worker"
		} else {
			benchProcess = "the bench and the server"
		}
		srv, err := startServer(ctx, cfg, local)
		if err != nil {
			return nil, err
		}
		defer srv.stop()
		srvURL, urls, storeName, storeURL = srv.url, []string{srv.url}, srv.storeName, srv.storeURL
	}
	if workers := benchWorkers(cfg); workers > 0 && workload != "plans" {
		// Worker i polls server i mod n first and moves to the next only when that one fails.
		// Commands (exec) run only on a store of the bench's own: on another server they could
		// be anyone's.
		stopWorkers, err := startBenchWorkers(ctx, cfg, workers, func(i int) string {
			rot := append(append([]string{}, urls[i%len(urls):]...), urls[:i%len(urls)]...)
			return strings.Join(rot, ",")
		}, token, kind, cfg.Server == "", rec)
		if err != nil {
			return nil, err
		}
		defer stopWorkers()
		storeName += fmt.Sprintf(", %d HTTP workers in the bench's process", workers)
		benchProcess += fmt.Sprintf(" and its %d workers", workers)
	}
	if cfg.SeedFinished > 0 && seeded == nil {
		var err error
		if seeded, err = seedStore(ctx, storeURL, cfg.SeedFinished, time.Now()); err != nil {
			return nil, err
		}
	}
	if seeded != nil {
		storeName += fmt.Sprintf(", seeded with %d finished runs", seeded.runs)
	}
	c, err := client.New(srvURL, client.WithToken(token))
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	r := &runner{
		cfg:          cfg,
		c:            c,
		storeURL:     storeURL,
		url:          strings.TrimRight(srvURL, "/"),
		urls:         urls,
		pids:         pids,
		hc:           &http.Client{Transport: bearer(token, &http.Transport{MaxIdleConnsPerHost: 64})},
		queue:        queue,
		kind:         kind,
		rec:          rec,
		benchProcess: benchProcess,
		limit:        limit,
		res:          &Result{Workload: workload, Store: storeName, Params: map[string]string{}},
	}
	if cfg.CPU > 0 {
		r.res.Params["cpu per job"] = strconv.FormatFloat(cfg.CPU, 'g', -1, 64)
	}
	if seeded != nil {
		r.res.Params["seeded"] = fmt.Sprintf("%d jobs, %d finished runs (%d succeeded, %d failed), %d attempts",
			seeded.jobs, seeded.runs, seeded.byStatus[model.RunSucceeded], seeded.byStatus[model.RunFailed], seeded.attempts)
		r.res.add("seed write", seeded.wrote.Seconds(), "s")
		r.res.add("seed vacuum analyze", seeded.vacuumed.Seconds(), "s")
	}
	var before int64
	if cfg.Retention > 0 && storeURL != "" {
		var err error
		if before, err = countRuns(ctx, storeURL); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	if err := w(ctx, r); err != nil {
		return nil, fmt.Errorf("bench %s: %w", workload, err)
	}
	if cfg.Retention > 0 && storeURL != "" {
		elapsed := time.Since(start)
		after, err := countRuns(ctx, storeURL)
		if err != nil {
			return nil, err
		}
		deleted := before - after
		r.res.Params["retention"] = cfg.Retention.String()
		if cfg.RetentionPause > 0 {
			r.res.Params["retention pause"] = cfg.RetentionPause.String()
		}
		r.res.add("retention deleted", float64(deleted), "runs")
		r.res.add("retention delete rate", float64(deleted)/elapsed.Seconds(), "runs/s")
	}
	return r.res, nil
}

// countRuns counts the runs of the seeded history (its queues, seed-NN) in the store at url:
// those retention deletes while the workload adds its own.
func countRuns(ctx context.Context, url string) (int64, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("connect to the store: %w", err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM runs WHERE queue LIKE 'seed-%'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count runs: %w", err)
	}
	return n, nil
}

// isPostgres reports whether a --store names PostgreSQL.
func isPostgres(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// runner carries one workload's state.
type runner struct {
	cfg      Config
	c        *client.Client
	storeURL string       // the scratch PostgreSQL database of the server the bench started
	url      string       // the server's base URL (the first server's, with --servers)
	urls     []string     // every server's base URL: submissions are spread over them
	pids     []int        // the server processes the bench started (--servers), for /proc
	hc       *http.Client // for submissions (see submit)
	queue    string
	kind     string    // the handler kind of the jobs
	rec      *recorder // when each run's handler started (the workers run rec.handler)
	// benchProcess says what runs in the bench's process, for its CPU figures.
	benchProcess string
	progressMu   sync.Mutex
	polls        atomic.Int64 // the queue's depth asked while waiting (waitIdle)
	res          *Result
	// limit is the machine's limit for starting processes (spawn), measured just before
	// exec; nil when the commands run on another host's workers.
	limit *spawned
}

// benchWorkers is how many workers the bench runs in its process (see Config.Workers).
func benchWorkers(cfg Config) int {
	if cfg.Server != "" {
		return max(cfg.Workers, 1)
	}
	return cfg.Workers
}

// setPaused pauses or resumes the bench queue, creating it (a queue of its own, paused
// before its first job).
func (r *runner) setPaused(ctx context.Context, paused bool) error {
	_, err := r.c.CreateQueue(ctx, r.queue, &apitype.QueuePatch{Paused: &paused})
	if err != nil {
		return fmt.Errorf("set queue %s paused=%v: %w", r.queue, paused, err)
	}
	return nil
}

// insert creates n jobs made by spec in batches, InsertWorkers batches in flight at once,
// and returns how long it took.
func (r *runner) insert(ctx context.Context, n int, spec func(i int) apitype.JobSpec) (time.Duration, error) {
	if r.cfg.Insert == InsertStream {
		return r.insertStreams(ctx, n, spec)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan int)
	errs := make(chan error, r.cfg.InsertWorkers)
	start := time.Now()
	var inserted atomic.Int64
	var wg sync.WaitGroup
	for range r.cfg.InsertWorkers {
		wg.Go(func() {
			for off := range batches {
				end := min(off+r.cfg.BatchSize, n)
				req := &apitype.BatchCreateJobsRequest{Jobs: make([]apitype.JobSpec, 0, end-off)}
				for i := off; i < end; i++ {
					req.Jobs = append(req.Jobs, spec(i))
				}
				if err := r.submit(ctx, off/r.cfg.BatchSize, "/v1/jobs/batch", req, end-off); err != nil {
					errs <- fmt.Errorf("insert jobs %d..%d: %w", off, end, err)
					cancel()
					return
				}
				r.progress("insert", int(inserted.Add(int64(end-off))), n)
			}
		})
	}
feed:
	for off := 0; off < n; off += r.cfg.BatchSize {
		select {
		case batches <- off:
		case <-ctx.Done():
			break feed
		}
	}
	close(batches)
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return took, ctx.Err()
}

// Ways to insert (Config.Insert).
const (
	InsertBatch  = "batch"
	InsertStream = "stream"
)

// insertStreams creates n jobs made by spec through InsertWorkers streams of jobs at once
// (POST /v1/jobs/stream, minimal answers), each of a contiguous share of them, spread over
// the servers, and returns how long it took.
func (r *runner) insertStreams(ctx context.Context, n int, spec func(i int) apitype.JobSpec) (time.Duration, error) {
	streams := min(r.cfg.InsertWorkers, max(n, 1))
	r.res.Params["insert by"] = "streams of jobs (POST /v1/jobs/stream)"
	errs := make(chan error, streams)
	var inserted atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for k := range streams {
		from, to := k*n/streams, (k+1)*n/streams
		wg.Go(func() {
			c, err := client.New(r.urls[k%len(r.urls)], client.WithHTTPClient(r.hc))
			if err != nil {
				errs <- err
				return
			}
			specs := func(yield func(apitype.JobSpec) bool) {
				for i := from; i < to && yield(spec(i)); i++ {
				}
			}
			sum, err := c.CreateJobsStream(ctx, specs, client.StreamOptions{Minimal: true})
			switch {
			case err != nil:
				errs <- fmt.Errorf("insert jobs %d..%d: %w", from, to, err)
			case sum.Accepted != to-from || sum.Rejected > 0:
				errs <- fmt.Errorf("insert jobs %d..%d: %d accepted, %d rejected", from, to, sum.Accepted, sum.Rejected)
			default:
				r.progress("insert", int(inserted.Add(int64(to-from))), n)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return took, ctx.Err()
}

// submit posts a submission (one job to /v1/jobs, or a batch to /v1/jobs/batch) to server
// number server (modulo their number) and checks
// that the server created every job: a 201, and no entry of a batch answer with an error.
// It reads of the answer only what that check needs. The SDK decodes every job and run of
// the answer, which in a bench that runs the server in its own process takes CPU from the
// server it measures (a fifth of it while inserting); a client elsewhere would not.
// (Encoding the request is the client's own work and stays.)
func (r *runner) submit(ctx context.Context, server int, path string, body any, jobs int) error {
	batch := path == "/v1/jobs/batch"
	resp, _, err := r.post(ctx, server, path, body, batch && !r.cfg.FullAnswers)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if !batch {
		_, err := io.Copy(io.Discard, resp.Body)
		return err
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("POST %s: read answer: %w", path, err)
	}
	if resp.Header.Get("Preference-Applied") == "return=minimal" {
		return checkMinimal(path, b, jobs)
	}
	// Every entry that created its job starts with {"job":{ (an entry that failed has
	// "job":null and an "error"); count those rather than decode a thousand jobs and runs.
	if bytes.Count(b, []byte(`{"job":{`)) == jobs {
		return nil
	}
	var out apitype.BatchCreateJobsResponse
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("POST %s: decode answer: %w", path, err)
	}
	if len(out.Items) != jobs {
		return fmt.Errorf("POST %s: %d items in the answer for %d jobs", path, len(out.Items), jobs)
	}
	for i, it := range out.Items {
		if it.Error != nil {
			return fmt.Errorf("POST %s: job %d: %s: %s", path, i, it.Error.Title, it.Error.Detail)
		}
	}
	return fmt.Errorf("POST %s: answer %.200q... does not list %d created jobs", path, b, jobs)
}

// submitJob posts one job to server number server (modulo their number) and returns the id
// of the run it created and the instant just before the request left: where the latency a
// user sees starts.
func (r *runner) submitJob(ctx context.Context, server int, spec *apitype.JobSpec) (string, time.Time, error) {
	resp, sent, err := r.post(ctx, server, "/v1/jobs", spec, false)
	if err != nil {
		return "", time.Time{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("POST /v1/jobs: read answer: %w", err)
	}
	runID, err := createdRunID(b)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("POST /v1/jobs: %w", err)
	}
	return runID, sent, nil
}

// post encodes body and posts it to path on server number server (modulo their number),
// asking for the minimal answer when minimal is set. It returns the answer of a 201 (an error
// otherwise) and the instant just before the request left, after the encoding.
func (r *runner) post(ctx context.Context, server int, path string, body any, minimal bool) (*http.Response, time.Time, error) {
	var b []byte
	var err error
	if batch, ok := body.(*apitype.BatchCreateJobsRequest); ok && batch != nil {
		// A batch is encoded as the SDK encodes it: json.Marshal's bytes, without reflection.
		b, err = specjson.AppendBatchRequest(make([]byte, 0, 16+64*len(batch.Jobs)), batch.Jobs)
	} else {
		b, err = json.Marshal(body)
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("encode request: %w", err)
	}
	base := strings.TrimRight(r.urls[server%len(r.urls)], "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if minimal {
		req.Header.Set("Prefer", "return=minimal")
	}
	sent := time.Now()
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, time.Time{}, err
	}
	if resp.StatusCode != http.StatusCreated {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, time.Time{}, fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	return resp, sent, nil
}

// checkMinimal checks a minimal batch answer (ids only): every one of its jobs items names
// a new job.
func checkMinimal(path string, b []byte, jobs int) error {
	if bytes.Count(b, []byte(`{"job_id":"`)) == jobs &&
		!bytes.Contains(b, []byte(`"existing":`)) && !bytes.Contains(b, []byte(`"error":`)) {
		return nil
	}
	var out struct {
		Items []struct {
			JobID    string           `json:"job_id"`
			RunID    string           `json:"run_id"`
			Existing bool             `json:"existing"`
			Error    *apitype.Problem `json:"error"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("POST %s: decode answer: %w", path, err)
	}
	if len(out.Items) != jobs {
		return fmt.Errorf("POST %s: %d items in the answer for %d jobs", path, len(out.Items), jobs)
	}
	for i, it := range out.Items {
		switch {
		case it.Error != nil:
			return fmt.Errorf("POST %s: job %d: %s: %s", path, i, it.Error.Title, it.Error.Detail)
		case it.JobID == "" || it.Existing:
			return fmt.Errorf("POST %s: job %d: not created: %+v", path, i, it)
		}
	}
	return nil
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

// waitIdle polls the queue's depth (its active runs) until none is left, reporting progress
// as phase "run" when total (the runs expected) is above 0. Call it only after every run of
// the workload exists. When the queue went idle is not what this tells: it is known only to
// within a poll, so figures take it from the runs' own timestamps (see countStatus). The
// workloads whose handlers the bench runs call it only once every handler started: the
// polls then span the completions' tail alone (exec, whose processes it does not see, polls
// throughout).
//
// A poll counts the queue's active runs on the server, which is not free while 100,000 are
// queued (polling every 10 ms took a sixth of the CPU of a drain): the interval follows how
// fast the depth falls, aiming at half the time left, from 20 ms to 1 s.
func (r *runner) waitIdle(ctx context.Context, timeout time.Duration, total int) error {
	deadline := time.Now().Add(timeout)
	prev, prevAt := -1, time.Time{}
	wait := 100 * time.Millisecond
	for {
		d, err := r.depth(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		left := d["queued"] + d["running"] + d["scheduled"] + d["waiting"]
		r.polls.Add(1)
		if total > 0 {
			r.progress("run", max(total-left, 0), total)
		}
		if left == 0 {
			return nil
		}
		if now.After(deadline) {
			return fmt.Errorf("still %v after %s", d, timeout)
		}
		if prev > left {
			rate := float64(prev-left) / now.Sub(prevAt).Seconds()
			wait = time.Duration(float64(left) / rate / 2 * float64(time.Second))
		}
		wait = min(max(wait, 20*time.Millisecond), time.Second)
		prev, prevAt = left, now
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// statusCount is what countStatus found: how many runs, and the span of their server-side
// start and finish times.
type statusCount struct {
	n             int
	firstStarted  time.Time // earliest started_at
	firstFinished time.Time // earliest finished_at
	lastFinished  time.Time // latest finished_at
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
			if run.FinishedAt != nil && (sc.firstFinished.IsZero() || run.FinishedAt.Before(sc.firstFinished)) {
				sc.firstFinished = *run.FinishedAt
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

// bearer wraps base so that every request carries token as a bearer token (none when
// token is empty): the bench's own HTTP requests, beside the SDK's client.WithToken.
func bearer(token string, base http.RoundTripper) http.RoundTripper {
	if token == "" {
		return base
	}
	return bearerTransport{token: token, base: base}
}

type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (t bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+t.token)
	return t.base.RoundTrip(req)
}

// newToken returns a random admin token for the servers a bench starts: they run with
// authentication on, as they do outside stint dev.
func newToken() (string, error) {
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return hex.EncodeToString(secret[:]), nil
}
