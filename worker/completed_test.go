package worker

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// TestOnCompleted: the hook hears of each attempt the server acknowledged, once, with its
// run, attempt and outcome; not of one the server refused (a lost lease) nor of one it
// refused for good (dropped).
func TestOnCompleted(t *testing.T) {
	t.Parallel()
	s := newFake()
	s.stale = map[string]bool{"stale": true}
	s.onComplete = func(req *apitype.CompleteRequest) error {
		for _, c := range req.Completions {
			if c.RunID == "bad" {
				return &apitype.Problem{Status: 400, Title: "Bad Request"}
			}
		}
		return nil
	}
	var mu sync.Mutex
	var got []Completion
	// Hold the shipper in its first call so that the others go as one batch.
	gate := &gatedComplete{Server: s, entered: make(chan struct{}), release: make(chan struct{})}
	a, _, _ := startAgent(t, s, func(c *Config) {
		c.Server = gate
		c.Capacity.Slots = 8
		c.Handlers["fail"] = func(context.Context, *Task) error { return errors.New("boom") }
		c.OnCompleted = func(c Completion) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, c)
		}
	})
	s.add(handlerLease("g", "noop"))
	<-gate.entered
	second := handlerLease("ok", "noop")
	second.Attempt = 2
	s.add(second, handlerLease("fail", "fail"), handlerLease("stale", "noop"), handlerLease("bad", "noop"),
		shellLease("exit3", "exit 3"))
	eventually(t, "five completions queued", func() bool {
		a.ship.mu.Lock()
		defer a.ship.mu.Unlock()
		return len(a.ship.comps) == 5
	})
	close(gate.release)
	eventually(t, "every lease released", func() bool { l, u := a.holding(); return l == 0 && u == 0 })

	mu.Lock()
	defer mu.Unlock()
	byRun := map[string]Completion{}
	for _, c := range got {
		_, twice := byRun[c.RunID]
		require.False(t, twice, "run %s told twice", c.RunID)
		byRun[c.RunID] = c
	}
	require.Len(t, byRun, 4, "g, ok, fail, exit3: %+v", got)
	require.Equal(t, Completion{RunID: "ok", JobID: "job-ok", JobName: "job-ok", Attempt: 2, Status: statusSucceeded}, byRun["ok"])
	require.Equal(t, statusSucceeded, byRun["g"].Status)
	require.Equal(t, statusFailed, byRun["fail"].Status)
	require.Equal(t, "boom", byRun["fail"].Error)
	require.Equal(t, statusFailed, byRun["exit3"].Status)
	require.NotNil(t, byRun["exit3"].ExitCode)
	require.Equal(t, 3, *byRun["exit3"].ExitCode)
	_, told := byRun["stale"]
	require.False(t, told, "the server refused its completion")
	_, told = byRun["bad"]
	require.False(t, told, "its completion was dropped")
}
