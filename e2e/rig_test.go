package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// This file is the rig of TestClusterFailover and TestChaos: a cluster of restartable
// `stint server` processes and `stint worker` processes on one PostgreSQL database, a log of
// every kill and start, a producer of one-off jobs, cron jobs firing every second, and the
// checks of the invariants once the load has stopped.

// rigEvent is one entry of the rig's log: a process killed (SIGKILL sent) or started
// (a server listening again, a worker's process running).
type rigEvent struct {
	at   time.Time
	kill bool
	name string
}

func (e rigEvent) String() string {
	what := "start"
	if e.kill {
		what = "kill"
	}
	return fmt.Sprintf("%s %s %s", e.at.UTC().Format("15:04:05.000"), what, e.name)
}

// rigWorker is one `stint worker` of the rig; restarted, it keeps its id.
type rigWorker struct {
	name    string
	servers string // its --server list
	token   string // its worker token, bound to its id
	w       *fleetWorker
}

// rig is a cluster under test.
type rig struct {
	t       *testing.T
	servers []*clusterServer // server i is named s<i+1>, its --id
	clients []*client.Client // one per server, at its fixed address
	all     *client.Client   // every server, for reads that must survive any one's death
	answers *answerLog       // what the clients above got that was not a success
	workers []*rigWorker     // worker i is w<i+1>
	marks   string           // where every attempt of the rig's jobs leaves a file as it starts

	mu     sync.Mutex
	up     map[string]bool
	events []rigEvent
}

// rigConfig shapes a rig.
type rigConfig struct {
	servers, workers int
	leaseTTL         string // the servers' --lease-ttl ("": the default)
	// store is the servers' --store: "" for a fresh database on STINT_TEST_DATABASE_URL,
	// sqliteStore for SQLite in the server's data directory (one server only).
	store string
	// dataDir is the first server's --data directory ("": a temporary one).
	dataDir string
	// serverArgs are more flags of every server.
	serverArgs []string
}

// sqliteStore as rigConfig.store runs the rig's one server on SQLite.
const sqliteStore = "sqlite"

// startRig starts the servers on their store (by default a fresh PostgreSQL database,
// skipping the test without one), then the workers, each given every server's address
// starting at a different one so that they spread over the servers, and waits until a
// server leads.
func startRig(t *testing.T, cfg rigConfig) *rig {
	t.Helper()
	var storeArgs []string
	switch cfg.store {
	case "":
		storeArgs = []string{"--store", freshPostgres(t)}
	case sqliteStore:
		require.Equal(t, 1, cfg.servers, "SQLite serves one server")
	default:
		storeArgs = []string{"--store", cfg.store}
	}
	r := &rig{t: t, up: map[string]bool{}, marks: t.TempDir(), answers: newAnswerLog()}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("what was killed and started:\n%s", joinEvents(r.log()))
		}
	})
	urls := make([]string, cfg.servers)
	for i := range cfg.servers {
		data := t.TempDir()
		if i == 0 && cfg.dataDir != "" {
			data = cfg.dataDir
		}
		s := &clusterServer{addr: freeAddr(t)}
		s.args = append(slices.Clone(storeArgs), "--data", data, "--id", serverName(i))
		if cfg.leaseTTL != "" {
			s.args = append(s.args, "--lease-ttl", cfg.leaseTTL)
		}
		s.args = append(s.args, cfg.serverArgs...)
		r.servers = append(r.servers, s)
		urls[i] = s.url()
		c, err := client.New(s.url(), client.WithToken(adminToken), client.WithHTTPClient(r.answers.client()))
		require.NoError(t, err)
		r.clients = append(r.clients, c)
	}
	var err error
	r.all, err = client.New(strings.Join(urls, ","), client.WithToken(adminToken), client.WithHTTPClient(r.answers.client()))
	require.NoError(t, err)
	for i := range r.servers {
		r.start(serverName(i))
	}
	for i := range cfg.workers {
		rot := append(slices.Clone(urls[i%len(urls):]), urls[:i%len(urls)]...)
		r.workers = append(r.workers, &rigWorker{name: fmt.Sprintf("w%d", i+1), servers: strings.Join(rot, ",")})
		r.start(r.workers[i].name)
	}
	waitFor(t, 30*time.Second, "a leader", func() bool { return r.leader() != "" })
	return r
}

func serverName(i int) string { return fmt.Sprintf("s%d", i+1) }

// server returns the server named name ("s2"), or nil when name names a worker.
func (r *rig) server(name string) *clusterServer {
	for i, s := range r.servers {
		if serverName(i) == name {
			return s
		}
	}
	return nil
}

func (r *rig) worker(name string) *rigWorker {
	for _, w := range r.workers {
		if w.name == name {
			return w
		}
	}
	return nil
}

// kill sends SIGKILL to the process named name and waits until it is gone. It is marked
// down, and logged, before the signal: the producer stops choosing it at once.
func (r *rig) kill(name string) {
	r.mu.Lock()
	r.up[name] = false
	r.events = append(r.events, rigEvent{at: time.Now(), kill: true, name: name})
	r.mu.Unlock()
	if s := r.server(name); s != nil {
		s.p.kill()
		return
	}
	r.worker(name).w.kill()
}

// start starts the process named name again: a server at its address, listening once
// start returns; a worker with its id.
func (r *rig) start(name string) {
	r.t.Helper()
	if s := r.server(name); s != nil {
		s.start(r.t)
	} else {
		w := r.worker(name)
		if w.token == "" { // made once, while the servers are up; a restart reuses it
			w.token = workerToken(r.t, w.servers, w.name)
		}
		w.w = startClusterWorkerWith(r.t, w.servers, w.name, w.token)
	}
	r.mu.Lock()
	r.up[name] = true
	r.events = append(r.events, rigEvent{at: time.Now(), name: name})
	r.mu.Unlock()
}

// names lists the rig's processes: its servers, then its workers.
func (r *rig) names() []string {
	var out []string
	for i := range r.servers {
		out = append(out, serverName(i))
	}
	for _, w := range r.workers {
		out = append(out, w.name)
	}
	return out
}

func (r *rig) isUp(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.up[name]
}

// upServers lists the indexes of the servers up now.
func (r *rig) upServers() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for i := range r.servers {
		if r.up[serverName(i)] {
			out = append(out, i)
		}
	}
	return out
}

// log returns a copy of the rig's log, oldest first.
func (r *rig) log() []rigEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// leader asks the servers that are up who leads: the id of the first answer that names
// one, "" when none does (or none answered).
func (r *rig) leader() string {
	for _, i := range r.upServers() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		cl, err := r.clients[i].Cluster(ctx)
		cancel()
		if err == nil && cl.Leader != nil {
			return cl.Leader.ID
		}
	}
	return ""
}

// cronJob is a job of the rig's load that fires every second.
type cronJob struct {
	name string
	spec apitype.JobSpec
}

// markEnv and markScript make a job leave a file named after its run and attempt in the
// rig's marks directory as soon as it starts, then run then: a lost attempt without its
// file never started on its worker.
func (r *rig) markEnv() map[string]string { return map[string]string{"MARKS": r.marks} }

func markScript(then string) string {
	return `touch "$MARKS/$STINT_RUN_ID.$STINT_ATTEMPT"` + then
}

// started reports whether attempt n of run runID started on a worker (it left its file).
func (r *rig) started(runID string, n int) bool {
	_, err := os.Stat(filepath.Join(r.marks, fmt.Sprintf("%s.%d", runID, n)))
	return err == nil
}

// cronJobs are the rig's cron jobs: a shell job on the cron grid and a command on an
// @every grid. maxDisruptions is their retry.max_disruptions.
func (r *rig) cronJobs(maxDisruptions int) []cronJob {
	retry := &apitype.RetryPolicy{MaxAttempts: 1, MaxDisruptions: ptr(maxDisruptions)}
	return []cronJob{
		{name: "tick-cron", spec: apitype.JobSpec{Name: "tick-cron", Shell: markScript(""), Env: r.markEnv(),
			Retry: retry, Schedule: &apitype.Schedule{Cron: "* * * * * *"}}},
		{name: "tick-every", spec: apitype.JobSpec{Name: "tick-every", Command: []string{"sh", "-c", markScript("")},
			Env: r.markEnv(), Retry: retry, Schedule: &apitype.Schedule{Cron: "@every 1s"}}},
	}
}

// createCronJobs creates jobs, each through another server (a schedule created on a
// follower reaches the leader's cron loop), and waits until each has fired twice.
func (r *rig) createCronJobs(jobs []cronJob) {
	r.t.Helper()
	ctx := context.Background()
	for i, j := range jobs {
		_, _, err := r.clients[i%len(r.clients)].CreateJob(ctx, &j.spec)
		require.NoError(r.t, err, "create cron job %s", j.name)
	}
	waitFor(r.t, 30*time.Second, "each cron job to fire twice", func() bool {
		for _, j := range jobs {
			page, err := r.all.ListRuns(ctx, client.ListRunsOptions{Job: j.name, Limit: 2})
			if err != nil || len(page.Items) < 2 {
				return false
			}
		}
		return true
	})
}

// oneOffKind is a kind of one-off job the producer submits: markScript(then).
type oneOffKind struct {
	name   string
	then   string
	weight int
}

// oneOffKinds mix short jobs with jobs that are running when a process dies: "sleep 5"
// outlives the failover test's lease TTL (4 s), so a lease not carried over to another
// server would expire under it and show as a second attempt.
var oneOffKinds = []oneOffKind{ //nolint:gochecknoglobals // a read-only table
	{name: "sleep 5", then: "; exec sleep 5", weight: 3},
	{name: "sleep 2", then: "; exec sleep 2", weight: 3},
	{name: "true", weight: 4},
}

// producer submits one-off jobs, one every interval, each to a random server that is up.
// A submission whose answer is lost (its server died) is sent again, with the same
// idempotency key, to another server until one answers: a run counts as accepted once a
// server answered 2xx.
type producer struct {
	r              *rig
	rng            *rand.Rand
	maxDisruptions int
	cancel         context.CancelFunc
	done           chan struct{}

	mu        sync.Mutex
	accepted  map[string]string // run id -> kind
	resent    int               // submissions that needed more than one try
	deduped   int               // resent submissions answered with the run of an earlier try
	abandoned []string          // submissions no server accepted within a minute
	refused   []string          // submissions answered 4xx: the load's own mistake or a defect
}

func (r *rig) startProducer(seed uint64, interval time.Duration, maxDisruptions int) *producer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &producer{r: r, rng: rand.New(rand.NewPCG(seed, 0x5eed)), maxDisruptions: maxDisruptions,
		cancel: cancel, done: make(chan struct{}), accepted: map[string]string{}}
	go p.run(ctx, interval)
	r.t.Cleanup(p.stop)
	return p
}

// stop ends the stream and waits for the submission in flight.
func (p *producer) stop() {
	p.cancel()
	<-p.done
}

func (p *producer) run(ctx context.Context, interval time.Duration) {
	defer close(p.done)
	total := 0
	for _, k := range oneOffKinds {
		total += k.weight
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		w := p.rng.IntN(total)
		kind := oneOffKinds[0]
		for _, k := range oneOffKinds {
			if w < k.weight {
				kind = k
				break
			}
			w -= k.weight
		}
		p.submit(ctx, n, kind)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// submit sends one job until a server accepts it, ctx ends or a minute passes.
func (p *producer) submit(ctx context.Context, n int, kind oneOffKind) {
	spec := &apitype.JobSpec{
		Shell:          markScript(kind.then),
		Env:            p.r.markEnv(),
		IdempotencyKey: fmt.Sprintf("load-%d", n),
		Retry:          &apitype.RetryPolicy{MaxAttempts: 1, MaxDisruptions: ptr(p.maxDisruptions)},
	}
	deadline := time.Now().Add(time.Minute)
	for try := 0; ; try++ {
		if up := p.r.upServers(); len(up) > 0 {
			c := p.r.clients[up[p.rng.IntN(len(up))]]
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, created, err := c.CreateJob(rctx, spec)
			cancel()
			if err == nil {
				p.mu.Lock()
				p.accepted[resp.Run.ID] = kind.name
				if try > 0 {
					p.resent++
					if !created {
						p.deduped++
					}
				}
				p.mu.Unlock()
				return
			}
			if s := client.StatusCode(err); s >= 400 && s < 500 && s != 408 && s != 429 {
				p.mu.Lock()
				p.refused = append(p.refused, fmt.Sprintf("%s: %v", spec.IdempotencyKey, err))
				p.mu.Unlock()
				return
			}
		}
		if ctx.Err() != nil {
			return // stopped: a submission not yet answered was never accepted
		}
		if time.Now().After(deadline) {
			p.mu.Lock()
			p.abandoned = append(p.abandoned, spec.IdempotencyKey)
			p.mu.Unlock()
			return
		}
		select { // a retry's pause, not a wait for a condition
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// results returns what the producer did; call it after stop.
func (p *producer) results() (accepted map[string]string, resent, deduped int, abandoned, refused []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.resent, p.deduped, p.abandoned, p.refused
}

// runningOneOffs counts the one-off runs running now.
func (r *rig) runningOneOffs() int {
	page, err := r.all.ListRuns(context.Background(), client.ListRunsOptions{Status: "running", Limit: 1000})
	if err != nil {
		return 0
	}
	n := 0
	for _, run := range page.Items {
		if run.Trigger != "cron" {
			n++
		}
	}
	return n
}

// quiesce pauses the cron jobs, waits until no run is open, and returns every run.
func (r *rig) quiesce(jobs []cronJob, timeout time.Duration) []*apitype.Run {
	r.t.Helper()
	ctx := context.Background()
	for _, j := range jobs {
		waitFor(r.t, 30*time.Second, "pausing "+j.name, func() bool {
			_, err := r.all.PauseJob(ctx, j.name)
			return err == nil
		})
	}
	var open []string
	waitFor(r.t, timeout, "every run to end", func() bool {
		open = open[:0]
		for _, st := range []string{"waiting", "scheduled", "queued", "running"} {
			page, err := r.all.ListRuns(ctx, client.ListRunsOptions{Status: st, Limit: 5})
			if err != nil {
				return false
			}
			for _, run := range page.Items {
				open = append(open, fmt.Sprintf("%s %s %s on %q: %s", run.ID, run.JobName, run.Status, run.WorkerID, run.PendingReason))
			}
		}
		return len(open) == 0
	})
	var runs []*apitype.Run
	cursor := ""
	for {
		page, err := r.all.ListRuns(ctx, client.ListRunsOptions{Limit: 1000, Cursor: cursor})
		require.NoError(r.t, err, "list runs")
		runs = append(runs, page.Items...)
		if page.NextCursor == "" {
			return runs
		}
		cursor = page.NextCursor
	}
}

// requireSucceeded checks that every run ended succeeded and that every accepted one-off
// run is among them. It returns the runs by id.
func requireSucceeded(t *testing.T, runs []*apitype.Run, accepted map[string]string) map[string]*apitype.Run {
	t.Helper()
	byID := map[string]*apitype.Run{}
	var bad []string
	for _, run := range runs {
		byID[run.ID] = run
		if run.Status != "succeeded" {
			bad = append(bad, fmt.Sprintf("%s (%s, %s, attempt %d, disruptions %d): %s", run.ID, run.JobName, run.Status, run.Attempt, run.Disruptions, run.Error))
		}
	}
	require.Empty(t, bad, "runs that did not succeed")
	for id, kind := range accepted {
		require.NotNil(t, byID[id], "accepted run %s (%s) is not in the store", id, kind)
	}
	return byID
}

// cronSeries checks the runs of each cron job: one run per instant (invariant 4), every
// instant from the first to the last one second after the one before (none missed). It
// returns the number of runs per job.
func cronSeries(t *testing.T, runs []*apitype.Run, jobs []cronJob) map[string]int {
	t.Helper()
	per := map[string][]*apitype.Run{}
	for _, run := range runs {
		if run.Trigger == "cron" {
			per[run.JobName] = append(per[run.JobName], run)
		}
	}
	counts := map[string]int{}
	for _, j := range jobs {
		series := per[j.name]
		require.NotEmpty(t, series, "cron job %s fired", j.name)
		slices.SortFunc(series, func(a, b *apitype.Run) int { return instantOf(t, a).Compare(instantOf(t, b)) })
		for i := 1; i < len(series); i++ {
			prev, cur := series[i-1], series[i]
			pa, ca := instantOf(t, prev), instantOf(t, cur)
			require.False(t, ca.Equal(pa), "%s: instant %s fired twice: runs %s and %s",
				j.name, ca.Format(time.RFC3339Nano), prev.ID, cur.ID)
			require.Equal(t, time.Second, ca.Sub(pa),
				"%s: no run between the instants %s (run %s) and %s (run %s): an instant was missed",
				j.name, pa.Format(time.RFC3339Nano), prev.ID, ca.Format(time.RFC3339Nano), cur.ID)
		}
		counts[j.name] = len(series)
	}
	return counts
}

// outages lists the windows in which no server was up, from the log.
func outages(events []rigEvent) [][2]time.Time {
	up := 0
	var out [][2]time.Time
	var from time.Time
	for _, e := range events {
		if !strings.HasPrefix(e.name, "s") {
			continue
		}
		if e.kill {
			if up--; up == 0 {
				from = e.at
			}
			continue
		}
		if up++; up == 1 && !from.IsZero() {
			out = append(out, [2]time.Time{from, e.at})
		}
	}
	return out
}

// countKills counts the kills of the log, of servers and of workers.
func countKills(events []rigEvent) (servers, workers int) {
	for _, e := range events {
		switch {
		case !e.kill:
		case strings.HasPrefix(e.name, "s"):
			servers++
		default:
			workers++
		}
	}
	return servers, workers
}

// losses checks every attempt of runs that did not succeed. Each must be lost, count as a
// disruption of its run, and be explained by the log: its worker was killed while it held
// the attempt (only when workerKills), or it never started on its worker (it left no file)
// and a server was killed just after leasing it (within ten seconds): a lease the dying
// server granted but never delivered, which the worker could not know of and which ends
// when it expires. It returns how many of each.
func (r *rig) losses(runs []*apitype.Run, events []rigEvent, workerKills bool) (withWorker, undelivered int) {
	r.t.Helper()
	for _, run := range runs {
		if run.Attempt <= 1 && run.Disruptions == 0 {
			continue
		}
		full, err := r.all.GetRun(r.t.Context(), run.ID)
		require.NoError(r.t, err)
		lost := 0
		for _, a := range full.Attempts {
			if a.Status == "succeeded" {
				continue
			}
			lost++
			what := fmt.Sprintf("run %s (%s) attempt %d on %s (%s to %v, %q)", run.ID, run.JobName, a.N, a.WorkerID,
				a.StartedAt.UTC().Format("15:04:05.000"), a.FinishedAt, a.Error)
			require.Equal(r.t, "lost", a.Status, what)
			require.NotNil(r.t, a.FinishedAt, what)
			switch {
			case workerKills && killedDuring(events, a):
				withWorker++
			case !r.started(run.ID, a.N) && serverKilledAfter(events, a.StartedAt, 10*time.Second):
				undelivered++
			default:
				r.t.Fatalf("%s was lost, but its worker was not killed while it held it, and it had started there (or no server died just after leasing it)", what)
			}
		}
		require.Equal(r.t, lost, full.Disruptions, "run %s (%s): each lost attempt is a disruption: %+v", run.ID, run.JobName, full.Attempts)
	}
	return withWorker, undelivered
}

// killedDuring reports whether the log has a kill of a's worker while a was held: after
// its start (less two seconds: a lease granted to a poll in flight when its worker died)
// and before its end.
func killedDuring(events []rigEvent, a apitype.Attempt) bool {
	for _, e := range events {
		if e.kill && e.name == a.WorkerID && !e.at.Before(a.StartedAt.Add(-2*time.Second)) && !e.at.After(*a.FinishedAt) {
			return true
		}
	}
	return false
}

// serverKilledAfter reports whether the log has a kill of a server within d after at.
func serverKilledAfter(events []rigEvent, at time.Time, d time.Duration) bool {
	for _, e := range events {
		if e.kill && strings.HasPrefix(e.name, "s") && !e.at.Before(at) && !e.at.After(at.Add(d)) {
			return true
		}
	}
	return false
}

func joinEvents(events []rigEvent) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("  " + e.String() + "\n")
	}
	return b.String()
}
