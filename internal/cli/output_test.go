package cli

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
)

func TestShortDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{59*time.Second + 900*time.Millisecond, "59s"},
		{time.Minute, "1m"},
		{59 * time.Minute, "59m"},
		{47 * time.Hour, "47h"},
		{48 * time.Hour, "2d"},
		{400 * 24 * time.Hour, "400d"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, shortDuration(tt.d), tt.d.String())
	}
}

func TestTimes(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	cfg := &config{clock: clock.NewFake(testNow), loc: paris}
	at := func(d time.Duration) *time.Time { v := testNow.Add(d); return &v }

	require.Equal(t, "2030-01-02 13:00:00 (just now)", cfg.when(at(0)), "local time")
	require.Equal(t, "-", cfg.when(nil))
	require.Equal(t, "-", cfg.when(&time.Time{}))
	require.Equal(t, "5m ago", cfg.ago(at(-5*time.Minute)))
	require.Equal(t, "in 2h", cfg.ago(at(2*time.Hour+time.Minute)))
	require.Equal(t, "just now", cfg.ago(at(500*time.Millisecond)))

	require.Equal(t, "-", cfg.elapsed(nil, nil))
	require.Equal(t, "1m0s", cfg.elapsed(at(-time.Minute), nil), "still running: until now")
	require.Equal(t, "123ms", cfg.elapsed(at(0), at(123456*time.Microsecond)))
	require.Equal(t, "2.3s", cfg.elapsed(at(0), at(2345*time.Millisecond)))
	require.Equal(t, "1h1m2s", cfg.elapsed(at(0), at(time.Hour+time.Minute+2400*time.Millisecond)))
	require.Equal(t, "0s", cfg.elapsed(at(0), at(-time.Second)), "clock skew")
}

func TestOutputFormats(t *testing.T) {
	t.Parallel()
	const queues = `{"items":[{"name":"q","priority":1,"max_concurrency":0,"paused":false,"depth":{}}]}`
	const jobs = `{"items":[
		{"id":"01jd3x5k8q9r2s4t6v8w0y2z4a","name":"01jd3x5k8q9r2s4t6v8w0y2z4a","namespace":"etl","queue":"default","shell":"echo hello","enabled":true,"tags":["a"]},
		{"id":"01jd3x5m0b1c2d3e4f5g6h7j8k","name":"01jd3x5m0b1c2d3e4f5g6h7j8k","namespace":"etl","queue":"default","command":["./load"],"enabled":true,"dag":{"id":"d1","entry":"load"}}]}`
	listQueues := exchange{method: "GET", path: "/v1/queues", answer: queues}
	runCLICases(t, []cliCase{
		{name: "yaml", args: []string{"queues", "list", "-o", "yaml"}, exchanges: []exchange{listQueues},
			stdout: "items:\n- depth: {}\n  max_concurrency: 0\n  name: q\n  paused: false\n  priority: 1\n"},
		{name: "json by -o", args: []string{"queues", "list", "-o", "json"}, exchanges: []exchange{listQueues}, stdoutHas: []string{`"name": "q"`}},
		{name: "unknown format", args: []string{"queues", "list", "-o", "xml"}, stderr: `--output: want table, wide, json or yaml, got "xml"`, code: ExitUsage},
		{name: "json and yaml", args: []string{"queues", "list", "-o", "yaml", "--json"}, stderr: "--json and -o yaml: give one", code: ExitUsage},
		{
			// Jobs submitted without a name show what they run or their DAG entry, not their id
			// again; -o wide adds the namespace, priority, last run id and tags.
			name: "jobs wide", args: []string{"jobs", "list", "-o", "wide"},
			exchanges: []exchange{{method: "GET", path: "/v1/jobs", answer: jobs}},
			stdout: `NAME          ID                          NAMESPACE  QUEUE    PRIORITY  SCHEDULE  ENABLED  LAST RUN  LAST RUN ID  NEXT  TAGS
(echo hello)  01jd3x5k8q9r2s4t6v8w0y2z4a  etl        default  0         -         yes      -         -            -     a
load (dag)    01jd3x5m0b1c2d3e4f5g6h7j8k  etl        default  0         -         yes      -         -            -     -
`,
		},
	})
}

func TestWatch(t *testing.T) {
	t.Parallel()
	answer := func(paused bool) exchange {
		return exchange{method: "GET", path: "/v1/queues/q", answer: fmt.Sprintf(`{"name":"q","paused":%t,"depth":{}}`, paused)}
	}
	api := newFakeAPI(t, answer(false), answer(false), answer(true))
	fake := clock.NewFake(testNow)
	cfg := &config{getenv: func(string) string { return "" }, clock: fake, loc: time.UTC}
	root := newRoot(cfg)
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"--server", api.URL, "queues", "get", "q", "--watch"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int)
	go func() { done <- Execute(ctx, root) }()
	for served := 1; ; {
		// Each time the watch sleeps, wake it; after the third answer, stop it.
		require.Eventually(t, func() bool { return len(fake.Pending()) == 1 }, 10*time.Second, time.Millisecond)
		if served == 3 {
			break
		}
		fake.Advance(watchInterval)
		served++
		require.Eventually(t, func() bool { return len(api.requests()) == served }, 10*time.Second, time.Millisecond)
	}
	cancel()
	require.Equal(t, 0, <-done, stderr.String())
	api.check(t)
	// The unchanged second answer is not printed again.
	require.Equal(t, `NAME  PAUSED  PRIORITY  MAX CONCURRENCY  RATE  WAITING  SCHEDULED  QUEUED  RUNNING
q     no      0         -                -     0        0          0       0

NAME  PAUSED  PRIORITY  MAX CONCURRENCY  RATE  WAITING  SCHEDULED  QUEUED  RUNNING
q     yes     0         -                -     0        0          0       0
`, stdout.String())
}
