package sim

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

// The crash point: the write it falls on is committed or not as its mode says, and the
// process answers nothing from then on, reads included.
func TestCrashStore(t *testing.T) {
	t.Parallel()
	for _, mode := range []crashMode{crashBefore, crashAfter} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			inner, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "stint.db")})
			if err != nil {
				t.Fatal(err)
			}
			defer inner.Close()
			cs := &crashStore{inner: inner, crashAt: 2, mode: mode}
			now := time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC)
			create := func(name string) error {
				_, err := cs.CreateJobs(ctx, &store.CreateJobsParams{Now: now, Jobs: []store.NewJob{{Job: &model.Job{
					ID: name, Namespace: model.DefaultNamespace, Name: name, Enabled: true,
					Spec: model.JobSpec{Handler: "a", Queue: model.DefaultQueue}, CreatedAt: now, UpdatedAt: now}}}})
				return err
			}
			if err := create("j1"); err != nil {
				t.Fatalf("write 1: %v", err)
			}
			if _, err := cs.GetJob(ctx, &store.GetJobParams{IDOrName: "j1"}); err != nil {
				t.Fatalf("a read is not a write: %v", err)
			}
			if err := create("j2"); !errors.Is(err, ErrCrashed) {
				t.Fatalf("write 2 = %v, want ErrCrashed", err)
			}
			if _, err := cs.GetJob(ctx, &store.GetJobParams{IDOrName: "j1"}); !errors.Is(err, ErrCrashed) {
				t.Fatalf("a read after the crash = %v, want ErrCrashed", err)
			}
			if cs.writes != 2 || !cs.dead || cs.crashOp != "CreateJobs" {
				t.Fatalf("writes %d, dead %v, op %q", cs.writes, cs.dead, cs.crashOp)
			}
			_, err = inner.GetJob(ctx, &store.GetJobParams{IDOrName: "j2"})
			if committed := err == nil; committed != (mode == crashAfter) {
				t.Fatalf("the crashing write committed: %v (err %v), mode %s", committed, err, mode)
			}
		})
	}
}
