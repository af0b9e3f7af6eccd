package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// The dependency tests speak raw HTTP for POST /v1/dags and read depends_on from GET
// /v1/runs/{id} with their own types, so that they hold whatever the SDK names them.

// depsEdge is one dependency as GET /v1/runs/{id} shows it.
type depsEdge struct {
	Run       string `json:"run"`
	Condition string `json:"condition"`
}

// depsRun is a run as GET /v1/runs/{id} answers it, with its dependencies.
type depsRun struct {
	apitype.Run
	DependsOn []depsEdge `json:"depends_on"`
}

// depsDAG is the answer to POST /v1/dags: run and job ids by entry.
type depsDAG struct {
	Runs map[string]string `json:"runs"`
	Jobs map[string]string `json:"jobs"`
}

// depsPost posts body as JSON to srv's path and returns the status and the answer.
func depsPost(t *testing.T, srv *proc, path string, body any) (int, []byte) {
	t.Helper()
	return sendJSON(t, srv, http.MethodPost, path, body)
}

// sendJSON sends body as JSON to srv's path with method and returns the status and the
// answer.
func sendJSON(t *testing.T, srv *proc, method, path string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(method, srv.url()+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+srv.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// submitDAG posts runs to POST /v1/dags, requires a 201 that names a run and a job for
// every entry, and returns the run ids by entry.
func submitDAG(t *testing.T, srv *proc, runs map[string]apitype.JobSpec) map[string]string {
	t.Helper()
	status, body := depsPost(t, srv, "/v1/dags", map[string]any{"runs": runs})
	require.Equal(t, http.StatusCreated, status, "POST /v1/dags: %s", body)
	var out depsDAG
	require.NoError(t, json.Unmarshal(body, &out), "POST /v1/dags answer %s", body)
	require.Len(t, out.Runs, len(runs), "run ids in %s", body)
	require.Len(t, out.Jobs, len(runs), "job ids in %s", body)
	for k := range runs {
		require.NotEmpty(t, out.Runs[k], "run id of entry %q in %s", k, body)
		require.NotEmpty(t, out.Jobs[k], "job id of entry %q in %s", k, body)
	}
	return out.Runs
}

// getDepsRun reads GET /v1/runs/{id} with its depends_on.
func getDepsRun(srv *proc, id string) (*depsRun, error) {
	req, err := http.NewRequest(http.MethodGet, srv.url()+"/v1/runs/"+id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+srv.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/runs/%s: %s: %s", id, resp.Status, b)
	}
	// The answer is {"run": {...}} (apitype.RunResponse); accept a bare run too.
	var wrapped struct {
		Run *depsRun `json:"run"`
	}
	if err := json.Unmarshal(b, &wrapped); err == nil && wrapped.Run != nil && wrapped.Run.ID != "" {
		return wrapped.Run, nil
	}
	var r depsRun
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("GET /v1/runs/%s: decode %s: %w", id, b, err)
	}
	return &r, nil
}

// waitDepsRuns polls until every run of ids is final (or the deadline passes: then it fails,
// listing the open ones) and returns them by entry.
func waitDepsRuns(t *testing.T, srv *proc, ids map[string]string, timeout time.Duration) map[string]*depsRun {
	t.Helper()
	got := map[string]*depsRun{}
	var open []string
	deadline := time.Now().Add(timeout)
	for {
		open = open[:0]
		for _, k := range slices.Sorted(maps.Keys(ids)) {
			if r := got[k]; r != nil && isFinal(r.Status) {
				continue
			}
			r, err := getDepsRun(srv, ids[k])
			if err != nil || !isFinal(r.Status) {
				if r != nil {
					open = append(open, fmt.Sprintf("%s=%s(%s)", k, r.Status, r.PendingReason))
				} else {
					open = append(open, fmt.Sprintf("%s: %v", k, err))
				}
				continue
			}
			got[k] = r
		}
		if len(open) == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d runs not final: %s", timeout, len(open), strings.Join(open, ", "))
		}
		time.Sleep(50 * time.Millisecond) // polling real processes: there is no signal to wait on
	}
}

// depsJob is an entry of a DAG: a shell job that prints its own clock when it starts and
// ends ("start=NS", "end=NS", nanoseconds since the epoch), sleeps in between and, when
// flaky, fails its first attempt.
func depsJob(sleep string, flaky bool, deps ...apitype.Dependency) apitype.JobSpec {
	script := `echo "start=$(date +%s%N)"; sleep ` + sleep + `; echo "end=$(date +%s%N)"`
	if flaky {
		script += `; test "$STINT_ATTEMPT" -ge 2`
	}
	return apitype.JobSpec{
		Command:   []string{"sh", "-c", script},
		Retry:     &apitype.RetryPolicy{MaxAttempts: 3, InitialDelay: durOf(100 * time.Millisecond)},
		DependsOn: deps,
	}
}

func ref(name string, cond ...string) apitype.Dependency {
	d := apitype.Dependency{Ref: name}
	if len(cond) > 0 {
		d.Condition = cond[0]
	}
	return d
}

// TestDeps runs one real server and three real `stint worker` processes (4 slots each) and
// submits DAGs through POST /v1/dags:
//   - order: a fan-out (1 -> 20), a fan-in (20 -> 1) and a chain of 10, with jobs that fail
//     their first attempt and succeed on a retry. For every edge, the downstream's first
//     attempt started (server's started_at) no sooner than the upstream finished (server's
//     finished_at), and its process started (the job's own clock) after the upstream's last
//     process printed its end; every run succeeded.
//   - failure: an upstream that fails for good skips its succeeded-dependants with a reason
//     naming it, the skips cascade down a chain, and failed- and finished-dependants run.
//   - cancel: cancelling the running head of a chain skips the chain.
//   - bad graphs (a cycle, a dangling ref, a self-edge) are refused with a 400 naming the
//     entries, and create nothing.
func TestDeps(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			testDeps(t, sc.args(t))
		})
	}
}

func testDeps(t *testing.T, serverArgs []string) {
	started := time.Now()
	srv := startServer(t, "server", serverArgs...)
	c := srv.client(t)
	ctx := context.Background()
	ids := map[string]bool{}
	for _, id := range []string{"deps-a", "deps-b", "deps-c"} {
		startFleetWorker(t, srv, id, nil, apitype.Capacity{CPU: 2, MemoryMB: 2048, Slots: 4})
		ids[id] = true
	}
	waitFor(t, 30*time.Second, "the three workers to register", func() bool {
		list, err := c.ListWorkers(ctx)
		if err != nil {
			return false
		}
		active := 0
		for _, w := range list.Items {
			if ids[w.ID] && w.State == "active" {
				active++
			}
		}
		return active == 3
	})

	t.Run("order", func(t *testing.T) { testDepsOrder(t, srv, c) })
	t.Run("failure", func(t *testing.T) { testDepsFailure(t, srv) })
	t.Run("cancel", func(t *testing.T) { testDepsCancel(t, srv) })
	t.Run("bad graphs", func(t *testing.T) { testDepsBadGraphs(t, srv, c) })
	t.Logf("deps test took %s", time.Since(started).Round(time.Millisecond))
}

func testDepsOrder(t *testing.T, srv *proc, c *client.Client) {
	begin := time.Now()
	dag := map[string]apitype.JobSpec{}
	type edge struct{ down, up, cond string }
	var edges []edge
	add := func(name, sleep string, flaky bool, deps ...apitype.Dependency) {
		dag[name] = depsJob(sleep, flaky, deps...)
		for _, d := range deps {
			cond := d.Condition
			if cond == "" {
				cond = "succeeded"
			}
			edges = append(edges, edge{name, d.Ref, cond})
		}
	}
	// root -> fan-00..fan-19 -> join -> chain-00 -> ... -> chain-09. The root, the join, a
	// quarter of the fan and three links of the chain fail their first attempt.
	add("root", "0.1", true)
	var fan []apitype.Dependency
	for i := range 20 {
		name := fmt.Sprintf("fan-%02d", i)
		add(name, "0.2", i%4 == 1, ref("root"))
		fan = append(fan, ref(name, "succeeded"))
	}
	add("join", "0.1", true, fan...)
	prev := "join"
	for i := range 10 {
		name := fmt.Sprintf("chain-%02d", i)
		add(name, "0.05", i%3 == 1, ref(prev))
		prev = name
	}
	runIDs := submitDAG(t, srv, dag)
	t.Logf("submitted %d runs, %d edges in %s", len(dag), len(edges), time.Since(begin).Round(time.Millisecond))

	// Before anything ran: the root is runnable, every other run waits on its dependencies.
	for name, id := range runIDs {
		r, err := getDepsRun(srv, id)
		require.NoError(t, err)
		if name == "root" || isFinal(r.Status) || r.Status == "running" {
			continue
		}
		if r.Status == "waiting" {
			require.Equal(t, "waiting_on_dependencies", r.PendingCode, "run %s (%s): %+v", name, id, r)
			require.NotEmpty(t, r.PendingReason, "run %s", name)
		}
	}

	runs := waitDepsRuns(t, srv, runIDs, 60*time.Second)
	t.Logf("all %d runs final %s after the submission", len(runs), time.Since(begin).Round(time.Millisecond))
	retried := 0
	for name, r := range runs {
		require.Equal(t, "succeeded", r.Status, "run %s (%s): %+v", name, r.ID, r)
		require.NotEmpty(t, r.Attempts, "run %s", name)
		if len(r.Attempts) > 1 {
			retried++
		}
		// What GET shows as depends_on is what was submitted.
		var want []depsEdge
		for _, d := range dag[name].DependsOn {
			cond := d.Condition
			if cond == "" {
				cond = "succeeded"
			}
			want = append(want, depsEdge{Run: runIDs[d.Ref], Condition: cond})
		}
		require.ElementsMatch(t, want, r.DependsOn, "depends_on of run %s (%s)", name, r.ID)
	}
	require.GreaterOrEqual(t, retried, 2+5+3, "the flaky runs were retried")

	clock := func(id string, attempt int, key string) int64 { return jobClock(t, c, id, attempt, key) }

	minGap := time.Duration(1<<63 - 1)
	for _, e := range edges {
		down, up := runs[e.down], runs[e.up]
		require.Equal(t, e.cond, "succeeded")
		require.Equal(t, "succeeded", up.Status, "edge %s -> %s", e.up, e.down)
		require.NotNil(t, up.FinishedAt, "edge %s -> %s: upstream %s", e.up, e.down, up.ID)
		first := down.Attempts[0]
		require.Equal(t, 1, first.N)
		// By the processes' own clock (one host): the downstream's first process began after
		// the upstream's succeeding process printed its end. The records' started_at and
		// finished_at cannot tell: each is the server's clock read before the transaction
		// that records it, and a lease poll that read it first may commit after the
		// completion that released the downstream (see TestFleet); their gap is reported.
		minGap = min(minGap, first.StartedAt.Sub(*up.FinishedAt))
		upEnd := clock(up.ID, up.Attempts[len(up.Attempts)-1].N, "end")
		downStart := clock(down.ID, first.N, "start")
		require.Greater(t, downStart, upEnd, "edge %s -> %s: the downstream's first process started %s before the upstream's last ended",
			e.up, e.down, time.Duration(upEnd-downStart))
	}
	t.Logf("%d edges checked; %d runs retried; smallest gap between an upstream's finished_at and its downstream's first start: %s",
		len(edges), retried, minGap)
}

// jobClock reads the job's own clock of run id's attempt: the first line of its stdout is
// start=NS, the last end=NS (key "start" or "end"; nanoseconds since the epoch).
func jobClock(t *testing.T, c *client.Client, id string, attempt int, key string) int64 {
	t.Helper()
	rc, err := c.Logs(context.Background(), id, client.LogsOptions{Attempt: attempt, Stream: "stdout"})
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			ns, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			require.NoError(t, err, "run %s attempt %d stdout %q", id, attempt, b)
			return ns
		}
	}
	t.Fatalf("run %s attempt %d: no %s= in stdout %q", id, attempt, key, b)
	return 0
}

func testDepsFailure(t *testing.T, srv *proc) {
	once := &apitype.RetryPolicy{MaxAttempts: 1}
	ok := func(deps ...apitype.Dependency) apitype.JobSpec {
		return apitype.JobSpec{Command: []string{"sh", "-c", `echo "start=$(date +%s%N)"; sleep 0.05; echo "end=$(date +%s%N)"`},
			Retry: once, DependsOn: deps}
	}
	dag := map[string]apitype.JobSpec{
		"bad":             {Command: []string{"sh", "-c", `echo "start=$(date +%s%N)"; sleep 0.1; echo "end=$(date +%s%N)"; exit 1`}, Retry: once},
		"need-ok":         ok(ref("bad")),
		"need-ok-2":       ok(ref("need-ok", "succeeded")),
		"need-ok-3":       ok(ref("need-ok-2")),
		"on-failure":      ok(ref("bad", "failed")),
		"always":          ok(ref("bad", "finished")),
		"after-skip":      ok(ref("need-ok", "finished")),
		"after-ok-or-bad": ok(ref("on-failure"), ref("bad", "finished")),
	}
	ids := submitDAG(t, srv, dag)
	runs := waitDepsRuns(t, srv, ids, 30*time.Second)

	bad := runs["bad"]
	require.Equal(t, "failed", bad.Status, "%+v", bad)
	require.Len(t, bad.Attempts, 1)
	skipped := map[string]string{"need-ok": "bad", "need-ok-2": "need-ok", "need-ok-3": "need-ok-2"}
	for name, up := range skipped {
		r := runs[name]
		require.Equal(t, "skipped", r.Status, "run %s: %+v", name, r)
		require.Contains(t, r.Error, ids[up], "run %s's reason names upstream %s (%s)", name, up, ids[up])
		require.Empty(t, r.Attempts, "skipped run %s never ran", name)
		require.Nil(t, r.StartedAt, "skipped run %s never started", name)
		require.NotNil(t, r.FinishedAt, "skipped run %s", name)
		require.False(t, r.FinishedAt.Before(*runs[up].FinishedAt), "run %s skipped before upstream %s ended", name, up)
	}
	t.Logf("skip reasons: %q, %q", runs["need-ok"].Error, runs["need-ok-2"].Error)
	for _, name := range []string{"on-failure", "always", "after-skip", "after-ok-or-bad"} {
		r := runs[name]
		require.Equal(t, "succeeded", r.Status, "run %s: %+v", name, r)
		// By the jobs' own clocks (see testDepsOrder): after each upstream that ran ended.
		for _, d := range dag[name].DependsOn {
			up := runs[d.Ref]
			if len(up.Attempts) == 0 {
				continue // skipped: it never ran
			}
			require.Greater(t, jobClock(t, srv.client(t), r.ID, 1, "start"), jobClock(t, srv.client(t), up.ID, len(up.Attempts), "end"),
				"run %s started before upstream %s ended", name, d.Ref)
		}
	}
}

func testDepsCancel(t *testing.T, srv *proc) {
	dag := map[string]apitype.JobSpec{
		"head":    {Command: []string{"sh", "-c", "sleep 30"}},
		"next":    {Command: []string{"true"}, DependsOn: []apitype.Dependency{ref("head")}},
		"next-2":  {Command: []string{"true"}, DependsOn: []apitype.Dependency{ref("next")}},
		"cleanup": {Command: []string{"true"}, DependsOn: []apitype.Dependency{ref("head", "finished")}},
	}
	ids := submitDAG(t, srv, dag)
	waitFor(t, 15*time.Second, "the head of the chain to run", func() bool {
		r, err := getDepsRun(srv, ids["head"])
		return err == nil && r.Status == "running"
	})
	for _, name := range []string{"next", "next-2", "cleanup"} {
		r, err := getDepsRun(srv, ids[name])
		require.NoError(t, err)
		require.Equal(t, "waiting", r.Status, "run %s while the head runs: %+v", name, r)
		require.Equal(t, "waiting_on_dependencies", r.PendingCode, "run %s", name)
	}
	status, body := depsPost(t, srv, "/v1/runs/"+ids["head"]+"/cancel", struct{}{})
	require.Equal(t, http.StatusOK, status, "cancel: %s", body)
	runs := waitDepsRuns(t, srv, ids, 20*time.Second)
	require.Equal(t, "cancelled", runs["head"].Status, "%+v", runs["head"])
	for name, up := range map[string]string{"next": "head", "next-2": "next"} {
		r := runs[name]
		require.Equal(t, "skipped", r.Status, "run %s: %+v", name, r)
		require.Contains(t, r.Error, ids[up], "run %s's reason names upstream %s", name, up)
		require.Empty(t, r.Attempts, "skipped run %s never ran", name)
	}
	require.Equal(t, "succeeded", runs["cleanup"].Status, "finished holds for a cancelled run: %+v", runs["cleanup"])
}

func testDepsBadGraphs(t *testing.T, srv *proc, c *client.Client) {
	job := func(deps ...apitype.Dependency) apitype.JobSpec {
		return apitype.JobSpec{Command: []string{"true"}, DependsOn: deps}
	}
	before, err := c.ListRuns(context.Background(), client.ListRunsOptions{Limit: 1000})
	require.NoError(t, err)
	cases := map[string]struct {
		dag  map[string]apitype.JobSpec
		name []string // what the answer must name
	}{
		"cycle": {map[string]apitype.JobSpec{
			"cyc-a": job(ref("cyc-c")), "cyc-b": job(ref("cyc-a")), "cyc-c": job(ref("cyc-b")), "cyc-ok": job(),
		}, []string{"cyc-"}},
		"dangling ref": {map[string]apitype.JobSpec{"dang-a": job(ref("nowhere"))}, []string{"nowhere"}},
		"self edge":    {map[string]apitype.JobSpec{"self-a": job(ref("self-a"))}, []string{"self-a"}},
	}
	for name, tc := range cases {
		status, body := depsPost(t, srv, "/v1/dags", map[string]any{"runs": tc.dag})
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", name, body)
		for _, s := range tc.name {
			require.Contains(t, string(body), s, "%s: the answer names the edge", name)
		}
		t.Logf("%s: %s", name, bytes.TrimSpace(body))
	}
	after, err := c.ListRuns(context.Background(), client.ListRunsOptions{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, after.Items, len(before.Items), "a refused graph creates no run")
}
