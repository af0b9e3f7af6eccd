package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// DAG shapes of the dag workload (Config.Shape).
const (
	ShapeFanout = "fanout" // 1 root -> N-2 middle runs -> 1 join
	ShapeChain  = "chain"  // N runs in a line
)

// dagGraph builds the entries of a DAG of n no-op runs of shape in queue, and returns them
// with the number of edges. Entries are named r00000, r00001, ... (in a fan-out, r00000 is
// the root and the last one the join).
func dagGraph(shape string, n int, handler, queue string) (map[string]apitype.JobSpec, int, error) {
	if n < 2 || shape == ShapeFanout && n < 3 {
		return nil, 0, fmt.Errorf("--n: a %s needs at least %d runs, got %d", shape, map[string]int{ShapeFanout: 3, ShapeChain: 2}[shape], n)
	}
	name := func(i int) string { return fmt.Sprintf("r%05d", i) }
	entries := make(map[string]apitype.JobSpec, n)
	spec := func(deps []apitype.Dependency) apitype.JobSpec {
		return apitype.JobSpec{Handler: handler, Queue: queue, DependsOn: deps}
	}
	edges := 0
	switch shape {
	case ShapeFanout:
		root, join := name(0), name(n-1)
		entries[root] = spec(nil)
		all := make([]apitype.Dependency, 0, n-2)
		for i := 1; i < n-1; i++ {
			entries[name(i)] = spec([]apitype.Dependency{{Ref: root}})
			all = append(all, apitype.Dependency{Ref: name(i)})
		}
		entries[join] = spec(all)
		edges = 2 * (n - 2)
	case ShapeChain:
		entries[name(0)] = spec(nil)
		for i := 1; i < n; i++ {
			entries[name(i)] = spec([]apitype.Dependency{{Ref: name(i - 1)}})
		}
		edges = n - 1
	default:
		return nil, 0, fmt.Errorf("--shape: want %s or %s, got %q", ShapeFanout, ShapeChain, shape)
	}
	return entries, edges, nil
}

// dagWorkload: one POST /v1/dags of N no-op runs shaped as Config.Shape, with the queue
// paused; then the queue is resumed and the bench times until every run succeeded. Submit
// is the request's wall time as the client sees it (encoding excluded, answer read
// included); per run and per edge are that time divided by runs and by edges (the same
// time twice, not a split). Processed is N / (latest finished_at - resume), as in drain, to
// compare with a drain of N jobs without edges.
func dagWorkload(ctx context.Context, r *runner) error {
	shape, n := r.cfg.Shape, r.cfg.N
	if shape == "" {
		shape = ShapeFanout
	}
	entries, edges, err := dagGraph(shape, n, r.kind, r.queue)
	if err != nil {
		return err
	}
	r.res.Params["shape"] = shape
	r.res.Params["n"] = strconv.Itoa(n)
	r.res.Params["edges"] = strconv.Itoa(edges)
	body, err := json.Marshal(map[string]any{"runs": entries})
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	r.res.Params["request"] = fmt.Sprintf("%.1f MiB", float64(len(body))/(1<<20))
	if err := r.setPaused(ctx, true); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/v1/dags", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := r.hc.Do(req)
	if err != nil {
		return fmt.Errorf("POST /v1/dags: %w", err)
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("POST /v1/dags: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST /v1/dags of %d runs and %d edges: %s after %s: %.500s", n, edges, resp.Status, took.Round(time.Millisecond), bytes.TrimSpace(answer))
	}
	var out struct {
		Runs map[string]string `json:"runs"`
	}
	if err := json.Unmarshal(answer, &out); err != nil {
		return fmt.Errorf("POST /v1/dags: decode answer: %w", err)
	}
	if len(out.Runs) != n {
		return fmt.Errorf("POST /v1/dags: %d run ids in the answer for %d entries", len(out.Runs), n)
	}
	r.res.add("submit", float64(took)/float64(time.Millisecond), "ms")
	r.res.add("submit per run", float64(took)/float64(time.Microsecond)/float64(n), "µs")
	r.res.add("submit per edge", float64(took)/float64(time.Microsecond)/float64(edges), "µs")
	r.res.add("submit rate", float64(n)/took.Seconds(), "runs/s")

	resumed, cpu, err := r.resumeAndDrain(ctx, n, false)
	if err != nil {
		return err
	}
	ok, err := r.finished(ctx, n, resumed)
	if err != nil {
		return err
	}
	drained := ok.lastFinished.Sub(resumed)
	r.res.add("processed", float64(n)/drained.Seconds(), "runs/s")
	r.res.add("drain time", drained.Seconds(), "s")
	r.addStartSpan(resumed)
	if shape == ShapeChain {
		r.res.add("per link", float64(drained)/float64(time.Millisecond)/float64(n), "ms")
	}
	cpu.report(r, n, "from the resume until the queue was empty")
	return nil
}
