package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/worker"
)

// fleetWorker is one real `stint worker` process of the fleet test and what it declared.
type fleetWorker struct {
	id     string
	labels map[string]string
	cap    apitype.Capacity
	cmd    *exec.Cmd
	out    *lockedBuffer
	done   chan struct{}
}

// startFleetWorker runs `stint worker` against srv with the given id, labels and capacity
// flags. Its environment has no CUDA_VISIBLE_DEVICES, so that what a job sees there comes
// from the worker. It is killed (SIGKILL) at cleanup.
func startFleetWorker(t *testing.T, srv *proc, id string, labels map[string]string, c apitype.Capacity) *fleetWorker {
	t.Helper()
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, k+"="+labels[k])
	}
	args := []string{"worker", "--server", srv.url(), "--id", id, "--labels", strings.Join(kv, ","),
		"--cpu", fmt.Sprint(c.CPU), "--memory", fmt.Sprint(c.MemoryMB), "--gpus", fmt.Sprint(c.GPU),
		"--slots", fmt.Sprint(c.Slots), "--log-level", "info"}
	cmd := exec.Command(stintBin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, e := range stintEnv("STINT_TOKEN=" + workerToken(t, srv.url(), id)) {
		if !strings.HasPrefix(e, "CUDA_VISIBLE_DEVICES=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	w := &fleetWorker{id: id, labels: labels, cap: c, cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	require.NoError(t, cmd.Start(), "start stint worker %s", id)
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		w.kill()
		if t.Failed() {
			t.Logf("stint worker %s output:\n%s", id, w.out.String())
		}
	})
	return w
}

// kill sends SIGKILL to the worker's process group (the worker alone: it runs each
// command in a process group of its own) and waits for it to exit.
func (w *fleetWorker) kill() {
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	<-w.done
}

// fits reports whether req fits what w declared: its labels, cpu, memory and gpus.
func (w *fleetWorker) fits(req apitype.Requirements) bool {
	for k, v := range req.Labels {
		if have, ok := w.labels[k]; !ok || have != v {
			return false
		}
	}
	return req.CPU <= w.cap.CPU+1e-9 && req.MemoryMB <= w.cap.MemoryMB && req.GPU <= w.cap.GPU
}

// fleetKind is a family of jobs of the fleet test with the same requirements.
type fleetKind struct {
	name  string
	n     int
	req   apitype.Requirements
	sleep string
	// on lists the workers (by letter) the requirements fit: a check of the test's own
	// table against fits, so that a mistake in it is not mistaken for the server's.
	on       string
	priority int
	gpuEcho  bool
}

// fleetRun is one submitted run and what its job asked for.
type fleetRun struct {
	id   string
	kind *fleetKind
}

// capSample is what the sampler saw of the workers' used capacity.
type capSample struct {
	mu          sync.Mutex
	samples     int
	busy        int // samples in which some worker used cpu, memory or gpu
	maxUsed     map[string]apitype.Capacity
	violations  []string // the first ten of nviolations
	nviolations int
	errs        int
}

// sampleWorkers polls GET /v1/workers every 50 ms until ctx ends and records any worker
// whose used cpu, memory or gpu exceed what it declared (invariant 5), or that holds more
// leases than worker.HeldLeasesPerSlot times its slots. (A worker frees a slot when its attempt ends, before the
// completion reaches the server, so the server's used slots, the leases held, may exceed the
// declared slots by completions on their way; "capacity from what ran" checks, from the
// jobs' own spans, that no more than the slots run at once.)
func sampleWorkers(ctx context.Context, c *client.Client, s *capSample) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		list, err := c.ListWorkers(rctx)
		cancel()
		s.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				s.errs++
			}
		} else {
			s.samples++
			busy := false
			for _, w := range list.Items {
				u, k := w.Used, w.Capacity
				if u.CPU > k.CPU+1e-9 || u.MemoryMB > k.MemoryMB || u.GPU > k.GPU || u.Slots > worker.HeldLeasesPerSlot*k.Slots {
					s.nviolations++
					if len(s.violations) < 10 {
						s.violations = append(s.violations, fmt.Sprintf("%s: worker %s (%s) used %+v > capacity %+v",
							time.Now().UTC().Format(time.RFC3339Nano), w.ID, w.State, u, k))
					}
				}
				if u.CPU > 0 || u.MemoryMB > 0 || u.GPU > 0 {
					busy = true
				}
				m := s.maxUsed[w.ID]
				m.CPU, m.MemoryMB, m.GPU, m.Slots = max(m.CPU, u.CPU), max(m.MemoryMB, u.MemoryMB), max(m.GPU, u.GPU), max(m.Slots, u.Slots)
				s.maxUsed[w.ID] = m
			}
			if busy {
				s.busy++
			}
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// fleetLeaseTTL is the lease TTL of the fleet test. The live workers must keep their leases
// through the stalls of a loaded machine (they heartbeat every TTL/3 and kill an attempt
// not renewed for 0.9 TTL), and the killed worker's attempt ends lost one TTL after the
// kill: long enough for the first, short enough for the test's wait on the second.
const fleetLeaseTTL = 6 * time.Second

// TestFleet runs one real server and three real workers with different labels and capacity,
// submits a mix of jobs with requirements, and checks that every attempt ran on a worker its
// job fits, that no worker's used capacity ever exceeded its declared capacity (sampled from
// GET /v1/workers while the jobs ran, and worked out afterwards from when the jobs ran, by
// their own clock), that a worker killed with SIGKILL has its attempt marked lost after the
// lease TTL and the run re-run on another worker that fits, and that every run finally
// succeeds.
func TestFleet(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			testFleet(t, append(sc.args(t), "--lease-ttl", fleetLeaseTTL.String()))
		})
	}
}

func testFleet(t *testing.T, serverArgs []string) {
	started := time.Now()
	srv := startServer(t, "server", serverArgs...)
	c := srv.client(t)
	ctx := context.Background()

	workers := map[string]*fleetWorker{}
	workers["A"] = startFleetWorker(t, srv, "fleet-a", map[string]string{"zone": "eu", "disk": "ssd"},
		apitype.Capacity{CPU: 4, MemoryMB: 4096, GPU: 0, Slots: 8})
	workers["B"] = startFleetWorker(t, srv, "fleet-b", map[string]string{"zone": "eu"},
		apitype.Capacity{CPU: 2, MemoryMB: 2048, GPU: 2, Slots: 8})
	workers["C"] = startFleetWorker(t, srv, "fleet-c", map[string]string{"zone": "us"},
		apitype.Capacity{CPU: 8, MemoryMB: 8192, GPU: 0, Slots: 8})
	byID := map[string]*fleetWorker{}
	for _, w := range workers {
		byID[w.id] = w
	}
	waitFor(t, 30*time.Second, "the three workers to register", func() bool {
		list, err := c.ListWorkers(ctx)
		if err != nil {
			return false
		}
		active := 0
		for _, w := range list.Items {
			if byID[w.ID] != nil && w.State == "active" {
				active++
			}
		}
		return active == 3
	})
	// The capacity the server shows is what the flags declared.
	for _, w := range workers {
		got, err := c.GetWorker(ctx, w.id)
		require.NoError(t, err)
		require.Equal(t, w.cap, got.Capacity, "worker %s", w.id)
		require.Equal(t, w.labels, got.Labels, "worker %s", w.id)
	}

	// A gpu job prints the devices it was given and, by its own clock, when it began and
	// ended: two jobs whose spans overlap ran at once and must have had distinct devices.
	gpuScript := `echo "gpu=$CUDA_VISIBLE_DEVICES"; echo "start=$(date +%s%N)"; SLEEP; echo "end=$(date +%s%N)"`
	// Every job writes when it began and ended, by its own clock, to a file named after its
	// attempt in spans: see "capacity from what ran".
	spans := t.TempDir()
	spanScript := `printf '%s ' "$(date +%s%N)" > "$SPANS/$STINT_RUN_ID.$STINT_ATTEMPT"; SCRIPT; date +%s%N >> "$SPANS/$STINT_RUN_ID.$STINT_ATTEMPT"`
	kinds := []*fleetKind{
		// labels only
		{name: "us", n: 4, req: apitype.Requirements{Labels: map[string]string{"zone": "us"}}, sleep: "0.3", on: "C"},
		{name: "ssd", n: 4, req: apitype.Requirements{CPU: 1, Labels: map[string]string{"disk": "ssd"}}, sleep: "0.3", on: "A"},
		{name: "eu", n: 5, req: apitype.Requirements{CPU: 1, MemoryMB: 512, Labels: map[string]string{"zone": "eu"}}, sleep: "0.3", on: "AB"},
		// heavy: more than fits at once, so they queue
		{name: "cpu6", n: 3, req: apitype.Requirements{CPU: 6, MemoryMB: 1024}, sleep: "0.5", on: "C"},
		{name: "mem3000", n: 4, req: apitype.Requirements{CPU: 1, MemoryMB: 3000}, sleep: "0.4", on: "AC"},
		{name: "cpu3", n: 4, req: apitype.Requirements{CPU: 3}, sleep: "0.3", on: "AC"},
		// gpus: only B has them, two; the gpu1 jobs last long enough that two run at once
		// even when a loaded machine starts them apart ("gpu devices" needs it)
		{name: "gpu1", n: 5, req: apitype.Requirements{CPU: 0.5, MemoryMB: 256, GPU: 1}, sleep: "1", on: "B", gpuEcho: true},
		{name: "gpu2", n: 2, req: apitype.Requirements{CPU: 0.5, GPU: 2}, sleep: "0.4", on: "B", gpuEcho: true},
		// unconstrained
		{name: "any", n: 6, sleep: "0.2", on: "ABC"},
		// recovery: long, prefers A (the tightest fit), also fits C; worker A is killed
		// while one of them runs there.
		{name: "recover", n: 3, req: apitype.Requirements{CPU: 1, MemoryMB: 3000}, sleep: "6", on: "AC", priority: 10},
	}
	for _, k := range kinds {
		var on string
		for _, l := range []string{"A", "B", "C"} {
			if workers[l].fits(k.req) {
				on += l
			}
		}
		require.Equal(t, k.on, on, "the test's table: kind %s fits workers", k.name)
	}

	sample := &capSample{maxUsed: map[string]apitype.Capacity{}}
	sctx, stopSampler := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		sampleWorkers(sctx, c, sample)
	}()
	defer func() { stopSampler(); <-samplerDone }()

	// Submit, interleaving the kinds so that the queue holds a mix.
	var runs []fleetRun
	for i := 0; ; i++ {
		added := false
		for _, k := range kinds {
			if i >= k.n {
				continue
			}
			added = true
			script := "sleep " + k.sleep
			if k.gpuEcho {
				script = strings.Replace(gpuScript, "SLEEP", script, 1)
			}
			spec := &apitype.JobSpec{
				Name:     fmt.Sprintf("fleet-%s-%d", k.name, i),
				Command:  []string{"sh", "-c", strings.Replace(spanScript, "SCRIPT", script, 1)},
				Env:      map[string]string{"SPANS": spans},
				Priority: ptr(k.priority),
				Retry:    &apitype.RetryPolicy{MaxAttempts: 3, InitialDelay: durOf(50 * time.Millisecond)},
			}
			if k.req.CPU > 0 || k.req.MemoryMB > 0 || k.req.GPU > 0 || len(k.req.Labels) > 0 {
				spec.Requirements = &k.req
			}
			resp, _, err := c.CreateJob(ctx, spec)
			require.NoError(t, err, "create %s", spec.Name)
			require.NotNil(t, resp.Run)
			runs = append(runs, fleetRun{id: resp.Run.ID, kind: k})
		}
		if !added {
			break
		}
	}
	t.Logf("submitted %d runs in %s", len(runs), time.Since(started).Round(time.Millisecond))

	// Recovery: once the runs only A fits are done and a recover run is running on A, kill
	// A with SIGKILL and start nothing in its place.
	victim := workers["A"]
	var (
		onVictim   string // the recover run running on the victim when it is killed
		victimN    int    // its attempt there
		seen       string // what the wait saw last, for its failure
		ssdPending int
		killed     bool
	)
	defer func() {
		if t.Failed() && !killed {
			t.Logf("last seen of the ssd and recover runs: %s", seen)
			logFleet(t, c, runs)
		}
	}()
	waitFor(t, 30*time.Second, "the ssd runs to finish and a recover run to run on worker A", func() bool {
		onVictim, seen, ssdPending = "", "", 0
		recoverOpen := 0
		for _, r := range runs {
			if r.kind.name != "ssd" && r.kind.name != "recover" {
				continue
			}
			run, err := c.GetRun(ctx, r.id)
			if err != nil {
				return false
			}
			seen += fmt.Sprintf("\n  %s %s %s on %q %s", r.id, r.kind.name, run.Status, run.WorkerID, run.PendingReason)
			switch {
			case r.kind.name == "ssd" && run.Status != "succeeded":
				if isFinal(run.Status) {
					t.Fatalf("ssd run %s ended %s: %+v", r.id, run.Status, run)
				}
				ssdPending++
			case r.kind.name == "recover" && !isFinal(run.Status):
				recoverOpen++
				if run.Status == "running" && run.WorkerID == victim.id && onVictim == "" {
					onVictim, victimN = r.id, run.Attempt
				}
			}
		}
		if recoverOpen == 0 {
			t.Fatalf("every recover run ended before one ran on worker %s with the ssd runs done: %s", victim.id, seen)
		}
		return onVictim != "" && ssdPending == 0
	})
	killedAt, killed := time.Now(), true
	victim.kill()
	t.Logf("killed worker %s (SIGKILL) at %s while run %s attempt %d ran there",
		victim.id, time.Since(started).Round(time.Millisecond), onVictim, victimN)

	lostRun := waitRun(t, c, onVictim, 30*time.Second)
	require.Equal(t, "succeeded", lostRun.Status, "run %s after its worker was killed: %+v", onVictim, lostRun)
	require.Greater(t, len(lostRun.Attempts), victimN, "run %s was re-run: %+v", onVictim, lostRun.Attempts)
	lost := lostRun.Attempts[victimN-1]
	require.Equal(t, victimN, lost.N)
	require.Equal(t, victim.id, lost.WorkerID)
	require.Equal(t, "lost", lost.Status, "the killed worker's attempt: %+v", lost)
	require.NotNil(t, lost.FinishedAt)
	lostAfter := lost.FinishedAt.Sub(killedAt)
	t.Logf("attempt on %s marked lost %s after the kill", victim.id, lostAfter.Round(time.Millisecond))
	// The worker heartbeat every lease TTL / 3 until the kill: its lease ran out 2/3 to 1
	// TTL after it. Only a stall of the whole TTL could have it expire before the kill, and
	// the rescue that marks it lost may come late on a loaded machine.
	require.Positive(t, lostAfter, "the attempt is marked lost after its worker died, not before")
	require.Less(t, lostAfter, fleetLeaseTTL+30*time.Second, "the attempt is marked lost once its lease runs out")
	last := lostRun.Attempts[len(lostRun.Attempts)-1]
	require.NotEqual(t, victim.id, last.WorkerID, "the re-run went to another worker")
	require.Equal(t, "succeeded", last.Status)
	waitFor(t, 15*time.Second, "worker "+victim.id+" to be lost", func() bool {
		w, err := c.GetWorker(ctx, victim.id)
		return err == nil && w.State == "lost"
	})

	// Every run ends succeeded.
	final := map[string]*apitype.Run{}
	for _, r := range runs {
		run := waitRun(t, c, r.id, 40*time.Second)
		require.Equal(t, "succeeded", run.Status, "run %s (%s): %+v", r.id, r.kind.name, run)
		final[r.id] = run
	}
	stopSampler()
	<-samplerDone
	t.Logf("all %d runs succeeded %s after the start", len(runs), time.Since(started).Round(time.Millisecond))

	t.Run("placement", func(t *testing.T) {
		for _, r := range runs {
			run := final[r.id]
			require.NotEmpty(t, run.Attempts, "run %s", r.id)
			for _, a := range run.Attempts {
				w := byID[a.WorkerID]
				require.NotNil(t, w, "run %s (%s) attempt %d ran on unknown worker %q", r.id, r.kind.name, a.N, a.WorkerID)
				require.True(t, w.fits(r.kind.req), "run %s (%s, needs %+v) attempt %d ran on %s (labels %v, capacity %+v)",
					r.id, r.kind.name, r.kind.req, a.N, w.id, w.labels, w.cap)
				if a.WorkerID == victim.id && !a.StartedAt.Before(killedAt) {
					// A lease can still go to the killed worker's lease poll, open until the
					// server sees its connection close (on a loaded machine, a moment after
					// the kill). Nothing ran it: it must end lost, at once when the server
					// noticed before answering (LeaseUndelivered), else when the lease ran
					// out, and the run must go on elsewhere.
					require.Equal(t, "lost", a.Status, "run %s attempt %d leased to the killed worker after the kill", r.id, a.N)
					t.Logf("run %s attempt %d was leased to the killed worker after the kill and ended lost: %s", r.id, a.N, a.Error)
				}
			}
			// A retry never ran beside the attempt it replaces (invariants 3 and 8), by the
			// jobs' own clocks (the attempts' times cannot tell: see "capacity from what
			// ran"). A job that left no span never ran (a lease not delivered); one that
			// left no end was killed, which only the killed worker's may be.
			for i := 1; i < len(run.Attempts); i++ {
				prev, next := run.Attempts[i-1], run.Attempts[i]
				require.NotNil(t, prev.FinishedAt, "run %s attempt %d", r.id, prev.N)
				ps, ran := readSpan(t, spans, r.id, prev.N)
				ns, ranNext := readSpan(t, spans, r.id, next.N)
				if !ran || !ranNext {
					continue
				}
				if ps.end == 0 {
					require.Equal(t, victim.id, prev.WorkerID, "run %s attempt %d was killed on a live worker", r.id, prev.N)
					require.GreaterOrEqual(t, ns.start, killedAt.UnixNano(), "run %s attempt %d began before its worker was killed", r.id, next.N)
					continue
				}
				require.LessOrEqual(t, ps.end, ns.start, "run %s: attempt %d began before attempt %d ended", r.id, next.N, prev.N)
			}
		}
	})

	t.Run("capacity sampled", func(t *testing.T) {
		sample.mu.Lock()
		defer sample.mu.Unlock()
		t.Logf("%d samples of GET /v1/workers (%d with work, %d errors); most used: %+v",
			sample.samples, sample.busy, sample.errs, sample.maxUsed)
		require.Zero(t, sample.nviolations, "used capacity above declared capacity (invariant 5), first ones: %s",
			strings.Join(sample.violations, "\n"))
		require.Greater(t, sample.samples, 20, "the sampler ran")
		require.Greater(t, sample.busy, 0, "the sampler saw some worker's used capacity above 0")
		require.Greater(t, sample.maxUsed["fleet-b"].GPU, 0, "the sampler saw B's gpus in use")
		require.Greater(t, sample.maxUsed["fleet-c"].CPU, 0.0, "the sampler saw C's cpus in use")
	})

	// From what ran: at no instant did the jobs running on a worker need more than it
	// declared. A job's span, by its own clock (all processes of the test share the
	// machine's), lies inside its attempt's booking: it begins after the lease committed
	// (the worker has it only then) and ends before the worker reports the completion. So
	// spans that overlap beyond a worker's capacity are bookings that did, and none may.
	// An attempt that ended otherwise than by its worker's report (lost) is left out: its
	// booking ends when the server gives up on it, and its job may run on until its worker
	// is told. The attempts' started_at and finished_at cannot serve here: each is the
	// server's clock read before the transaction that records it, which may wait for the
	// store (SQLite's one writer, a busy PostgreSQL), so a lease committed after the
	// completion that freed its room can carry an earlier time than that completion.
	t.Run("capacity from what ran", func(t *testing.T) {
		per := map[string][]jobSpan{}
		var left []string
		for _, r := range runs {
			for _, a := range final[r.id].Attempts {
				if a.Status == "lost" {
					left = append(left, fmt.Sprintf("%s/%d on %s: %s", r.id, a.N, a.WorkerID, a.Error))
					continue
				}
				s, ran := readSpan(t, spans, r.id, a.N)
				require.True(t, ran && s.end > 0, "run %s attempt %d (%s) left its span", r.id, a.N, a.Status)
				s.req = r.kind.req
				s.what = fmt.Sprintf("%s/%d(%s %s..%s)", r.id, a.N, r.kind.name,
					time.Unix(0, s.start).UTC().Format("15:04:05.000000"), time.Unix(0, s.end).UTC().Format("15:04:05.000000"))
				per[a.WorkerID] = append(per[a.WorkerID], s)
			}
		}
		checked, overlaps := 0, 0
		for id, spans := range per {
			w := byID[id]
			for _, s := range spans {
				var cpu float64
				var mem int64
				var gpu, n int
				var who []string
				for _, o := range spans {
					if o.start <= s.start && s.start < o.end || o.what == s.what {
						cpu, mem, gpu, n = cpu+o.req.CPU, mem+o.req.MemoryMB, gpu+o.req.GPU, n+1
						who = append(who, o.what)
					}
				}
				checked++
				if n > 1 {
					overlaps++
				}
				require.True(t, cpu <= w.cap.CPU+1e-9 && mem <= w.cap.MemoryMB && gpu <= w.cap.GPU && n <= w.cap.Slots,
					"worker %s at %s ran cpu %v memory %d gpu %d slots %d > capacity %+v: %v",
					id, time.Unix(0, s.start).UTC().Format(time.RFC3339Nano), cpu, mem, gpu, n, w.cap, who)
			}
		}
		t.Logf("%d jobs' spans checked, %d began while others ran on their worker; lost attempts left out: %q", checked, overlaps, left)
		require.Positive(t, overlaps, "some jobs ran at once on a worker")
	})

	t.Run("gpu devices", func(t *testing.T) {
		type gpuAttempt struct {
			what       string
			start, end time.Time
			devs       []string
		}
		var got []gpuAttempt
		empty := 0
		for _, r := range runs {
			if !r.kind.gpuEcho {
				continue
			}
			run := final[r.id]
			a := run.Attempts[len(run.Attempts)-1]
			out := runLogs(t, c, r.id, "stdout")
			var v string
			var startNs, endNs int64
			_, err := fmt.Sscanf(strings.ReplaceAll(out, "gpu=\n", "gpu=-\n"), "gpu=%s\nstart=%d\nend=%d\n", &v, &startNs, &endNs)
			require.NoError(t, err, "run %s stdout: %q", r.id, out)
			if v == "-" {
				empty++
				continue
			}
			devs := strings.Split(v, ",")
			require.Len(t, devs, r.kind.req.GPU, "run %s (%s) got CUDA_VISIBLE_DEVICES=%s", r.id, r.kind.name, v)
			for _, d := range devs {
				require.Contains(t, []string{"0", "1"}, d, "run %s: device ids of a worker with --gpus 2", r.id)
			}
			require.Len(t, uniq(devs), len(devs), "run %s: distinct devices in %s", r.id, v)
			start, end := time.Unix(0, startNs), time.Unix(0, endNs)
			got = append(got, gpuAttempt{fmt.Sprintf("%s/%d(%s, ran %s..%s)", r.id, a.N, r.kind.name,
				start.UTC().Format("15:04:05.000000"), end.UTC().Format("15:04:05.000000")), start, end, devs})
		}
		if empty > 0 {
			require.Empty(t, got, "some gpu attempts got CUDA_VISIBLE_DEVICES and %d did not", empty)
			t.Skip("CUDA_VISIBLE_DEVICES is empty in gpu jobs: the worker does not assign GPU devices yet")
		}
		overlaps := 0
		for i := range got {
			for j := i + 1; j < len(got); j++ {
				a, b := got[i], got[j]
				if a.start.Before(b.end) && b.start.Before(a.end) {
					overlaps++
					for _, d := range a.devs {
						require.NotContains(t, b.devs, d, "overlapping gpu attempts %s %v and %s %v shared a device while both ran", a.what, a.devs, b.what, b.devs)
					}
				}
			}
		}
		t.Logf("%d gpu attempts, %d pairs ran at once, all with distinct devices", len(got), overlaps)
		require.Greater(t, overlaps, 0, "some gpu jobs ran at once on B")
	})
	t.Logf("fleet test took %s", time.Since(started).Round(time.Millisecond))
}

// jobSpan is when a fleet job ran, in ns by its own clock; end is 0 when it left none.
type jobSpan struct {
	start, end int64
	req        apitype.Requirements
	what       string
}

// readSpan reads the span the job of run runID's attempt n left in dir; ran is false when
// it left none (it never began).
func readSpan(t *testing.T, dir, runID string, n int) (s jobSpan, ran bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s.%d", runID, n)))
	if os.IsNotExist(err) {
		return s, false
	}
	require.NoError(t, err)
	f := strings.Fields(string(b))
	require.NotEmpty(t, f, "run %s attempt %d span %q", runID, n, b)
	_, err = fmt.Sscan(f[0], &s.start)
	require.NoError(t, err, "run %s attempt %d span %q", runID, n, b)
	if len(f) > 1 {
		_, err = fmt.Sscan(f[1], &s.end)
		require.NoError(t, err, "run %s attempt %d span %q", runID, n, b)
		require.LessOrEqual(t, s.start, s.end, "run %s attempt %d span %q", runID, n, b)
	}
	return s, true
}

func isFinal(status string) bool {
	switch status {
	case "succeeded", "failed", "cancelled", "skipped":
		return true
	}
	return false
}

func uniq(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return slices.Compact(out)
}

// logFleet logs the workers and the runs not succeeded, for a failure; a queued run that
// fits the room an active worker has free now (labels, cpu, memory, gpu and a slot) is
// flagged: nothing should keep it from being leased.
func logFleet(t *testing.T, c *client.Client, runs []fleetRun) {
	t.Helper()
	ctx := context.Background()
	var free []*fleetWorker // what each active worker has free, as a worker that declared it
	if list, err := c.ListWorkers(ctx); err == nil {
		for _, w := range list.Items {
			t.Logf("worker %s %s labels %v capacity %+v used %+v running %d", w.ID, w.State, w.Labels, w.Capacity, w.Used, w.Running)
			if w.State == "active" && w.Used.Slots < w.Capacity.Slots {
				free = append(free, &fleetWorker{id: w.ID, labels: w.Labels, cap: apitype.Capacity{
					CPU: w.Capacity.CPU - w.Used.CPU, MemoryMB: w.Capacity.MemoryMB - w.Used.MemoryMB, GPU: w.Capacity.GPU - w.Used.GPU}})
			}
		}
	}
	for _, r := range runs {
		run, err := c.GetRun(ctx, r.id)
		if err != nil || run.Status == "succeeded" {
			continue
		}
		var stall string
		if run.Status == "queued" {
			for _, w := range free {
				if w.fits(r.kind.req) {
					stall += " STALLED: fits the free room of " + w.id
				}
			}
		}
		t.Logf("run %s (%s, needs %+v) %s on %q %q;%s attempts %+v", r.id, r.kind.name, r.kind.req, run.Status, run.WorkerID, run.PendingReason, stall, run.Attempts)
	}
}
