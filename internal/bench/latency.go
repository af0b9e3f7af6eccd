package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/stint-dev/stint/worker"
)

// Latency as a user sees it (issue 15): from just before a submit request leaves the client
// to the moment its run's handler starts, or, for a run due at an instant (scheduled, cron),
// from that instant to the handler's start. Both ends are read from the bench's own clock in
// its own process: the send instants by the submitting goroutines, the handler starts by a
// recorder whose handler the workers run (the local worker of a server in the bench's process,
// or the bench's own workers speaking the worker protocol over HTTP), so no two clocks are
// compared. The server's created_at and started_at are not the user's view: created_at is
// stamped after the request was read and decoded, started_at when the lease transaction
// begins, one instant for a whole lease batch, before the lease answer reached the worker.

// recorder notes when each run's handler started. It is the bench's progress count too: a
// workload waits for its runs' handlers in the bench's process rather than asking the server
// how far it got, which would take the server's time from the work measured.
type recorder struct {
	now     func() time.Time
	mu      sync.Mutex
	starts  map[string]time.Time // run id -> first handler start
	want    int                  // reached closes once len(starts) >= want
	reached chan struct{}
}

func newRecorder(now func() time.Time) *recorder {
	return &recorder{now: now, starts: map[string]time.Time{}}
}

// handler is the worker.Handler the bench's runs execute: it notes the instant it was called
// and succeeds, as the built-in noop does.
func (rec *recorder) handler(_ context.Context, t *worker.Task) error {
	rec.note(t.RunID, rec.now())
	return nil
}

// note records that run id's handler started at at. A run tried again (a lost lease) keeps
// its first start: the user's wait ended then.
func (rec *recorder) note(id string, at time.Time) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if _, ok := rec.starts[id]; ok {
		return
	}
	rec.starts[id] = at
	if rec.reached != nil && len(rec.starts) >= rec.want {
		close(rec.reached)
		rec.reached = nil
	}
}

// count is how many runs' handlers have started.
func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.starts)
}

// reach returns a channel closed once n runs' handlers have started (already closed if they
// have). One waiter at a time: a later call replaces the earlier one's target.
func (rec *recorder) reach(n int) <-chan struct{} {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	ch := make(chan struct{})
	if len(rec.starts) >= n {
		close(ch)
		return ch
	}
	rec.want, rec.reached = n, ch
	return ch
}

// snapshot is a copy of the starts noted so far.
func (rec *recorder) snapshot() map[string]time.Time {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return maps.Clone(rec.starts)
}

// between pairs each run of from (by id) with its instant in to, and returns the times from
// one to the other sorted, with how many runs of from have none in to. Runs only in to are
// not counted. Submit to start is between(sent, started): each run from the client's send
// instant of the request that created it to its handler's start.
func between(from, to map[string]time.Time) (sorted []time.Duration, missing int) {
	sorted = make([]time.Duration, 0, len(from))
	for id, f := range from {
		at, ok := to[id]
		if !ok {
			missing++
			continue
		}
		sorted = append(sorted, at.Sub(f))
	}
	slices.Sort(sorted)
	return sorted, missing
}

// lateness is how long after instant each run's handler started, sorted.
func lateness(instant time.Time, started map[string]time.Time) []time.Duration {
	out := make([]time.Duration, 0, len(started))
	for _, at := range started {
		out = append(out, at.Sub(instant))
	}
	slices.Sort(out)
	return out
}

// startSpan is the earliest and latest handler start (zero times when none started).
func startSpan(started map[string]time.Time) (first, last time.Time) {
	for _, at := range started {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last
}

// runIDKey is how the run's id begins in the answer of POST /v1/jobs ({"job":{...},
// "run":{"id":"...",...}}): Run's first field is its id, and no field of a job is an object
// named run.
var runIDKey = []byte(`"run":{"id":"`)

// createdRunID is the id of the run a POST /v1/jobs answer created: found without decoding
// the job when the answer holds the key once, decoded otherwise.
func createdRunID(answer []byte) (string, error) {
	if i := bytes.Index(answer, runIDKey); i >= 0 && bytes.LastIndex(answer, runIDKey) == i {
		rest := answer[i+len(runIDKey):]
		if j := bytes.IndexByte(rest, '"'); j > 0 {
			return string(rest[:j]), nil
		}
	}
	var out struct {
		Run *struct {
			ID string `json:"id"`
		} `json:"run"`
	}
	if err := json.Unmarshal(answer, &out); err != nil {
		return "", fmt.Errorf("decode answer: %w", err)
	}
	if out.Run == nil || out.Run.ID == "" {
		return "", fmt.Errorf("answer %.200q names no run", answer)
	}
	return out.Run.ID, nil
}

// ms is d in milliseconds, the unit of the latency figures.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
