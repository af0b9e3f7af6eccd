package api

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/secret"
	"github.com/stint-dev/stint/internal/store"
)

// testKeys returns fresh secret keys.
func testKeys(t *testing.T) *secret.Keys {
	t.Helper()
	k, err := secret.Parse(secret.Generate())
	require.NoError(t, err)
	return k
}

// withKeys gives the API keys.
func withKeys(k *secret.Keys) func(*Config) { return func(c *Config) { c.Secrets = k } }

// storedSpec reads a job as the store keeps it.
func (b *testBundle) storedSpec(t *testing.T, idOrName string) model.JobSpec {
	t.Helper()
	j, err := b.store.GetJob(t.Context(), &store.GetJobParams{Namespace: model.DefaultNamespace, IDOrName: idOrName})
	require.NoError(t, err)
	return j.Spec
}

const clearValue = "hunter2-clear-value"

// Reads show "***"; the store keeps sealed values that open to the clear one; the lease
// answer of the worker that leases the run carries it, and nothing else does.
func TestSecretEnvMaskedStoredSealedLeased(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	keys := testKeys(t)
	b := setup(t, withKeys(keys), func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})

	created := b.createJob(t, `{"name": "db", "command": ["true"], "env": {"PLAIN": "p"}, "secret_env": {"DB_PASSWORD": "`+clearValue+`"}}`)
	require.Equal(t, map[string]string{"DB_PASSWORD": apitype.SecretMask}, created.Job.SecretEnv)
	require.Equal(t, map[string]string{"PLAIN": "p"}, created.Job.Env)

	sealed := b.storedSpec(t, "db").SecretEnv["DB_PASSWORD"]
	require.True(t, secret.Sealed(sealed), sealed)
	require.NotContains(t, sealed, clearValue)
	opened, err := keys.Open(sealed, envContext("DB_PASSWORD"))
	require.NoError(t, err)
	require.Equal(t, clearValue, opened)

	for _, path := range []string{"/v1/jobs/db", "/v1/jobs", "/v1/runs/" + created.Run.ID, "/v1/runs"} {
		r := b.do(t, "GET", path, nil)
		require.Equal(t, http.StatusOK, r.status)
		require.NotContains(t, string(r.body), clearValue, path)
	}
	r := b.do(t, "GET", "/v1/jobs/db", nil)
	var j apitype.Job
	r.decode(t, &j)
	require.Equal(t, map[string]string{"DB_PASSWORD": apitype.SecretMask}, j.SecretEnv)

	// The plan validates like POST and shows nothing.
	r = b.do(t, "POST", "/v1/plan", `{"command": ["true"], "secret_env": {"K": "`+clearValue+`"}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.NotContains(t, string(r.body), clearValue)

	b.register(t, "w1")
	b.register(t, "w2")
	got := b.lease(t, "w1", 1)
	require.Len(t, got.Leases, 1)
	require.Equal(t, map[string]string{"DB_PASSWORD": clearValue}, got.Leases[0].SecretEnv)
	require.Equal(t, map[string]string{"PLAIN": "p"}, got.Leases[0].Env)
	require.Empty(t, b.lease(t, "w2", 1).Leases, "the other worker gets nothing")
	for _, path := range []string{"/v1/runs/" + created.Run.ID, "/v1/workers/w1", "/v1/workers"} {
		r := b.do(t, "GET", path, nil)
		require.NotContains(t, string(r.body), clearValue, path)
	}
	require.NotContains(t, logs.String(), clearValue, "the server logs no secret value")
}

// A bound worker token leases only as its own worker, so another worker's token cannot
// ask for the lease that carries the secrets.
func TestSecretEnvLeaseNeedsTheWorkersToken(t *testing.T) {
	t.Parallel()
	b := secureSetup(t, withKeys(testKeys(t)))
	admin := b.as("static-admin-secret")
	w1, w2 := admin.as(admin.mint(t, "w1", model.RoleWorker, nil, "w1")), admin.as(admin.mint(t, "w2", model.RoleWorker, nil, "w2"))
	admin.createJob(t, `{"command": ["true"], "secret_env": {"K": "`+clearValue+`"}}`)
	w1.register(t, "w1")
	r := w2.do(t, "POST", "/v1/workers/w1/lease", `{"max": 1, "wait": "0s"}`)
	require.Equal(t, http.StatusForbidden, r.status, "body: %s", r.body)
	require.NotContains(t, string(r.body), clearValue)
	require.Equal(t, map[string]string{"K": clearValue}, w1.lease(t, "w1", 1).Leases[0].SecretEnv)
}

func TestSecretEnvRefused(t *testing.T) {
	t.Parallel()
	keyed, bare := setup(t, withKeys(testKeys(t))), setup(t)
	big := strings.Repeat("x", DefaultLimits().MaxEnvBytes)
	tests := []struct {
		name   string
		b      *testBundle
		body   string
		fields []string
		detail string
	}{
		{"no key", bare, `{"command": ["true"], "secret_env": {"A": "1", "B": "2"}}`, []string{"secret_env"}, "STINT_SECRET_KEY"},
		{"a name in env too", keyed, `{"command": ["true"], "env": {"A": "1"}, "secret_env": {"A": "2"}}`, []string{"secret_env.A"}, "in one of env and secret_env"},
		{"keep with nothing stored", keyed, `{"command": ["true"], "secret_env": {"A": "***"}}`, []string{"secret_env.A"}, "has none by this name"},
		{"bad name", keyed, `{"command": ["true"], "secret_env": {"A=B": "1", "": "2"}}`, []string{"secret_env", `secret_env["A=B"]`}, "'='"},
		{"NUL", keyed, `{"command": ["true"], "secret_env": {"A": "a\u0000b"}}`, []string{"secret_env.A"}, "NUL"},
		{"env and secret_env over the env limit together", keyed, `{"command": ["true"], "env": {"A": "` + big[:len(big)/2] + `"}, "secret_env": {"B": "` + big[:len(big)/2] + `"}}`, []string{"secret_env"}, "together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			jobs0, runs0 := tt.b.counts(t)
			r := tt.b.do(t, "POST", "/v1/jobs", tt.body)
			require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
			require.ElementsMatch(t, tt.fields, r.fields(t))
			require.Contains(t, string(r.body), tt.detail)
			jobs, runs := tt.b.counts(t)
			require.Equal(t, [2]int{jobs0, runs0}, [2]int{jobs, runs}, "nothing created")
		})
	}
}

// PATCH without secret_env keeps every value; with it, "***" keeps one and the rest are
// replaced. PUT of the same values, or of "***", is no change; of a new value, a change of
// secret_env.
func TestSecretEnvUpdates(t *testing.T) {
	t.Parallel()
	keys := testKeys(t)
	b := setup(t, withKeys(keys))
	leased := func(t *testing.T) map[string]string {
		t.Helper()
		r := b.do(t, "POST", "/v1/jobs/app/trigger", nil)
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
		l := b.lease(t, "w1", 1)
		require.Len(t, l.Leases, 1)
		b.complete(t, apitype.Completion{RunID: l.Leases[0].RunID, Token: l.Leases[0].Token, Status: "succeeded"})
		return l.Leases[0].SecretEnv
	}
	b.register(t, "w1")
	apply := func(t *testing.T, body string) apitype.ApplyResponse {
		t.Helper()
		r := b.do(t, "PUT", "/v1/jobs/app", body)
		require.Contains(t, []int{200, 201}, r.status, "body: %s", r.body)
		require.NotContains(t, string(r.body), "s3cret")
		var out apitype.ApplyResponse
		r.decode(t, &out)
		return out
	}
	require.Equal(t, "created", apply(t, `{"command": ["true"], "secret_env": {"A": "s3cret-a", "B": "s3cret-b"}}`).Action)
	sealedA := b.storedSpec(t, "app").SecretEnv["A"]
	require.Equal(t, map[string]string{"A": "s3cret-a", "B": "s3cret-b"}, leased(t))

	for _, body := range []string{
		`{"command": ["true"], "secret_env": {"A": "s3cret-a", "B": "s3cret-b"}}`,
		`{"command": ["true"], "secret_env": {"A": "***", "B": "***"}}`,
		`{"command": ["true"], "secret_env": {"A": "***", "B": "s3cret-b"}}`,
	} {
		out := apply(t, body)
		require.Equal(t, "unchanged", out.Action, body)
		require.Empty(t, out.Changes)
	}
	require.Equal(t, sealedA, b.storedSpec(t, "app").SecretEnv["A"], "an unchanged value keeps its ciphertext")

	out := apply(t, `{"command": ["true"], "secret_env": {"A": "***", "B": "s3cret-new"}}`)
	require.Equal(t, "updated", out.Action)
	require.Equal(t, []string{"secret_env"}, out.Changes)
	require.Equal(t, map[string]string{"A": "s3cret-a", "B": "s3cret-new"}, leased(t))

	r := b.do(t, "PATCH", "/v1/jobs/app", `{"priority": 5}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, map[string]string{"A": "s3cret-a", "B": "s3cret-new"}, leased(t), "a PATCH without secret_env keeps it")

	r = b.do(t, "PATCH", "/v1/jobs/app", `{"secret_env": {"A": "***", "C": "s3cret-c"}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.NotContains(t, string(r.body), "s3cret")
	require.Equal(t, map[string]string{"A": "s3cret-a", "C": "s3cret-c"}, leased(t))

	r = b.do(t, "PATCH", "/v1/jobs/app", `{"secret_env": {"D": "***"}}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, []string{"secret_env.D"}, r.fields(t))

	require.Equal(t, "updated", apply(t, `{"command": ["true"]}`).Action, "PUT without secret_env drops it")
	require.Empty(t, b.storedSpec(t, "app").SecretEnv)
}

// A pipeline step's "***" keeps the value of its job.
func TestSecretEnvPipelineStep(t *testing.T) {
	t.Parallel()
	b := setup(t, withKeys(testKeys(t)))
	b.putPipeline(t, "etl", `{"steps": {"load": {"command": ["true"], "secret_env": {"K": "s3cret"}}}}`, http.StatusCreated)
	b.putPipeline(t, "etl", `{"steps": {"load": {"command": ["true"], "secret_env": {"K": "***"}}}}`, http.StatusOK)
	r := b.do(t, "GET", "/v1/jobs/etl.load", nil)
	require.NotContains(t, string(r.body), "s3cret")
	b.register(t, "w1")
	b.pipelineRun(t, "POST", "/v1/pipelines/etl/trigger", nil, http.StatusCreated)
	l := b.lease(t, "w1", 1)
	require.Len(t, l.Leases, 1)
	require.Equal(t, map[string]string{"K": "s3cret"}, l.Leases[0].SecretEnv)
}

// A server whose key is not the one that sealed a job's values (or that has none) does not
// hand the run out without them: the attempt ends failed, saying why.
func TestSecretEnvWrongKey(t *testing.T) {
	t.Parallel()
	for name, other := range map[string]*secret.Keys{"another key": testKeys(t), "no key": nil} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, withKeys(testKeys(t)))
			created := b.createJob(t, `{"command": ["true"], "secret_env": {"K": "`+clearValue+`"}}`)
			b.register(t, "w1")
			a, err := New(Config{Engine: b.eng, Open: true, Secrets: other})
			require.NoError(t, err)
			res, err := a.Protocol().Lease(t.Context(), "w1", &apitype.LeaseRequest{Max: 1, Wait: new(apitype.Duration)})
			require.NoError(t, err)
			require.Empty(t, res.Leases)
			run := b.getRun(t, created.Run.ID)
			require.Equal(t, "failed", run.Status)
			require.Contains(t, run.Error, "cannot decrypt the job's secret env: secret_env.K")
		})
	}
}

// Webhook secrets are sealed with the server's key; one stored in clear (before a key, or
// by a server without one) still checks calls.
func TestWebhookSecretSealed(t *testing.T) {
	t.Parallel()
	keys := testKeys(t)
	b := setup(t, withKeys(keys))
	created := b.createJob(t, `{"name": "deploy", "command": ["true"]}`)
	r := b.do(t, "POST", "/v1/jobs/deploy/webhook", nil)
	require.Equal(t, http.StatusCreated, r.status)
	var sec apitype.WebhookSecret
	r.decode(t, &sec)
	stored, err := b.store.WebhookSecret(t.Context(), &store.WebhookSecretParams{JobID: created.Job.ID})
	require.NoError(t, err)
	require.True(t, secret.Sealed(stored), stored)
	require.NotContains(t, stored, sec.Secret)

	call := func(secret string) int {
		body := []byte(`{}`)
		h := http.Header{apitype.WebhookSignatureHeader: {apitype.WebhookSignature(secret, body)}}
		return b.doCtx(t, t.Context(), "POST", sec.Path, body, h).status
	}
	require.Equal(t, http.StatusCreated, call(sec.Secret))
	require.Equal(t, http.StatusUnauthorized, call("wrong"))

	// The same store served without the key: the sealed secret cannot be checked, a 500.
	keyless, err := New(Config{Engine: b.eng, Open: true, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", sec.Path, strings.NewReader(`{}`))
	req.Header.Set(apitype.WebhookSignatureHeader, apitype.WebhookSignature(sec.Secret, []byte(`{}`)))
	keyless.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())

	require.NoError(t, b.store.SetWebhookSecret(t.Context(), &store.SetWebhookSecretParams{JobID: created.Job.ID, Secret: "legacy-clear"}))
	require.Equal(t, http.StatusCreated, call("legacy-clear"), "a secret stored in clear still works")

	bare := setup(t)
	bareJob := bare.createJob(t, `{"name": "deploy", "command": ["true"]}`)
	r = bare.do(t, "POST", "/v1/jobs/deploy/webhook", nil)
	require.Equal(t, http.StatusCreated, r.status)
	r.decode(t, &sec)
	stored, err = bare.store.WebhookSecret(t.Context(), &store.WebhookSecretParams{JobID: bareJob.Job.ID})
	require.NoError(t, err)
	require.Equal(t, sec.Secret, stored, "without a key the secret is kept as before")
}
