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

func TestTmpExplain(t *testing.T) {
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
			j := &model.Job{ID: id.New(now), Namespace: "default", Name: fmt.Sprintf("x-%d-%d", base, i),
				Spec: model.JobSpec{Handler: "noop", Queue: "default", Retry: model.RetryPolicy{MaxAttempts: 3}}, Enabled: true, CreatedAt: now, UpdatedAt: now}
			r := &model.Run{ID: id.New(now), JobID: j.ID, JobName: j.Name, Namespace: "default", Status: model.RunQueued, Queue: "default", Trigger: model.TriggerSubmit, ScheduledFor: now, CreatedAt: now, MaxAttempts: 3}
			out[i] = store.NewJob{Job: j, Run: r}
		}
		return out
	}
	for k := 0; k < 20; k++ {
		if _, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: mk(1000, k), Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	// explain one batch
	jobs := mk(1000, 99)
	var (
		ids, ns, name, key, hash []string
		specs                    [][]byte
		enabled                  []bool
		nextFire                 []*time.Time
		created, updated         []time.Time
		in                       runInput
	)
	for _, e := range jobs {
		j := e.Job
		b, _ := encodeSpec(&j.Spec)
		ids = append(ids, j.ID); ns = append(ns, j.Namespace); name = append(name, j.Name); specs = append(specs, b)
		enabled = append(enabled, true); nextFire = append(nextFire, nil); key = append(key, ""); hash = append(hash, "")
		created = append(created, now); updated = append(updated, now)
		in.add(e.Run, "noop", model.Requirements{})
	}
	args := append([]any{ids, ns, name, specs, enabled, nextFire, key, hash, created, updated, now}, in.params()...)
	rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, TIMING) "+createJobsSQL, args...)
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
