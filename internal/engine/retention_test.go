package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// The leader deletes history past Config.Retention; an engine without a policy runs no
// retention service at all.
func TestRetentionOnTheLeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, b := setup(t, func(c *Config) {
		c.Stepped = true
		c.LeaderTTL = time.Hour
		c.Retention = RetentionPolicy{Runs: time.Hour}
	})
	run := submit(t, e, b, t0, model.RetryPolicy{})
	_, err := e.CancelRuns(ctx, &store.CancelRunsParams{RunIDs: []string{run.ID}, Reason: "not needed", Now: t0})
	require.NoError(t, err)
	_, err = e.Step(ctx)
	require.NoError(t, err)
	require.Len(t, e.leaderSteppers, 3, "rescuer, cron firer and retention")
	require.Equal(t, "retention", e.leaderSteppers[2].Name())
	require.Equal(t, model.RunCancelled, getRun(t, b, run.ID).Status, "finished within the hour")

	b.clk.Set(t0.Add(time.Hour + time.Minute))
	_, err = e.Step(ctx)
	require.NoError(t, err)
	_, err = b.store.GetRun(ctx, &store.GetRunParams{ID: run.ID})
	require.ErrorIs(t, err, model.ErrNotFound)

	plain, _ := setup(t, func(c *Config) { c.Stepped = true; c.LeaderTTL = time.Hour })
	_, err = plain.Step(ctx)
	require.NoError(t, err)
	require.Len(t, plain.leaderSteppers, 2, "no policy: no retention service")
}
