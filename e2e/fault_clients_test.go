package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// prober reads a page of runs from a server every 100 ms, each time on a new connection from
// 127.0.0.1, and notes how long each answer took: how the server serves everyone else while a
// fault holds.
type prober struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	took  []time.Duration
	fails []string
}

func startProber(t *testing.T, url string) *prober {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	c, err := client.New(url, client.WithToken(adminToken), client.WithHTTPClient(hc))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			start := time.Now()
			_, err := c.ListRuns(ctx, client.ListRunsOptions{Limit: 10})
			p.mu.Lock()
			if err == nil {
				p.took = append(p.took, time.Since(start))
			} else if ctx.Err() == nil {
				p.fails = append(p.fails, err.Error())
			}
			p.mu.Unlock()
			select { // the probe's pace, not a wait for a condition
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *prober) stop() {
	p.cancel()
	<-p.done
}

// results stops the prober and requires that every probe was answered; it returns how many
// there were, the median and the slowest.
func (p *prober) results(t *testing.T) (n int, median, slowest time.Duration) {
	t.Helper()
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Empty(t, p.fails, "probes that failed")
	require.NotEmpty(t, p.took, "probes answered")
	took := slices.Clone(p.took)
	slices.Sort(took)
	return len(took), took[len(took)/2], took[len(took)-1]
}

// TestFaultSlowLogConsumer: eight clients follow the log of a job that writes 8 MiB and read
// nothing, while one server and two workers run a stream of one-off jobs. The server writes
// each stream until the connection's buffers are full, and then waits on it for no more than
// its write timeout (5 s here, so that the test sees the cut; 1 min by default), which ends
// the stream: a stalled reader costs a connection and a goroutine for that long, and holds
// no store transaction (logs are read page by page, then written). Meanwhile:
//
//   - other clients' reads, each on a new connection, are answered, and submissions accepted;
//   - the workers' heartbeats all succeed: no attempt is lost, every run succeeded;
//   - the job's whole output is stored and readable afterwards.
func TestFaultSlowLogConsumer(t *testing.T) {
	t.Parallel()
	const writeTimeout = 5 * time.Second
	r := startRig(t, rigConfig{servers: 1, workers: 2, store: sqliteStore,
		serverArgs: []string{"--write-timeout", writeTimeout.String()}})
	p := r.startProducer(uint64(time.Now().UnixNano()), 250*time.Millisecond, 3)
	c := r.clients[0]
	srv := r.servers[0]

	const output = 8 << 20
	chatty := submitSpec(t, c, &apitype.JobSpec{Env: r.markEnv(),
		Shell: fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x; while [ ! -e "$MARKS/release" ]; do sleep 0.1; done`, output)})
	waitFor(t, time.Minute, "the chatty job running", func() bool {
		run, err := c.GetRun(context.Background(), chatty)
		return err == nil && run.Status == "running"
	})

	// Followers with a small receive buffer, set before the connection is made (the window
	// is agreed then): the server's writes block once its own buffer is full.
	const followers = 8
	smallWindow := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conns := make([]net.Conn, followers)
	for i := range conns {
		conn, err := smallWindow.Dial("tcp", srv.addr)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		_, err = fmt.Fprintf(conn, "GET /v1/runs/%s/logs?follow=true HTTP/1.1\r\nHost: stint\r\nAuthorization: Bearer %s\r\n\r\n", chatty, adminToken)
		require.NoError(t, err)
		conns[i] = conn
	}
	stalled := time.Now()
	pr := startProber(t, srv.url())
	<-time.After(2 * writeTimeout) // how long the readers stall: the fault itself, not a wait for a condition
	r.acceptedSince(stalled, 4, "while the followers stalled")
	probes, median, slowest := pr.results(t)

	// Each stalled stream was cut by the server: what it had buffered arrives, then the
	// connection ends in the middle of the chunked body.
	for i, conn := range conns {
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "follower %d", i)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		got, err := io.Copy(io.Discard, resp.Body)
		require.Error(t, err, "follower %d: the stream ended cleanly after %d bytes, with the job still running", i, got)
		require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "follower %d: the server did not cut the stalled stream (%d bytes)", i, got)
		require.Less(t, got, int64(output), "follower %d", i)
	}

	require.NoError(t, os.WriteFile(filepath.Join(r.marks, "release"), nil, 0o644))
	run := waitRun(t, c, chatty, time.Minute)
	require.Equal(t, "succeeded", run.Status, run.Error)
	require.Len(t, runLogs(t, c, chatty, "stdout"), output, "the whole output was stored")

	p.stop()
	accepted, _, _, abandoned, refused := p.results()
	require.Empty(t, refused, "submissions answered 4xx")
	require.Empty(t, abandoned, "submissions no server accepted within a minute")
	runs := r.quiesce(nil, time.Minute)
	requireSucceeded(t, runs, accepted)
	for _, run := range runs {
		require.Zero(t, run.Disruptions, "run %s lost an attempt", run.ID)
	}
	r.answers.requireNone(t)
	r.requireServersUp(t)
	require.False(t, r.workerLogged(`msg="heartbeat failed"`), "a worker's heartbeat failed")
	t.Logf("%d followers stalled for %s (write timeout %s), each cut by the server; meanwhile %d probes on new connections answered, median %s, slowest %s; %d one-off runs accepted, %d runs in all succeeded, none disrupted, no heartbeat failed",
		followers, 2*writeTimeout, writeTimeout, probes, median.Round(time.Millisecond), slowest.Round(time.Millisecond), len(accepted), len(runs))
}

// TestFaultSlowloris opens 1,000 connections from one address (127.0.0.2) that each send a
// request line and then one header line a second, never ending the header, while one server
// with its default limits (10 s to send a header, 256 connections per address still sending
// one) and two workers run a stream of one-off jobs. The server holds at most 256 of them,
// closes the rest at once, and closes the ones it holds when their header time is up.
// Meanwhile other clients (from 127.0.0.1, a new connection per read) are answered, the
// workers' heartbeats succeed and every run succeeded.
func TestFaultSlowloris(t *testing.T) {
	t.Parallel()
	r := startRig(t, rigConfig{servers: 1, workers: 2, store: sqliteStore})
	p := r.startProducer(uint64(time.Now().UnixNano()), 250*time.Millisecond, 3)
	srv := r.servers[0]
	const attackers = 1000
	const headerTimeout, perAddress = 10 * time.Second, 256 // the server's defaults (docs/limits.md)

	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	ctx, stopAttack := context.WithCancel(context.Background())
	defer stopAttack()
	held := make([]time.Duration, attackers) // how long the server kept each connection
	var wg sync.WaitGroup
	began := time.Now()
	pr := startProber(t, srv.url())
	for i := range attackers {
		conn, err := dialer.DialContext(ctx, "tcp", srv.addr)
		if i == 0 && err != nil {
			t.Skipf("cannot connect from 127.0.0.2: %v", err)
		}
		require.NoError(t, err, "connection %d", i)
		opened := time.Now()
		wg.Go(func() {
			defer conn.Close()
			go func() { // a header line a second, until the server closes the connection
				if _, err := io.WriteString(conn, "GET /v1/runs HTTP/1.1\r\nHost: stint\r\n"); err != nil {
					return
				}
				for n := 0; ; n++ {
					select {
					case <-ctx.Done():
						return
					case <-time.After(time.Second):
					}
					if _, err := fmt.Fprintf(conn, "X-Slow-%d: y\r\n", n); err != nil {
						return
					}
				}
			}()
			_, _ = io.Copy(io.Discard, conn) // returns when the server closes it
			held[i] = time.Since(opened)
		})
	}
	wg.Wait()
	attack := time.Since(began)
	stopAttack()
	probes, median, slowest := pr.results(t)
	r.acceptedSince(began, 4, "during the attack")

	var kept []time.Duration
	for _, d := range held {
		if d > headerTimeout/2 {
			kept = append(kept, d)
		}
	}
	slices.Sort(kept)
	require.NotEmpty(t, kept, "the server held some of the connections")
	require.LessOrEqual(t, len(kept), perAddress, "connections held at once from one address")
	require.Less(t, kept[len(kept)-1], headerTimeout+5*time.Second, "a connection held past the header timeout")

	accepted, runs := r.endLoad(t, p)
	r.requireServersUp(t)
	require.False(t, r.workerLogged(`msg="heartbeat failed"`), "a worker's heartbeat failed")
	t.Logf("%d slow connections from 127.0.0.2: %d closed at once, %d held %s to %s; all gone %s after the first; meanwhile %d probes on new connections answered, median %s, slowest %s; %d one-off runs accepted, %d runs in all succeeded",
		attackers, attackers-len(kept), len(kept), kept[0].Round(time.Millisecond), kept[len(kept)-1].Round(time.Millisecond),
		attack.Round(time.Millisecond), probes, median.Round(time.Millisecond), slowest.Round(time.Millisecond), len(accepted), len(runs))
}

// TestFaultNestedTemplate sends issue 12's submission, a concurrency key of four nested
// loops of 100 (unbounded, it built a 100 MB string in 16 s of CPU while holding the SQLite
// writer), on every route that takes a job spec, and a trigger whose args make a job's key
// loop too long, to a server running a stream of one-off jobs. Each is answered 400 at once,
// naming the field, and creates nothing; the load is not disturbed.
func TestFaultNestedTemplate(t *testing.T) {
	t.Parallel()
	r := startRig(t, rigConfig{servers: 1, workers: 1, store: sqliteStore})
	p := r.startProducer(uint64(time.Now().UnixNano()), 250*time.Millisecond, 3)
	srv := r.servers[0].p
	c := r.clients[0]
	ctx := context.Background()
	waitFor(t, time.Minute, "one-off jobs running", func() bool { return r.runningOneOffs() >= 1 })

	const key = "{{range 100}}{{range 100}}{{range 100}}{{range 100}}x{{end}}{{end}}{{end}}{{end}}"
	spec := func(name string) map[string]any {
		return map[string]any{"name": name, "shell": "true", "concurrency": map[string]any{"key": key, "max": 1}}
	}
	sched := map[string]any{"shell": "true", "concurrency": map[string]any{"key": key}, "schedule": map[string]any{"cron": "* * * * * *"}}
	_, _, err := c.CreateJob(ctx, &apitype.JobSpec{Name: "looped", Shell: "true", Enabled: ptr(false),
		Concurrency: &apitype.Concurrency{Key: "{{range .n}}{{range $.n}}{{end}}{{end}}x", Max: 1}})
	require.NoError(t, err)
	longArgs := map[string]any{"args": map[string]any{"n": make([]int, 100)}}

	var took []string
	var slowest time.Duration
	sent := time.Now()
	for _, tc := range []struct {
		method, path string
		body         any
		field        string
	}{
		{"POST", "/v1/jobs", spec("nested-one"), "concurrency.key"},
		{"POST", "/v1/jobs/batch", map[string]any{"jobs": []any{spec("nested-batch")}}, "jobs[0].concurrency.key"},
		{"POST", "/v1/dags", map[string]any{"runs": map[string]any{"a": spec("nested-dag")}}, "runs.a.concurrency.key"},
		{"PUT", "/v1/jobs/nested-cron", sched, "concurrency.key"},
		{"POST", "/v1/jobs/looped/trigger", longArgs, "args"},
	} {
		start := time.Now()
		status, body := sendJSON(t, srv, tc.method, tc.path, tc.body)
		d := time.Since(start)
		slowest = max(slowest, d)
		took = append(took, fmt.Sprintf("%s %s %s", tc.method, tc.path, d.Round(time.Millisecond)))
		require.Equal(t, http.StatusBadRequest, status, "%s %s: %s", tc.method, tc.path, body)
		var prob apitype.Problem
		require.NoError(t, json.Unmarshal(body, &prob))
		require.Len(t, prob.Errors, 1, "%s %s: %s", tc.method, tc.path, body)
		require.Equal(t, tc.field, prob.Errors[0].Field, tc.path)
		require.Contains(t, prob.Errors[0].Message, "more than 500 steps", tc.path)
		require.Less(t, d, 5*time.Second, "%s %s took long", tc.method, tc.path)
	}
	// Checked through a client of its own: the rig's clients record every 404.
	plain, err := client.New(srv.url(), client.WithToken(adminToken))
	require.NoError(t, err)
	for _, name := range []string{"nested-one", "nested-batch", "nested-dag", "nested-cron"} {
		_, err := plain.GetJob(ctx, name)
		require.True(t, client.IsNotFound(err), "job %s: %v", name, err)
	}
	page, err := plain.ListRuns(ctx, client.ListRunsOptions{Job: "looped"})
	require.NoError(t, err)
	require.Empty(t, page.Items, "the refused trigger made no run")
	r.acceptedSince(sent, 4, "after the nested submissions")

	accepted, runs := r.endLoad(t, p)
	r.requireServersUp(t)
	t.Logf("each answered 400 naming its field, slowest %s (%s); nothing created; %d one-off runs accepted meanwhile, %d runs in all succeeded",
		slowest.Round(time.Millisecond), strings.Join(took, ", "), len(accepted), len(runs))
}
