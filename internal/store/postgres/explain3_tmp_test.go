package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func TestTmpLease(t *testing.T) {
	u := os.Getenv("TMP_URL")
	if u == "" {
		t.Skip()
	}
	ctx := context.Background()
	s, err := Open(ctx, Config{URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	mk := func(n, base int) []store.NewJob {
		out := make([]store.NewJob, n)
		for i := range out {
			j := &model.Job{ID: id.New(now), Namespace: "default", Name: fmt.Sprintf("z-%d-%d-%d", now.UnixNano(), base, i),
				Spec: model.JobSpec{Handler: "noop", Queue: "default", Retry: model.RetryPolicy{MaxAttempts: 3}}, Enabled: true, CreatedAt: now, UpdatedAt: now}
			r := &model.Run{ID: id.New(now), JobID: j.ID, JobName: j.Name, Namespace: "default", Status: model.RunQueued, Queue: "default", Trigger: model.TriggerSubmit, ScheduledFor: now, CreatedAt: now, MaxAttempts: 3}
			out[i] = store.NewJob{Job: j, Run: r}
		}
		return out
	}
	for k := 0; k < 10; k++ {
		if _, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: mk(1000, k), Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	explain := func(sql string, args ...any) {
		rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			var l string
			rows.Scan(&l)
			lines = append(lines, l)
		}
		fmt.Println(strings.Join(lines, "\n"))
	}
	p := &store.LeaseRunsParams{WorkerID: "w", Max: 500, LeaseTTL: time.Minute, Handlers: []string{"noop"}, Now: now}
	for k := 0; k < 6; k++ {
		st := time.Now()
		ls, err := s.LeaseRuns(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		d1 := time.Since(st)
		cs := make([]store.Completion, len(ls))
		for i, l := range ls {
			cs[i] = store.Completion{RunID: l.Run.ID, Token: l.Token, Status: model.AttemptSucceeded}
		}
		st = time.Now()
		if _, err := s.CompleteAttempts(ctx, &store.CompleteAttemptsParams{Completions: cs, Now: now}); err != nil {
			t.Fatal(err)
		}
		fmt.Println("lease", d1, "complete", time.Since(st))
	}
	tokens := make([]string, 500)
	for i := range tokens {
		tokens[i] = id.Token()
	}
	filter, fargs := handlerFilter(p, 7)
	explain(fmt.Sprintf(leaseSQL, filter), append([]any{"default", 500, "w", tokens, now, now}, fargs...)...)
	ls, _ := s.LeaseRuns(ctx, p)
	n := len(ls)
	runID, token, astatus, errMsg, newStatus, pending, reason := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	exit := make([]*int32, n)
	sched := make([]*time.Time, n)
	for i, l := range ls {
		runID[i], token[i], astatus[i] = l.Run.ID, l.Token, "succeeded"
	}
	explain(endSQL, runID, token, astatus, exit, errMsg, newStatus, sched, pending, reason, now)
}
