package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/worker"
)

// DefaultAgents is how many agents the agents workload simulates unless told (issue 11).
const DefaultAgents = 2000

// runAgents: Config.Agents simulated agents in this process speak the worker protocol over
// HTTP to servers the bench starts as processes (Config.Servers, default 1; several need
// PostgreSQL), or to Config.Server with the servers' process ids in Config.PIDs. Each agent
// registers, heartbeats once per the interval the server gives (5 s by default) and keeps
// one long lease poll open (wait 30 s, the Go agent's), as a `stint worker` does. The agents
// serve a handler kind of their own: idle by default (no job has it, they lease nothing),
// or, with Config.Hold, busy: the bench submits Hold runs per agent of that kind, each
// agent leases Hold and keeps them running, listed in every heartbeat, until the window
// ended (then the bench completes them). Agents start spread over up to 10 s, so their
// heartbeats spread over the interval.
//
// Once every agent registered and two heartbeat intervals passed, the bench reads the
// server processes' CPU time and memory from /proc over a window of Config.Duration:
// CPU as a percentage of one core (all servers together, and the busiest), memory as the
// servers' peak resident set (VmHWM, since they started), summed, and what their resident
// set grew by from before the first agent registered to the window's end, per agent; and,
// on PostgreSQL, the CPU of the database's backends over the same window.
func runAgents(ctx context.Context, cfg Config) (*Result, error) {
	n := cfg.Agents
	if n <= 0 {
		n = DefaultAgents
	}
	res := &Result{Workload: "agents", Params: map[string]string{"agents": strconv.Itoa(n)}}
	var (
		urls     []string
		pids     []int
		storeURL string
		token    = cfg.Token
	)
	if cfg.Server != "" {
		urls, pids = strings.Split(cfg.Server, ","), cfg.PIDs
		res.Store = "external server " + cfg.Server
		if len(pids) == 0 {
			res.Store += " (no --pid: the servers' CPU and memory are not read)"
		}
	} else {
		ccfg := cfg
		ccfg.Servers, ccfg.Workers, ccfg.SeedFinished = max(cfg.Servers, 1), 0, 0
		cl, err := startCluster(ctx, ccfg)
		if err != nil {
			return nil, fmt.Errorf("bench agents: %w", err)
		}
		defer cl.stop()
		urls, pids, storeURL, res.Store, token = cl.urls, cl.pids, cl.storeURL, cl.storeName, cl.token
	}
	res.Params["servers"] = strconv.Itoa(len(urls))
	if err := simulateAgents(ctx, cfg, n, urls, pids, storeURL, token, res); err != nil {
		return nil, fmt.Errorf("bench agents: %w", err)
	}
	return res, nil
}

// simulateAgents runs the agents and takes the figures into res.
func simulateAgents(ctx context.Context, cfg Config, n int, urls []string, pids []int, storeURL, token string, res *Result) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sim := &agentSim{
		hc: &http.Client{Transport: bearer(token, &http.Transport{
			MaxIdleConnsPerHost: 2*n + 16, DisableCompression: true, IdleConnTimeout: 2 * time.Minute,
		})},
		urls:    urls,
		prefix:  fmt.Sprintf("agent-%d-", os.Getpid()),
		handler: "bench.agents." + id.Token()[:8],
		wait:    worker.DefaultPollWait,
		hold:    cfg.Hold,
		target:  int64(n * cfg.Hold),
		allHeld: make(chan struct{}),
	}
	agents := make([]*agent, n)
	for i := range agents {
		agents[i] = &agent{sim: sim, id: sim.prefix + strconv.Itoa(i), url: urls[i%len(urls)]}
	}
	ramp := min(10*time.Second, time.Duration(n)*5*time.Millisecond)
	var (
		registered sync.WaitGroup
		running    sync.WaitGroup
	)
	// The servers' memory before any agent registered: what the agents cost is what it
	// grew by when they all are (servers memory per connected worker).
	idle, err := sampleAll(pids)
	if err != nil {
		return err
	}
	registered.Add(n)
	began := time.Now()
	for i := range n {
		running.Go(func() {
			a := agents[i]
			select {
			case <-ctx.Done():
				registered.Done()
				return
			case <-time.After(ramp * time.Duration(i) / time.Duration(n)):
			}
			a.run(ctx, registered.Done)
		})
	}
	defer running.Wait()
	defer cancel()
	allIn := make(chan struct{})
	go func() { registered.Wait(); close(allIn) }()
	select {
	case <-allIn:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(ramp + 2*time.Minute):
		return fmt.Errorf("%d of %d agents registered within %s", sim.registered.Load(), n, ramp+2*time.Minute)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	regTook := time.Since(began)
	interval := time.Duration(sim.interval.Load())
	if cfg.Hold > 0 {
		res.Params["leases held per agent"] = strconv.Itoa(cfg.Hold)
		if err := submitHeld(ctx, urls[0], token, sim.handler, n*cfg.Hold); err != nil {
			return err
		}
		select {
		case <-sim.allHeld:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("the agents hold %d of %d leases after 2 minutes", sim.held.Load(), n*cfg.Hold)
		}
		defer completeHeld(context.WithoutCancel(ctx), sim, agents, urls[0])
	}
	res.Params["heartbeat interval"] = interval.String()
	res.Params["lease poll wait"] = sim.wait.String()
	res.Params["window"] = cfg.Duration.String()

	// Let every agent settle into its rhythm, then measure over the window.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * interval):
	}
	backends, err := newBackendWatch(ctx, storeURL)
	if err != nil {
		return err
	}
	defer backends.close()
	self, err := readProc(os.Getpid())
	if err != nil {
		return err
	}
	before, err := sampleAll(pids)
	if err != nil {
		return err
	}
	bBefore, err := backends.sample(ctx)
	if err != nil {
		return err
	}
	c0 := sim.counts()
	start := time.Now()
	sim.recording.Store(true)
	var peakRSS int64
	tick := time.NewTicker(time.Second)
	end := time.After(cfg.Duration)
window:
	for {
		select {
		case <-ctx.Done():
			tick.Stop()
			return ctx.Err()
		case <-end:
			break window
		case <-tick.C:
			s, err := sampleAll(pids)
			if err != nil {
				tick.Stop()
				return err
			}
			var rss int64
			for _, p := range s {
				rss += p.rss
			}
			peakRSS = max(peakRSS, rss)
		}
	}
	tick.Stop()
	sim.recording.Store(false)
	window := time.Since(start)
	c1 := sim.counts()
	after, err := sampleAll(pids)
	if err != nil {
		return err
	}
	bAfter, err := backends.sample(ctx)
	if err != nil {
		return err
	}
	selfAfter, err := readProc(os.Getpid())
	if err != nil {
		return err
	}

	lat := sim.latencies()
	res.add("agents registered", float64(sim.registered.Load()), "agents")
	res.add("registering took", regTook.Seconds(), "s")
	res.add("heartbeats", float64(c1.heartbeats-c0.heartbeats)/window.Seconds(), "/s")
	res.add("heartbeat p50", percentile(lat, 50), "ms")
	res.add("heartbeat p99", percentile(lat, 99), "ms")
	res.add("lease polls answered", float64(c1.polls-c0.polls)/window.Seconds(), "/s")
	res.add("errors", float64(c1.errors-c0.errors), "requests")
	res.add("registered again", float64(c1.reregistered-c0.reregistered), "agents")
	res.add("runs leased", float64(c1.leased), "runs")
	if cfg.Hold > 0 {
		res.add("leases held at the end", float64(sim.held.Load()), "leases")
		res.add("leases lost in the window", float64(c1.lost-c0.lost), "leases")
	}
	if len(pids) > 0 {
		res.add("servers CPU", cpuShare(cpuUsed(before, after), window), "% of a core")
		busiest := 0.0
		var hwm, rss int64
		for i := range before {
			busiest = max(busiest, cpuShare(after[i].cpu-before[i].cpu, window))
			hwm += after[i].hwm
			rss += after[i].rss
		}
		if len(pids) > 1 {
			res.add("busiest server CPU", busiest, "% of a core")
		}
		res.add("servers RSS peak (VmHWM)", float64(hwm)/(1<<20), "MiB")
		res.add("servers RSS in the window, peak", float64(max(peakRSS, rss))/(1<<20), "MiB")
		res.add("servers RSS before the agents", float64(rssOf(idle))/(1<<20), "MiB")
		res.add("servers RSS with the agents (at the end)", float64(rss)/(1<<20), "MiB")
		res.add("servers memory per connected worker",
			growthPer(rssOf(idle), rss, int(sim.registered.Load()), 1)/(1<<10), "KiB")
	}
	if backends != nil {
		used, count := backendCPU(bBefore, bAfter)
		res.add("PostgreSQL backends CPU", cpuShare(used, window), "% of a core")
		res.add("PostgreSQL backends", float64(count), "backends") // a count, not a setting
	}
	res.add("bench process CPU (the agents)", cpuShare(selfAfter.cpu-self.cpu, window), "% of a core")
	return nil
}

// submitHeld creates n jobs of handler kind handler (the agents' own), through the server
// at url, in batches.
func submitHeld(ctx context.Context, url, token, handler string, n int) error {
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		return err
	}
	queue := "bench-agents-" + id.Token()[:8]
	for off := 0; off < n; off += 1000 {
		req := &apitype.BatchCreateJobsRequest{}
		for range min(1000, n-off) {
			req.Jobs = append(req.Jobs, apitype.JobSpec{Handler: handler, Queue: queue})
		}
		out, err := c.CreateJobs(ctx, req)
		if err != nil {
			return fmt.Errorf("submit the runs to hold: %w", err)
		}
		for _, it := range out.Items {
			if it.Error != nil {
				return fmt.Errorf("submit the runs to hold: %s: %s", it.Error.Title, it.Error.Detail)
			}
		}
	}
	return nil
}

// completeHeld ends the leases the agents hold, as succeeded, through the server at url.
func completeHeld(ctx context.Context, sim *agentSim, agents []*agent, url string) {
	var all []apitype.Completion
	for _, a := range agents {
		for _, l := range a.holding() {
			all = append(all, apitype.Completion{RunID: l.RunID, Token: l.Token, Status: "succeeded"})
		}
	}
	for len(all) > 0 {
		k := min(500, len(all))
		req := &apitype.CompleteRequest{Completions: all[:k]}
		all = all[k:]
		a := &agent{sim: sim, url: url}
		if _, err := a.post(ctx, "/v1/attempts/complete", req, nil, time.Minute); err != nil {
			sim.errors.Add(1)
		}
	}
}

// agentSim is what the simulated agents share: the HTTP client and the counters.
type agentSim struct {
	hc       *http.Client
	urls     []string
	prefix   string // of the agents' ids
	handler  string // the one handler kind the agents serve: no job has it
	wait     time.Duration
	hold     int          // leases each agent keeps running (0: idle)
	interval atomic.Int64 // the heartbeat interval the server gave (ns)

	registered, heartbeats, polls, errors, reregistered, leased, lost atomic.Int64

	held     atomic.Int64  // leases the agents hold now
	target   int64         // held leases that close allHeld
	allHeld  chan struct{} // closed once held reached target
	heldOnce sync.Once

	recording atomic.Bool // heartbeat latencies are kept while set (the window)
	mu        sync.Mutex
	lat       []time.Duration
}

// agentCounts is a snapshot of the counters.
type agentCounts struct{ heartbeats, polls, errors, reregistered, leased, lost int64 }

func (s *agentSim) counts() agentCounts {
	return agentCounts{s.heartbeats.Load(), s.polls.Load(), s.errors.Load(), s.reregistered.Load(), s.leased.Load(), s.lost.Load()}
}

// took counts n more leases held, and closes allHeld when the target is reached.
func (s *agentSim) took(n int) {
	if s.held.Add(int64(n)) >= s.target && s.target > 0 {
		s.heldOnce.Do(func() { close(s.allHeld) })
	}
}

// latencies returns the heartbeat latencies recorded, sorted.
func (s *agentSim) latencies() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.lat)
	slices.Sort(out)
	return out
}

// agent is one simulated agent.
type agent struct {
	sim *agentSim
	id  string
	url string

	mu       sync.Mutex
	session  string
	interval time.Duration
	ttl      time.Duration
	held     []apitype.LeaseRef // leases it keeps running (Config.Hold)
}

// run registers (then calls registered), and runs the heartbeat and lease poll loops until
// ctx ends.
func (a *agent) run(ctx context.Context, registered func()) {
	for b := newBackoff(); ; {
		if err := a.register(ctx); err == nil {
			break
		}
		a.sim.errors.Add(1)
		if !b.sleep(ctx) {
			registered()
			return
		}
	}
	a.sim.registered.Add(1)
	registered()
	var wg sync.WaitGroup
	wg.Go(func() { a.heartbeatLoop(ctx) })
	a.pollLoop(ctx)
	wg.Wait()
}

// register registers the agent (a process that starts: no session, nothing held).
func (a *agent) register(ctx context.Context) error {
	var resp apitype.RegisterResponse
	req := &apitype.RegisterRequest{ID: a.id, Capacity: apitype.Capacity{CPU: 1, MemoryMB: 1024, Slots: max(4, a.sim.hold)},
		Handlers: []string{a.sim.handler}}
	if _, err := a.post(ctx, "/v1/workers/register", req, &resp, 30*time.Second); err != nil {
		return err
	}
	a.mu.Lock()
	a.session, a.interval, a.ttl = resp.Session, resp.HeartbeatInterval.Std(), resp.LeaseTTL.Std()
	lost := len(a.held) // a new session: what the old one held is lost
	a.held = nil
	a.mu.Unlock()
	a.sim.took(-lost)
	a.sim.interval.Store(int64(resp.HeartbeatInterval.Std()))
	return nil
}

// reregister registers again after a 404 for session (unless another loop did already).
func (a *agent) reregister(ctx context.Context, session string) {
	a.mu.Lock()
	same := a.session == session
	a.mu.Unlock()
	if same && a.register(ctx) == nil {
		a.sim.reregistered.Add(1)
	}
}

func (a *agent) state() (session string, interval, ttl time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.session, a.interval, a.ttl
}

// holding returns the leases the agent holds.
func (a *agent) holding() []apitype.LeaseRef {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]apitype.LeaseRef{}, a.held...)
}

// drop forgets the held leases of runs (lost, or ended) and returns how many it held.
func (a *agent) drop(runs []string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.held)
	a.held = slices.DeleteFunc(a.held, func(l apitype.LeaseRef) bool { return slices.Contains(runs, l.RunID) })
	return n - len(a.held)
}

// heartbeatLoop sends a heartbeat listing the held leases one interval after the previous
// one was answered (as the Go agent does), sooner after a failure.
func (a *agent) heartbeatLoop(ctx context.Context) {
	b := newBackoff()
	_, wait, _ := a.state()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		session, interval, ttl := a.state()
		start := time.Now()
		var resp apitype.HeartbeatResponse
		status, err := a.post(ctx, "/v1/workers/"+a.id+"/heartbeat",
			&apitype.HeartbeatRequest{Session: session, Held: a.holding()}, &resp, ttl/2)
		took := time.Since(start)
		switch {
		case ctx.Err() != nil:
			return
		case status == http.StatusNotFound:
			a.sim.errors.Add(1)
			a.reregister(ctx, session)
			wait = 0
		case err != nil:
			a.sim.errors.Add(1)
			wait = min(b.next(), interval)
		default:
			b.reset()
			a.sim.heartbeats.Add(1)
			if gone := append(resp.Lost, resp.Ended...); len(gone) > 0 {
				n := a.drop(gone)
				a.sim.lost.Add(int64(n))
				a.sim.took(-n)
			}
			if a.sim.recording.Load() {
				a.sim.mu.Lock()
				a.sim.lat = append(a.sim.lat, took)
				a.sim.mu.Unlock()
			}
			wait = interval
		}
	}
}

// pollLoop keeps one lease poll open, as an agent does: for as many runs as it has room
// for (Config.Hold, or 4 when idle), with max 0 when it holds all it may. An idle agent
// (Hold 0) completes at once, as succeeded, any run it is given (none, when nothing has the
// agents' handler kind); a holding one keeps its runs running.
func (a *agent) pollLoop(ctx context.Context) {
	b := newBackoff()
	wait := apitype.Duration(a.sim.wait)
	for ctx.Err() == nil {
		session, _, _ := a.state()
		room := 4
		if a.sim.hold > 0 {
			room = max(a.sim.hold-len(a.holding()), 0)
		}
		var resp apitype.LeaseResponse
		status, err := a.post(ctx, "/v1/workers/"+a.id+"/lease",
			&apitype.LeaseRequest{Session: session, Max: room, Wait: &wait}, &resp, a.sim.wait+30*time.Second)
		switch {
		case ctx.Err() != nil:
			return
		case status == http.StatusNotFound:
			a.sim.errors.Add(1)
			a.reregister(ctx, session)
			continue
		case err != nil:
			a.sim.errors.Add(1)
			if !b.sleep(ctx) {
				return
			}
			continue
		}
		b.reset()
		a.sim.polls.Add(1)
		if n := a.drop(resp.Lost); n > 0 {
			a.sim.lost.Add(int64(n))
			a.sim.took(-n)
		}
		if len(resp.Leases) == 0 {
			continue
		}
		a.sim.leased.Add(int64(len(resp.Leases)))
		if a.sim.hold > 0 {
			a.mu.Lock()
			for _, l := range resp.Leases {
				a.held = append(a.held, apitype.LeaseRef{RunID: l.RunID, Token: l.Token})
			}
			a.mu.Unlock()
			a.sim.took(len(resp.Leases))
			continue
		}
		done := &apitype.CompleteRequest{}
		for _, l := range resp.Leases {
			done.Completions = append(done.Completions, apitype.Completion{RunID: l.RunID, Token: l.Token, Status: "succeeded"})
		}
		if _, err := a.post(ctx, "/v1/attempts/complete", done, nil, 30*time.Second); err != nil {
			a.sim.errors.Add(1)
		}
	}
}

// post sends body as JSON to the agent's server and decodes a 200 answer into out (when
// not nil). It returns the status (0 when no answer came) and an error for anything but 200.
func (a *agent) post(ctx context.Context, path string, body, out any, timeout time.Duration) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url+path, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.sim.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return resp.StatusCode, fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	b, err = io.ReadAll(resp.Body) // to the end, so the connection is reused
	if err != nil || out == nil {
		return resp.StatusCode, err
	}
	return resp.StatusCode, json.Unmarshal(b, out)
}

// backoff is the Go agent's retry wait: 50 ms doubling up to 5 s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{} }

func (b *backoff) reset() { b.d = 0 }

func (b *backoff) next() time.Duration {
	b.d = min(max(2*b.d, 50*time.Millisecond), 5*time.Second)
	return b.d
}

// sleep waits for the next backoff; false when ctx ended first.
func (b *backoff) sleep(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(b.next()):
		return true
	}
}

// backendWatch reads the CPU time of the PostgreSQL backends serving one database (nil:
// no database to watch).
type backendWatch struct {
	conn *pgx.Conn
}

func newBackendWatch(ctx context.Context, url string) (*backendWatch, error) {
	if url == "" {
		return nil, nil
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("watch backends: %w", err)
	}
	return &backendWatch{conn: conn}, nil
}

func (w *backendWatch) close() {
	if w != nil {
		_ = w.conn.Close(context.Background())
	}
}

// sample reads every backend of the database but this one's own, by pid. A backend that
// ended between the listing and the read is left out.
func (w *backendWatch) sample(ctx context.Context) (map[int]procSample, error) {
	if w == nil {
		return nil, nil
	}
	rows, err := w.conn.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return nil, fmt.Errorf("watch backends: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("watch backends: %w", err)
	}
	out := make(map[int]procSample, len(pids))
	for _, pid := range pids {
		s, err := readProc(int(pid))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("watch backends: %w", err)
		}
		out[int(pid)] = s
	}
	return out, nil
}

// backendCPU is the CPU time the backends used between two samples, and how many were
// counted: a backend in both used the difference; one only in after connected in between,
// so all its CPU time is the window's; one only in before ended in between, and what it used
// since is lost with it.
func backendCPU(before, after map[int]procSample) (time.Duration, int) {
	var d time.Duration
	for pid, a := range after {
		d += a.cpu - before[pid].cpu
	}
	return d, len(after)
}
