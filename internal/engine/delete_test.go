package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// Deleting a pipeline deletes its step jobs and cancels their active runs; the worker of a
// running step is told through its outstanding long poll.
func TestDeletePipelineCancelsItsRuns(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	register(t, e, "w")
	pl, _, err := e.PutPipeline(ctx, etl(nil))
	require.NoError(t, err)
	pr, err := e.TriggerPipeline(ctx, pl, model.TriggerManual, nil)
	require.NoError(t, err)
	require.Len(t, lease(t, e, "w", 10, 0).Leases, 1) // extract runs

	for _, s := range pl.Spec.Steps {
		_, err := b.store.GetJob(ctx, &store.GetJobParams{Namespace: pl.Namespace, IDOrName: s.JobID})
		require.NoError(t, err, s.Name)
	}

	got := make(chan *LeaseResult, 1)
	go func() { got <- lease(t, e, "w", 0, time.Hour) }()
	waitTimer(t, b, t0.Add(e.cfg.MaxLeaseWait))
	cancelled, err := e.DeletePipeline(ctx, pl)
	require.NoError(t, err)
	require.Len(t, cancelled, len(pl.Spec.Steps), "every step's run was active")
	resp := pollAnswer(t, got, "the cancel was not pushed to the long poll")
	require.Equal(t, []string{pr.Steps["extract"].ID}, resp.Cancel)
	_, err = b.store.GetPipeline(ctx, &store.GetPipelineParams{Namespace: pl.Namespace, IDOrName: pl.Name})
	require.ErrorIs(t, err, model.ErrNotFound)
	for _, s := range pl.Spec.Steps {
		_, err := b.store.GetJob(ctx, &store.GetJobParams{Namespace: pl.Namespace, IDOrName: s.JobID})
		require.ErrorIs(t, err, model.ErrNotFound, s.Name)
	}

	again, err := e.DeletePipeline(ctx, pl)
	require.NoError(t, err, "already gone")
	require.Empty(t, again)
}

func TestRotateWebhookSecret(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	run := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	first, err := e.RotateWebhookSecret(ctx, run.JobID, nil)
	require.NoError(t, err)
	second, err := e.RotateWebhookSecret(ctx, run.JobID, nil)
	require.NoError(t, err)
	require.NotEqual(t, first, second)
	stored, err := b.store.WebhookSecret(ctx, &store.WebhookSecretParams{JobID: run.JobID})
	require.NoError(t, err)
	require.Equal(t, second, stored, "the new secret replaces the old")
	_, err = e.RotateWebhookSecret(ctx, "nothing", nil)
	require.ErrorIs(t, err, model.ErrNotFound)

	// With seal, the store keeps what seal makes of the secret, and the caller gets the secret.
	third, err := e.RotateWebhookSecret(ctx, run.JobID, func(s string) (string, error) { return "sealed(" + s + ")", nil })
	require.NoError(t, err)
	stored, err = b.store.WebhookSecret(ctx, &store.WebhookSecretParams{JobID: run.JobID})
	require.NoError(t, err)
	require.Equal(t, "sealed("+third+")", stored)
}
