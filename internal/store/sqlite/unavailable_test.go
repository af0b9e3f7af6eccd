package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// newJob is a one-off shell job with its first run, as the API builds them.
func newJob(now time.Time, shell string) store.NewJob {
	j := &model.Job{ID: id.New(now), Namespace: model.DefaultNamespace, Spec: model.JobSpec{Shell: shell, Queue: model.DefaultQueue,
		Retry: model.RetryPolicy{MaxAttempts: 1}}, Enabled: true, CreatedAt: now, UpdatedAt: now}
	j.Name = j.ID
	return store.NewJob{Job: j, Run: scheduler.NewRun(id.New(now), j, model.TriggerSubmit, nil, time.Time{}, now)}
}

// TestDiskFullIsUnavailable: a write the disk cannot take (SQLITE_FULL, here by capping the
// database's pages) is a model.ErrUnavailable saying "disk full"; once there is room, writes
// work again.
func TestDiskFullIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "stint.db"), Synchronous: "OFF"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, s.ProbeWrite(ctx))

	var pages int
	require.NoError(t, s.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages))
	_, err = s.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages))
	require.NoError(t, err)

	_, err = s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: []store.NewJob{newJob(now, strings.Repeat("x", 256<<10))}, Now: now})
	require.ErrorIs(t, err, model.ErrUnavailable)
	var ue *model.UnavailableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "disk full", ue.What)
	_, err = s.GetJob(ctx, &store.GetJobParams{IDOrName: "nothing"})
	require.ErrorIs(t, err, model.ErrNotFound, "reads still work, and a missing job is not an outage")

	_, err = s.w.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`)
	require.NoError(t, err)
	_, err = s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: []store.NewJob{newJob(now, strings.Repeat("x", 256<<10))}, Now: now})
	require.NoError(t, err, "room again")
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		what string
	}{
		{fmt.Errorf("write: %w", &fs.PathError{Op: "write", Path: "stint.db-wal", Err: syscall.ENOSPC}), "disk full"},
		{fmt.Errorf("write: %w", syscall.EDQUOT), "disk full"},
		{syscall.EIO, "disk I/O error"},
		{syscall.EROFS, "database is read-only"},
		{errors.New("no such table"), ""},
		{model.ErrConflict, ""},
	} {
		err := classify(tc.err)
		if tc.what == "" {
			require.Equal(t, tc.err, err)
			continue
		}
		var ue *model.UnavailableError
		require.ErrorAs(t, err, &ue, "%v", tc.err)
		require.Equal(t, tc.what, ue.What)
		require.ErrorIs(t, err, tc.err, "the cause is kept")
		require.Same(t, err, classify(err), "classified once")
	}
}
