package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseArgsRejectsBadInputNamingIt(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"river"}, "usage"},
		{[]string{"sidekiq", "drain"}, `system "sidekiq"`},
		{[]string{"river", "cron"}, `workload "cron"`},
		{[]string{"river", "drain", "--batch", "0"}, "--batch"},
		{[]string{"river", "drain", "--fetch-cooldown", "100us"}, "--fetch-cooldown"},
		{[]string{"river", "drain", "--insert", "slow"}, "--insert"},
		{[]string{"asynq", "scheduled", "--n", "-1"}, "--n"},
		{[]string{"river", "drain", "extra"}, "unexpected arguments"},
	} {
		_, err := parseArgs(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseArgs(%q) = %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
}

func TestParseArgsDefaultsPerWorkload(t *testing.T) {
	for w, n := range map[string]int{"drain": 100000, "scheduled": 10000, "exec": 10000, "steady": 0} {
		cfg, err := parseArgs([]string{"asynq", w}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.n != n {
			t.Errorf("%s: n = %d, want %d", w, cfg.n, n)
		}
	}
}

func TestRiverExecWorkersUnlessGiven(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"river", "exec"}, riverExecWorkers},
		{[]string{"river", "exec", "--workers", "1000"}, 1000},
		{[]string{"river", "drain"}, 1000},
		{[]string{"asynq", "exec"}, 1000},
	} {
		cfg, err := parseArgs(tc.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.workers != tc.want {
			t.Errorf("%q: workers = %d, want %d", tc.args, cfg.workers, tc.want)
		}
	}
}

func TestPercentileTakesStintBenchsIndex(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]float64{50: 50, 99: 99, 100: 100, 0: 1} {
		if got := percentile(d, p); got != want {
			t.Errorf("p%v = %v ms, want %v", p, got, want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v, want 0", got)
	}
}

func TestRecorderFinishesAtTarget(t *testing.T) {
	r := newRecorder()
	r.expect(3)
	submit := time.Now()
	for i := range 3 {
		if err := r.wait(context.Background(), time.Millisecond); err == nil {
			t.Fatalf("wait returned after %d of 3 handlers", i)
		}
		if err := r.handle(context.Background(), int64(i), submit.UnixNano(), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.wait(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if got, err := r.awaitStarts(context.Background(), 4, 10*time.Millisecond); err != nil || got != 3 {
		t.Errorf("awaitStarts(4) = %d, %v; want 3 after its limit", got, err)
	}
	starts, finishes, repeats := r.snapshot()
	if len(starts) != 3 || len(finishes) != 3 || repeats != 0 {
		t.Fatalf("%d starts, %d finishes, %d repeats; want 3, 3, 0", len(starts), len(finishes), repeats)
	}
	if !starts[0].submit.Equal(time.Unix(0, submit.UnixNano())) || starts[0].at.Before(starts[0].submit) {
		t.Errorf("start %v of a job submitted at %v", starts[0].at, starts[0].submit)
	}
}

func TestRecorderKeepsFirstStart(t *testing.T) {
	r := newRecorder()
	submit := time.Now()
	for range 2 {
		if err := r.handle(context.Background(), 7, submit.UnixNano(), false); err != nil {
			t.Fatal(err)
		}
	}
	starts, finishes, repeats := r.snapshot()
	if len(starts) != 1 || len(finishes) != 2 || repeats != 1 {
		t.Fatalf("%d starts, %d finishes, %d repeats; want 1, 2, 1", len(starts), len(finishes), repeats)
	}
}

func TestResultShapes(t *testing.T) {
	r := &result{System: "river", Workload: "drain", Store: "postgres", Params: map[string]string{"n": "10"}}
	r.add("processed", 1234.56, "jobs/s")
	var table bytes.Buffer
	r.print(&table)
	if !strings.Contains(table.String(), "processed  1234.6 jobs/s") {
		t.Errorf("table:\n%s", table.String())
	}
	var js bytes.Buffer
	if err := r.printJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"system", "workload", "store", "figures", "params"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, js.String())
		}
	}
}

func TestStatementLabel(t *testing.T) {
	if got := statementLabel("-- name: JobGetAvailable :many\nWITH locked_jobs AS (SELECT 1)"); got != "JobGetAvailable" {
		t.Errorf("sqlc statement: %q", got)
	}
	if got := statementLabel("SELECT  1\n FROM t"); got != "SELECT 1 FROM t" {
		t.Errorf("plain statement: %q", got)
	}
}
