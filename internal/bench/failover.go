package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/id"
)

// failoverServers is how many servers the failover workload runs.
const failoverServers = 3

// failoverJobs is how many one-off jobs the failover workload submits across the kill
// (half before it, half after) to count the runs lost.
const failoverJobs = 200

// serverProc is a `stint server` process the failover workload started.
type serverProc struct {
	id   string
	url  string
	cmd  *exec.Cmd
	done chan struct{}
}

// kill sends SIGKILL and waits for the process to end.
func (p *serverProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

var listenRe = regexp.MustCompile(`stint server listening.*addr=(\S+)`)

// startServerProc runs `stint server` with id on storeURL, with token as its admin token
// (STINT_BOOTSTRAP_TOKEN), and waits until it listens.
func startServerProc(ctx context.Context, bin, id, storeURL, dataDir, token string, extra ...string) (*serverProc, error) {
	cmd := exec.Command(bin, append([]string{"server", "--addr", "127.0.0.1:0", "--store", storeURL, "--data", dataDir,
		"--id", id, "--log-level", "info"}, extra...)...)
	cmd.Env = append(os.Environ(), "STINT_BOOTSTRAP_TOKEN="+token)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("server %s: %w", id, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start server %s: %w", id, err)
	}
	p := &serverProc{id: id, cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listenRe.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	select {
	case a := <-addr:
		p.url = "http://" + a
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("server %s exited before listening", id)
	case <-ctx.Done():
		p.kill()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		p.kill()
		return nil, fmt.Errorf("server %s did not listen within 30s", id)
	}
}

// failover: three servers on one scratch PostgreSQL database, workers attached to all
// three, a cron job firing every second and a stream of one-off jobs; the leader is
// killed with SIGKILL. Figures: the seconds from the kill until another server leads and
// until it fires cron again, the accepted runs that did not succeed, and the cron instants
// fired twice or missed.
func runFailover(ctx context.Context, cfg Config) (*Result, error) {
	if !strings.HasPrefix(cfg.Store, "postgres://") && !strings.HasPrefix(cfg.Store, "postgresql://") {
		return nil, errors.New("bench failover: needs --store with a postgres:// URL (servers share one database)")
	}
	storeURL, drop, err := scratchDatabase(ctx, cfg.Store)
	if err != nil {
		return nil, err
	}
	defer drop()
	bin := cfg.WorkerBinary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("bench failover: find the stint binary: %w", err)
		}
	}
	dataDir, err := os.MkdirTemp("", "stint-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dataDir)

	// The servers run with authentication on, as they do outside stint dev: one admin token
	// for the bench's clients and workers.
	token, err := newToken()
	if err != nil {
		return nil, fmt.Errorf("bench failover: %w", err)
	}
	servers := map[string]*serverProc{}
	defer func() {
		for _, p := range servers {
			p.kill()
		}
	}()
	var urls []string
	for i := 1; i <= failoverServers; i++ {
		p, err := startServerProc(ctx, bin, "s"+strconv.Itoa(i), storeURL, dataDir, token)
		if err != nil {
			return nil, err
		}
		servers[p.id] = p
		urls = append(urls, p.url)
	}
	workers := cfg.Workers
	if workers == 0 {
		workers = 2
	}
	wcfg := cfg
	wcfg.Workers, wcfg.WorkerBinary = workers, bin
	all := strings.Join(urls, ",")
	stopWorkers, err := startWorkers(ctx, wcfg, func(int) string { return all }, token)
	if err != nil {
		return nil, err
	}
	defer stopWorkers()

	clients := map[string]*client.Client{}
	for sid, p := range servers {
		if clients[sid], err = client.New(p.url, client.WithToken(token)); err != nil {
			return nil, err
		}
	}
	leader, _, err := waitLeader(ctx, clients["s1"], "")
	if err != nil {
		return nil, err
	}
	queue := "bench-failover-" + id.New(time.Now())[:10]
	tick := "tick-" + queue
	lc := clients[leader]
	if _, _, err := lc.CreateJob(ctx, &apitype.JobSpec{Name: tick, Handler: "noop", Queue: queue,
		Schedule: &apitype.Schedule{Cron: "* * * * * *"}}); err != nil {
		return nil, fmt.Errorf("create cron job: %w", err)
	}
	var survivor *client.Client
	for sid, c := range clients {
		if sid != leader {
			survivor = c
		}
	}
	submit := func(n int) ([]string, error) {
		var ids []string
		for range n {
			resp, _, err := survivor.CreateJob(ctx, &apitype.JobSpec{Handler: "noop", Queue: queue})
			if err != nil {
				return nil, fmt.Errorf("submit: %w", err)
			}
			ids = append(ids, resp.Run.ID)
		}
		return ids, nil
	}
	runIDs, err := submit(failoverJobs / 2)
	if err != nil {
		return nil, err
	}
	if err := pollUntil(ctx, 30*time.Second, "three cron ticks", func() (bool, error) {
		runs, err := listRuns(ctx, survivor, tick)
		return len(runs) >= 3, err
	}); err != nil {
		return nil, err
	}

	servers[leader].kill()
	killed := time.Now()
	delete(servers, leader)
	next, _, err := waitLeader(ctx, survivor, leader)
	if err != nil {
		return nil, err
	}
	elected := time.Since(killed)
	more, err := submit(failoverJobs / 2)
	if err != nil {
		return nil, err
	}
	runIDs = append(runIDs, more...)
	var firstFire time.Time
	if err := pollUntil(ctx, 30*time.Second, "the new leader's first cron fire", func() (bool, error) {
		runs, err := listRuns(ctx, survivor, tick)
		for _, r := range runs {
			if r.CreatedAt.After(killed) && (firstFire.IsZero() || r.CreatedAt.Before(firstFire)) {
				firstFire = r.CreatedAt
			}
		}
		return !firstFire.IsZero(), err
	}); err != nil {
		return nil, err
	}
	// A few more ticks under the new leader, then every one-off run must have ended.
	if err := pollUntil(ctx, 30*time.Second, "ticks under the new leader", func() (bool, error) {
		runs, err := listRuns(ctx, survivor, tick)
		n := 0
		for _, r := range runs {
			if r.CreatedAt.After(firstFire.Add(2 * time.Second)) {
				n++
			}
		}
		return n >= 2, err
	}); err != nil {
		return nil, err
	}
	lost := 0
	for _, rid := range runIDs {
		var run *apitype.Run
		if err := pollUntil(ctx, 60*time.Second, "run "+rid+" to end", func() (bool, error) {
			var err error
			run, err = survivor.GetRun(ctx, rid)
			return err == nil && isFinal(run.Status), err
		}); err != nil {
			return nil, err
		}
		if run.Status != "succeeded" {
			lost++
		}
	}
	runs, err := listRuns(ctx, survivor, tick)
	if err != nil {
		return nil, err
	}
	twice, missed := cronSeries(runs)

	res := &Result{Workload: "failover", Store: fmt.Sprintf("postgres, %d servers, %d remote worker processes", failoverServers, workers),
		Params: map[string]string{"killed": leader, "new leader": next, "leader ttl": "1s", "one-off jobs": strconv.Itoa(len(runIDs))}}
	res.add("new leader elected after the kill", elected.Seconds(), "s")
	res.add("cron fires again after the kill", firstFire.Sub(killed).Seconds(), "s")
	res.add("runs lost", float64(lost), "runs")
	res.add("cron instants fired twice", float64(twice), "instants")
	res.add("cron instants missed", float64(missed), "instants")
	return res, nil
}

// waitLeader polls c until it names a leader other than not.
func waitLeader(ctx context.Context, c *client.Client, not string) (string, int64, error) {
	var (
		leader string
		term   int64
	)
	err := pollUntil(ctx, 30*time.Second, "a leader", func() (bool, error) {
		cl, err := c.Cluster(ctx)
		if err != nil || cl.Leader == nil {
			return false, err
		}
		leader, term = cl.Leader.ID, cl.Leader.Term
		return leader != not, nil
	})
	return leader, term, err
}

// pollUntil calls cond every 20 ms until it holds, fails, or timeout passes: the bench
// watches other processes, which send it no signal.
func pollUntil(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// listRuns lists the runs of job name (at most 1000).
func listRuns(ctx context.Context, c *client.Client, name string) ([]*apitype.Run, error) {
	page, err := c.ListRuns(ctx, client.ListRunsOptions{Job: name, Limit: 1000})
	if err != nil {
		return nil, err
	}
	return page.Items, nil
}

// cronSeries counts the instants of a every-second series that have more than one run,
// and the seconds between its first and last instant that have none. A run counts for the
// instant it was fired for, which a retry does not move (its scheduled_for it may).
func cronSeries(runs []*apitype.Run) (twice, missed int) {
	var at []time.Time
	seen := map[time.Time]int{}
	for _, r := range runs {
		if r.Instant == nil {
			continue // not a cron run
		}
		t := r.Instant.UTC()
		if seen[t]++; seen[t] == 2 {
			twice++
		}
		at = append(at, t)
	}
	if len(at) == 0 {
		return twice, 0
	}
	first, last := slices.MinFunc(at, time.Time.Compare), slices.MaxFunc(at, time.Time.Compare)
	for t := first; !t.After(last); t = t.Add(time.Second) {
		if seen[t] == 0 {
			missed++
		}
	}
	return twice, missed
}

func isFinal(status string) bool {
	switch status {
	case "succeeded", "failed", "cancelled", "skipped":
		return true
	}
	return false
}
