package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/secret"
	"github.com/stint-dev/stint/internal/store"
)

// RawReader reads what an engine wrote, past the Store interface: the stored bytes of a
// job's spec and of a webhook secret. The engines' tests wrap their store in one, so that
// the suite can check that secrets are stored only in their sealed form.
type RawReader interface {
	RawJobSpec(ctx context.Context, jobID string) ([]byte, error)
	RawWebhookSecret(ctx context.Context, ownerID string) ([]byte, error)
}

// testSecrets checks that a job's secret env and a webhook secret, sealed by the API
// before they reach the store, are stored as sealed (the raw bytes hold no clear value) and
// come back unchanged through every read: GetJob, LeaseRuns, UpdateJob, WebhookSecret.
func testSecrets(t *testing.T, open OpenFunc) {
	const clear = "clear-secret-value"
	keys, err := secret.Parse(secret.Generate())
	require.NoError(t, err)
	seal := func(t *testing.T, v, context string) string {
		s, err := keys.Seal(v, context)
		require.NoError(t, err)
		return s
	}
	raw := func(t *testing.T, f *fx) RawReader {
		r, ok := f.s.(RawReader)
		require.True(t, ok, "the engine's test store must implement storetest.RawReader")
		return r
	}

	t.Run("SecretEnv", func(t *testing.T) {
		f := setup(t, open)
		sealed := seal(t, clear, "env:DB_PASSWORD")
		j, _ := f.submit("db", func(j *model.Job) { j.Spec.SecretEnv = map[string]string{"DB_PASSWORD": sealed} })

		b, err := raw(t, f).RawJobSpec(f.ctx, j.ID)
		require.NoError(t, err)
		require.NotContains(t, string(b), clear)
		require.Contains(t, string(b), sealed)

		got, err := f.s.GetJob(f.ctx, &store.GetJobParams{Namespace: j.Namespace, IDOrName: j.ID})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"DB_PASSWORD": sealed}, got.Spec.SecretEnv)
		l := f.leaseOne("w", t0)
		require.Equal(t, map[string]string{"DB_PASSWORD": sealed}, l.Spec.SecretEnv)
		opened, err := keys.Open(l.Spec.SecretEnv["DB_PASSWORD"], "env:DB_PASSWORD")
		require.NoError(t, err)
		require.Equal(t, clear, opened)

		resealed := seal(t, clear+"-2", "env:DB_PASSWORD")
		spec := got.Spec
		spec.SecretEnv = map[string]string{"DB_PASSWORD": resealed}
		_, err = f.s.UpdateJob(f.ctx, &store.UpdateJobParams{ID: j.ID, Spec: spec, Enabled: true, Now: t0})
		require.NoError(t, err)
		b, err = raw(t, f).RawJobSpec(f.ctx, j.ID)
		require.NoError(t, err)
		require.NotContains(t, string(b), clear)
		require.Contains(t, string(b), resealed)
	})

	t.Run("WebhookSecret", func(t *testing.T) {
		f := setup(t, open)
		j, _ := f.submit("hooked")
		sealed := seal(t, clear, "webhook:"+j.ID)
		require.NoError(t, f.s.SetWebhookSecret(f.ctx, &store.SetWebhookSecretParams{JobID: j.ID, Secret: sealed, Now: t0}))
		b, err := raw(t, f).RawWebhookSecret(f.ctx, j.ID)
		require.NoError(t, err)
		require.NotContains(t, string(b), clear)
		require.Equal(t, sealed, string(b))
		got, err := f.s.WebhookSecret(f.ctx, &store.WebhookSecretParams{JobID: j.ID})
		require.NoError(t, err)
		opened, err := keys.Open(got, "webhook:"+j.ID)
		require.NoError(t, err)
		require.Equal(t, clear, opened)
	})
}
