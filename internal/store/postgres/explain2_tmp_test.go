package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func TestTmpTiming(t *testing.T) {
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
			j := &model.Job{ID: id.New(now), Namespace: "default", Name: fmt.Sprintf("y-%d-%d-%d", now.UnixNano(), base, i),
				Spec: model.JobSpec{Handler: "noop", Queue: "default", Retry: model.RetryPolicy{MaxAttempts: 3}}, Enabled: true, CreatedAt: now, UpdatedAt: now}
			r := &model.Run{ID: id.New(now), JobID: j.ID, JobName: j.Name, Namespace: "default", Status: model.RunQueued, Queue: "default", Trigger: model.TriggerSubmit, ScheduledFor: now, CreatedAt: now, MaxAttempts: 3}
			out[i] = store.NewJob{Job: j, Run: r}
		}
		return out
	}
	var total time.Duration
	for k := 0; k < 30; k++ {
		jobs := mk(1000, k)
		st := time.Now()
		if _, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: jobs, Now: now}); err != nil {
			t.Fatal(err)
		}
		d := time.Since(st)
		if k >= 10 {
			total += d
		}
		fmt.Println(k, d)
	}
	fmt.Println("avg", total/20)
}
