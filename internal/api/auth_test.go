package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/auth"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/testcert"
)

// wantPerm is the permission each route needs, written out apart from the route table: a
// route whose permission changes, and a new route nobody listed here, fail
// TestEveryRouteWithEveryRole.
var wantPerm = map[string]auth.Perm{ //nolint:gochecknoglobals // a read-only test table
	"GET /healthz":         auth.Open,
	"GET /readyz":          auth.Open,
	"GET /metrics":         auth.Open,
	"GET /v1/openapi.json": auth.Open,
	"GET /v1/version":      auth.Read,

	"POST /v1/jobs":                   auth.Operate,
	"POST /v1/jobs/batch":             auth.Operate,
	"POST /v1/jobs/stream":            auth.Operate,
	"GET /v1/jobs":                    auth.Read,
	"GET /v1/jobs/{id}":               auth.Read,
	"PATCH /v1/jobs/{id}":             auth.Operate,
	"DELETE /v1/jobs/{id}":            auth.Operate,
	"POST /v1/jobs/{id}/trigger":      auth.Operate,
	"POST /v1/jobs/{id}/cancel":       auth.Operate,
	"PUT /v1/jobs/{id}":               auth.Operate,
	"POST /v1/jobs/{id}/backfill":     auth.Operate,
	"POST /v1/jobs/{id}/webhook":      auth.Operate,
	"POST /v1/hooks/{id}":             auth.Open,
	"POST /v1/hooks/pipelines/{name}": auth.Open,
	"POST /v1/jobs/{id}/pause":        auth.Operate,
	"POST /v1/jobs/{id}/resume":       auth.Operate,
	"POST /v1/plan":                   auth.Read,
	"POST /v1/dags":                   auth.Operate,

	"GET /v1/pipelines":                          auth.Read,
	"PUT /v1/pipelines/{name}":                   auth.Operate,
	"GET /v1/pipelines/{name}":                   auth.Read,
	"DELETE /v1/pipelines/{name}":                auth.Operate,
	"POST /v1/pipelines/{name}/trigger":          auth.Operate,
	"POST /v1/pipelines/{name}/webhook":          auth.Operate,
	"GET /v1/pipelines/{name}/runs":              auth.Read,
	"GET /v1/pipelines/{name}/runs/{id}":         auth.Read,
	"POST /v1/pipelines/{name}/runs/{id}/cancel": auth.Operate,
	"POST /v1/pipelines/{name}/runs/{id}/retry":  auth.Operate,

	"GET /v1/whoami":    auth.Read,
	"GET /v1/dags":      auth.Read,
	"GET /v1/dags/{id}": auth.Read,

	"GET /v1/runs":              auth.Read,
	"GET /v1/runs/{id}":         auth.Read,
	"POST /v1/runs/{id}/cancel": auth.Operate,
	"POST /v1/runs/{id}/retry":  auth.Operate,
	"GET /v1/runs/{id}/logs":    auth.Read,

	"GET /v1/cluster":             auth.Read,
	"GET /v1/doctor":              auth.Read,
	"GET /v1/workers":             auth.Read,
	"GET /v1/workers/{id}":        auth.Read,
	"POST /v1/workers/{id}/drain": auth.Operate,

	"GET /v1/queues":          auth.Read,
	"GET /v1/queues/{name}":   auth.Read,
	"PATCH /v1/queues/{name}": auth.Operate,

	"GET /v1/alerts":              auth.Read,
	"GET /v1/audit":               auth.Read,
	"GET /v1/tokens":              auth.Admin,
	"POST /v1/tokens":             auth.Admin,
	"POST /v1/tokens/{id}/revoke": auth.Admin,

	"POST /v1/workers/register":       auth.Worker,
	"POST /v1/workers/{id}/lease":     auth.Worker,
	"POST /v1/workers/{id}/heartbeat": auth.Worker,
	"POST /v1/workers/{id}/leave":     auth.Worker,
	"POST /v1/attempts/logs":          auth.Worker,
	"POST /v1/attempts/complete":      auth.Worker,
}

// secureSetup starts an API with authentication on and the static tokens set.
func secureSetup(t *testing.T, mods ...func(*Config)) *testBundle {
	t.Helper()
	return setup(t, append([]func(*Config){func(c *Config) {
		c.Open = false
		c.UserToken, c.WorkerToken = "static-admin-secret", "static-worker-secret"
	}}, mods...)...)
}

// mint stores a token with these fields and returns its secret.
func (b *testBundle) mint(t *testing.T, name string, role model.Role, namespaces []string, workerID string) string {
	t.Helper()
	secret, err := auth.NewSecret()
	require.NoError(t, err)
	now := time.Now()
	_, err = b.eng.CreateToken(context.Background(), &store.CreateTokenParams{Token: &model.Token{
		ID: id.New(now), Name: name, Role: role, Namespaces: namespaces, WorkerID: workerID, Hash: auth.Hash(secret), CreatedAt: now}})
	require.NoError(t, err)
	return secret
}

// as returns a copy of b that sends token.
func (b *testBundle) as(token string) *testBundle {
	c := *b
	c.token = token
	return &c
}

// requestFor fills a route's path parameters and gives it a body the handler can read:
// worker ids are w1 (the bound worker token's), other ids name nothing.
func requestFor(rt route) (string, any) {
	path := rt.Path
	if strings.HasPrefix(path, "/v1/workers/{id}/lease") || strings.HasPrefix(path, "/v1/workers/{id}/heartbeat") ||
		strings.HasPrefix(path, "/v1/workers/{id}/leave") {
		path = strings.ReplaceAll(path, "{id}", "w1")
	}
	path = strings.ReplaceAll(strings.ReplaceAll(path, "{id}", "x"), "{name}", "x")
	switch rt.Method + " " + rt.Path {
	case "POST /v1/workers/register":
		return path, `{"id": "w1", "capacity": {"slots": 1}, "commands": true}`
	case "POST /v1/workers/{id}/lease":
		return path, `{"max": 0, "wait": "0s"}`
	case "POST /v1/workers/{id}/leave":
		return path, `{"session": "not-this-one"}`
	case "POST /v1/jobs", "POST /v1/plan":
		return path, `{"command": ["true"]}`
	case "POST /v1/tokens":
		return path, `{"name": "walk", "role": "viewer"}`
	}
	if rt.Method == "GET" || rt.Method == "DELETE" {
		return path, nil
	}
	return path, `{}`
}

// TestEveryRouteWithEveryRole walks every registered route with no token, a bad one, a
// revoked one, and a token of every role: 401 without a valid token, 403 with a role
// that lacks the route's permission, and something else (the handler's answer) with one
// that has it. Open routes answer alike whatever is sent.
func TestEveryRouteWithEveryRole(t *testing.T) {
	t.Parallel()
	b := secureSetup(t)
	revoked := b.mint(t, "old", model.RoleAdmin, nil, "")
	tks, err := b.store.ListTokens(context.Background())
	require.NoError(t, err)
	_, err = b.eng.RevokeToken(context.Background(), tks[0].ID)
	require.NoError(t, err)

	type caller struct {
		name  string
		token string
		role  model.Role // "": no valid token
	}
	callers := []caller{
		{"no token", "", ""},
		{"unknown token", "stint_nope", ""},
		{"revoked token", revoked, ""},
		{"admin", b.mint(t, "admin", model.RoleAdmin, nil, ""), model.RoleAdmin},
		{"operator", b.mint(t, "operator", model.RoleOperator, nil, ""), model.RoleOperator},
		{"viewer", b.mint(t, "viewer", model.RoleViewer, nil, ""), model.RoleViewer},
		{"worker bound to w1", b.mint(t, "w1", model.RoleWorker, nil, "w1"), model.RoleWorker},
		{"worker of any id", b.mint(t, "any", model.RoleWorker, nil, ""), model.RoleWorker},
		{"--api-token", "static-admin-secret", model.RoleAdmin},
		{"--worker-token", "static-worker-secret", model.RoleWorker},
	}

	routes := routeTable()
	seen := map[string]bool{}
	for _, rt := range routes {
		key := rt.Method + " " + rt.Path
		seen[key] = true
		want, listed := wantPerm[key]
		require.True(t, listed, "route %s is new: add its permission to wantPerm (and docs/security.md)", key)
		require.Equal(t, want, rt.Perm, "route %s", key)
	}
	for key := range wantPerm {
		require.True(t, seen[key], "wantPerm lists %s, which is not a route", key)
	}

	for _, rt := range routes {
		path, body := requestFor(rt)
		t.Run(rt.Method+" "+rt.Path, func(t *testing.T) {
			var anon int
			for _, c := range callers {
				r := b.as(c.token).do(t, rt.Method, path, body)
				switch {
				case rt.Perm == auth.Open:
					if c.token == "" {
						anon = r.status
					}
					require.Equal(t, anon, r.status, "%s: an open route ignores tokens; body %s", c.name, r.body)
				case c.role == "":
					require.Equal(t, http.StatusUnauthorized, r.status, "%s: body %s", c.name, r.body)
					require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
					r.problem(t)
				case !auth.Allows(c.role, rt.Perm):
					require.Equal(t, http.StatusForbidden, r.status, "%s: body %s", c.name, r.body)
					require.Contains(t, r.problem(t).Detail, "this route needs")
				default:
					require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, r.status,
						"%s may %s: body %s", c.name, rt.Perm, r.body)
				}
			}
		})
	}
}

func TestRouteWithoutPermissionIsRefused(t *testing.T) {
	t.Parallel()
	a := &API{}
	_, err := a.mux([]route{{Method: "GET", Path: "/v1/new", Handle: (*API).healthz}})
	require.ErrorContains(t, err, "GET /v1/new declares no permission")
}

func TestTokensAPI(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	b := setupOn(t, clk, nil, func(c *Config) { c.Open = false; c.UserToken = "static-admin-secret" })
	admin := b.as("static-admin-secret")

	for _, tt := range []struct {
		body   string
		fields []string
	}{
		{`{"role": "viewer"}`, []string{"name"}},
		{`{"name": "x", "role": "root"}`, []string{"role"}},
		{`{"name": "x", "role": "viewer", "namespaces": ["ok", "no/slash", "ok"]}`, []string{"namespaces[1]", "namespaces[2]"}},
		{`{"name": "x", "role": "admin", "namespaces": ["etl"]}`, []string{"namespaces"}},
		{`{"name": "x", "role": "viewer", "worker_id": "w1"}`, []string{"worker_id"}},
		{`{"name": "x", "role": "worker", "worker_id": "a b"}`, []string{"worker_id"}},
	} {
		r := admin.do(t, "POST", "/v1/tokens", tt.body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", tt.body, r.body)
		require.Equal(t, tt.fields, r.fields(t), tt.body)
	}
	list := func() []*apitype.Token {
		t.Helper()
		r := admin.do(t, "GET", "/v1/tokens", nil)
		require.Equal(t, http.StatusOK, r.status)
		var l apitype.TokenList
		r.decode(t, &l)
		return l.Items
	}
	require.Empty(t, list(), "nothing was created by the bad requests")

	r := admin.do(t, "POST", "/v1/tokens", `{"name": "ci", "role": "viewer", "namespaces": ["etl"]}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var created apitype.CreatedToken
	r.decode(t, &created)
	require.True(t, strings.HasPrefix(created.Secret, auth.SecretPrefix))
	require.Equal(t, "ci", created.Name)
	require.Equal(t, "viewer", created.Role)
	require.Equal(t, []string{"etl"}, created.Namespaces)
	require.Contains(t, string(r.body), `"token":"`+created.Secret+`"`)

	// Listed without its secret, and the store keeps only the hash.
	got := list()
	require.Len(t, got, 1)
	require.Equal(t, created.ID, got[0].ID)
	require.Nil(t, got[0].LastUsedAt)
	r = admin.do(t, "GET", "/v1/tokens", nil)
	require.NotContains(t, string(r.body), created.Secret)
	stored, err := b.store.FindToken(context.Background(), &store.FindTokenParams{Hash: auth.Hash(created.Secret)})
	require.NoError(t, err)
	require.Equal(t, created.ID, stored.ID)

	// Using it records the use, at most once a minute.
	ci := b.as(created.Secret)
	require.Equal(t, http.StatusOK, ci.do(t, "GET", "/v1/jobs", nil).status)
	first := clk.Now()
	require.Equal(t, first, *list()[0].LastUsedAt)
	clk.Advance(30 * time.Second)
	require.Equal(t, http.StatusOK, ci.do(t, "GET", "/v1/jobs", nil).status)
	require.Equal(t, first, *list()[0].LastUsedAt, "within the minute")
	clk.Advance(31 * time.Second)
	require.Equal(t, http.StatusOK, ci.do(t, "GET", "/v1/jobs", nil).status)
	require.Equal(t, clk.Now(), *list()[0].LastUsedAt)

	// Revoked: refused at once, listed with revoked_at; revoking again changes nothing.
	r = admin.do(t, "POST", "/v1/tokens/"+created.ID+"/revoke", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var rev apitype.Token
	r.decode(t, &rev)
	require.Equal(t, clk.Now(), *rev.RevokedAt)
	r = ci.do(t, "GET", "/v1/jobs", nil)
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Contains(t, r.problem(t).Detail, `"ci" was revoked`)
	clk.Advance(time.Hour)
	r = admin.do(t, "POST", "/v1/tokens/"+created.ID+"/revoke", nil)
	require.Equal(t, http.StatusOK, r.status)
	r.decode(t, &rev)
	require.Equal(t, clk.Now().Add(-time.Hour), *rev.RevokedAt)
	require.Equal(t, http.StatusNotFound, admin.do(t, "POST", "/v1/tokens/nope/revoke", nil).status)

	// A viewer token is not an admin.
	viewer := b.mint(t, "v", model.RoleViewer, nil, "")
	r = b.as(viewer).do(t, "POST", "/v1/tokens", `{"name": "x", "role": "admin"}`)
	require.Equal(t, http.StatusForbidden, r.status)
	require.Contains(t, r.problem(t).Detail, `the token "v" has the role viewer`)
}

// A scoped token sees and acts only in its namespaces: other namespaces' objects answer 404
// as if absent, lists leave them out, and a submission into one is 403.
func TestNamespaceScope(t *testing.T) {
	t.Parallel()
	b := secureSetup(t)
	admin := b.as("static-admin-secret")
	etl := b.as(b.mint(t, "etl-ops", model.RoleOperator, []string{"etl"}, ""))

	mine := admin.createJob(t, `{"name": "load", "namespace": "etl", "command": ["true"]}`)
	theirs := admin.createJob(t, `{"name": "load", "command": ["true"]}`)
	r := admin.do(t, "PUT", "/v1/pipelines/p?namespace=default", `{"steps": {"a": {"command": ["true"]}}}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)

	// Submissions.
	r = etl.do(t, "POST", "/v1/jobs", `{"command": ["true"]}`)
	require.Equal(t, http.StatusForbidden, r.status, "the default namespace is not the token's")
	require.Equal(t, []string{"namespace"}, r.fields(t))
	r = etl.do(t, "POST", "/v1/jobs", `{"namespace": "etl", "name": "once", "command": ["true"]}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	r = etl.do(t, "POST", "/v1/jobs/batch", `{"jobs": [{"namespace": "etl", "command": ["true"]}, {"command": ["true"]}]}`)
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, []string{"jobs[1].namespace"}, r.fields(t))
	for _, call := range []struct{ method, path, body string }{
		{"POST", "/v1/dags", `{"runs": {"a": {"command": ["true"]}}}`},
		{"PUT", "/v1/jobs/j", `{"command": ["true"]}`},
		{"PUT", "/v1/pipelines/q", `{"steps": {"a": {"command": ["true"]}}}`},
		{"POST", "/v1/plan", `{"command": ["true"]}`},
		{"PATCH", "/v1/queues/default", `{"paused": true}`},
		{"POST", "/v1/workers/w1/drain", ``},
	} {
		var body any
		if call.body != "" {
			body = call.body
		}
		r := etl.do(t, call.method, call.path, body)
		require.Equal(t, http.StatusForbidden, r.status, "%s %s: %s", call.method, call.path, r.body)
	}
	r = etl.do(t, "POST", "/v1/jobs", fmt.Sprintf(`{"namespace": "etl", "command": ["true"], "depends_on": [{"run": %q}]}`, theirs.Run.ID))
	require.Equal(t, http.StatusBadRequest, r.status, "another namespace's run is absent")
	require.Equal(t, []string{"depends_on[0].run"}, r.fields(t))

	// Reads and actions on another namespace's objects: 404, and nothing changes.
	for _, call := range []struct{ method, path string }{
		{"GET", "/v1/jobs/" + theirs.Job.ID},
		{"GET", "/v1/jobs/load"},
		{"POST", "/v1/jobs/" + theirs.Job.ID + "/trigger"},
		{"DELETE", "/v1/jobs/" + theirs.Job.ID},
		{"GET", "/v1/runs/" + theirs.Run.ID},
		{"GET", "/v1/runs/" + theirs.Run.ID + "/logs"},
		{"POST", "/v1/runs/" + theirs.Run.ID + "/cancel"},
		{"POST", "/v1/runs/" + theirs.Run.ID + "/retry"},
		{"GET", "/v1/runs?job=" + theirs.Job.ID},
		{"GET", "/v1/pipelines/p"},
		{"POST", "/v1/pipelines/p/trigger"},
	} {
		r := etl.do(t, call.method, call.path, nil)
		require.Equal(t, http.StatusNotFound, r.status, "%s %s: %s", call.method, call.path, r.body)
	}
	require.Equal(t, "queued", admin.getRun(t, theirs.Run.ID).Status, "the cancel changed nothing")
	r = etl.do(t, "GET", "/v1/jobs/load?namespace=etl", nil)
	require.Equal(t, http.StatusOK, r.status)
	r = etl.do(t, "GET", "/v1/runs/"+mine.Run.ID, nil)
	require.Equal(t, http.StatusOK, r.status)

	// Lists leave other namespaces out.
	var jl apitype.JobList
	etl.do(t, "GET", "/v1/jobs", nil).decode(t, &jl)
	require.Len(t, jl.Items, 2)
	for _, j := range jl.Items {
		require.Equal(t, "etl", j.Namespace)
	}
	etl.do(t, "GET", "/v1/jobs?namespace=default", nil).decode(t, &jl)
	require.Empty(t, jl.Items)
	var rl apitype.RunList
	etl.do(t, "GET", "/v1/runs", nil).decode(t, &rl)
	require.Len(t, rl.Items, 2)
	for _, run := range rl.Items {
		require.NotEqual(t, theirs.Run.ID, run.ID)
	}
	var pl apitype.PipelineList
	etl.do(t, "GET", "/v1/pipelines", nil).decode(t, &pl)
	require.Empty(t, pl.Items)
	admin.do(t, "GET", "/v1/pipelines", nil).decode(t, &pl)
	require.Len(t, pl.Items, 1)

	// Shared objects may be read.
	require.Equal(t, http.StatusOK, etl.do(t, "GET", "/v1/queues", nil).status)
	require.Equal(t, http.StatusOK, etl.do(t, "GET", "/v1/workers", nil).status)
}

// A worker token bound to w1 acts only as w1; registering an id a live session holds needs
// proof; log chunks and completions need the attempt's lease, and a bound worker's its own.
func TestWorkerIdentity(t *testing.T) {
	t.Parallel()
	b := secureSetup(t)
	admin := b.as("static-admin-secret")
	w1 := b.as(b.mint(t, "w1", model.RoleWorker, nil, "w1"))
	w2 := b.as(b.mint(t, "w2", model.RoleWorker, nil, "w2"))
	anyWorker := b.as("static-worker-secret")

	reg := func(c *testBundle, id string) *response {
		return c.do(t, "POST", "/v1/workers/register", apitype.RegisterRequest{ID: id, Capacity: apitype.Capacity{Slots: 2}, Commands: true})
	}
	r := reg(w1, "w2")
	require.Equal(t, http.StatusForbidden, r.status)
	require.Contains(t, r.problem(t).Detail, `may act only as worker "w1", not "w2"`)
	for _, path := range []string{"/v1/workers/w2/lease", "/v1/workers/w2/heartbeat"} {
		require.Equal(t, http.StatusForbidden, w1.do(t, "POST", path, `{"max": 0, "wait": "0s"}`).status, path)
	}
	require.Equal(t, http.StatusOK, reg(w1, "w1").status)
	require.Equal(t, http.StatusOK, reg(w2, "w2").status)

	// Another process with the id is refused while w1's session lives: an unbound worker
	// token acts as any worker but proves none.
	r = reg(anyWorker, "w1")
	require.Equal(t, http.StatusConflict, r.status)
	p := r.problem(t)
	require.Contains(t, p.Detail, `worker id "w1" is in use by a live session`)
	require.Equal(t, []string{"id"}, fieldNames(p.Errors))
	require.Equal(t, http.StatusForbidden, reg(w2, "w1").status)

	// Leases and their tokens.
	one := admin.createJob(t, `{"command": ["true"]}`)
	l1 := w1.lease(t, "w1", 1).Leases[0]
	require.Equal(t, one.Run.ID, l1.RunID)
	two := admin.createJob(t, `{"command": ["true"]}`)
	l2 := w2.lease(t, "w2", 1).Leases[0]
	require.Equal(t, two.Run.ID, l2.RunID)

	logs := func(c *testBundle, chunks ...apitype.LogChunk) *response {
		return c.do(t, "POST", "/v1/attempts/logs", apitype.LogChunksRequest{Chunks: chunks})
	}
	chunk := func(l apitype.Lease, seq int64, token, data string) apitype.LogChunk {
		return apitype.LogChunk{RunID: l.RunID, Attempt: l.Attempt, Token: token, Seq: seq, Stream: "stdout", Data: data}
	}
	r = logs(w1, chunk(l1, 1, l1.Token, "mine\n"), chunk(l1, 2, "forged", "forged\n"), chunk(l2, 1, l2.Token, "w2's, by w1\n"))
	require.Equal(t, http.StatusConflict, r.status, "body: %s", r.body)
	require.Equal(t, []string{"chunks[1].token", "chunks[2].token"}, r.fields(t))
	require.Contains(t, r.problem(t).Detail, "2 of 3 chunk(s) refused")
	out := admin.do(t, "GET", "/v1/runs/"+l1.RunID+"/logs", nil)
	require.Equal(t, "mine\n", string(out.body), "the holder's chunk was stored, the forged one not")
	out = admin.do(t, "GET", "/v1/runs/"+l2.RunID+"/logs", nil)
	require.Empty(t, out.body, "w1 wrote nothing into w2's attempt")
	require.Equal(t, http.StatusNoContent, logs(w2, chunk(l2, 1, l2.Token, "w2\n")).status)

	// A bound worker completes only its own runs, even with the right lease token.
	r = w1.do(t, "POST", "/v1/attempts/complete", apitype.CompleteRequest{Completions: []apitype.Completion{
		{RunID: l2.RunID, Token: l2.Token, Status: "succeeded"},
		{RunID: l1.RunID, Token: l1.Token, Status: "succeeded"},
	}})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var cr apitype.CompleteResponse
	r.decode(t, &cr)
	require.False(t, cr.Results[0].Accepted)
	require.Contains(t, cr.Results[0].Error, `not leased to worker "w1"`)
	require.True(t, cr.Results[1].Accepted)
	require.Equal(t, "running", admin.getRun(t, l2.RunID).Status)
	require.Equal(t, "succeeded", admin.getRun(t, l1.RunID).Status)

	// The token bound to w1 proves it is w1: a restarted w1 takes its id over at once.
	r = w2.do(t, "POST", "/v1/workers/w2/heartbeat", apitype.HeartbeatRequest{Held: []apitype.LeaseRef{{RunID: l2.RunID, Token: l2.Token}}})
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, http.StatusOK, reg(w1, "w1").status)
	require.Equal(t, http.StatusOK, reg(admin, "w2").status, "an admin may take any id over")
	run := admin.getRun(t, l2.RunID)
	require.Equal(t, 1, run.Attempt)
	require.Equal(t, "lost", run.Attempts[0].Status, "w2's session was replaced: its attempt is lost")
}

// certHeader names, in the tests' requests, the Common Name of the client certificate
// withClientCerts pretends the TLS handshake verified ("-": one without a Common Name).
const certHeader = "X-Test-Client-Cn"

// withClientCerts wraps the API so that a request naming a certificate in certHeader arrives
// as if over mutual TLS with that certificate of ca verified.
func withClientCerts(t *testing.T, ca *testcert.CA) func(http.Handler) http.Handler {
	var mu sync.Mutex
	certs := map[string]*x509.Certificate{}
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cn := r.Header.Get(certHeader); cn != "" {
				mu.Lock()
				if certs[cn] == nil {
					certs[cn] = ca.Client(t, strings.TrimPrefix(cn, "-")).Cert
				}
				cert := certs[cn]
				mu.Unlock()
				r.Header.Del(certHeader)
				r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert, ca.Cert}}}
			}
			h.ServeHTTP(w, r)
		})
	}
}

// TestClientCertificateWorker: a verified client certificate acts as a worker token bound to
// its Common Name: every worker route as that id, 403 as another id and on every other
// route that needs a token; it proves its id (a restart takes its session over). A
// certificate without a Common Name, or sent with a bearer token too, is a 401.
func TestClientCertificateWorker(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "workers")
	b := setupWrapped(t, withClientCerts(t, ca), func(c *Config) { c.Open = false; c.UserToken = "static-admin-secret" })
	as := func(cn, token, method, path string, body any) *response {
		h := http.Header{}
		if cn != "" {
			h.Set(certHeader, cn)
		}
		return b.as(token).doCtx(t, context.Background(), method, path, body, h)
	}

	for _, rt := range routeTable() {
		path, body := requestFor(rt)
		r := as("w1", "", rt.Method, path, body)
		switch rt.Perm {
		case auth.Open:
		case auth.Worker:
			require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, r.status,
				"%s %s as the certificate of w1: %s", rt.Method, path, r.body)
		default:
			require.Equal(t, http.StatusForbidden, r.status, "%s %s: %s", rt.Method, path, r.body)
			require.Contains(t, r.problem(t).Detail, `this route needs`)
			require.Contains(t, r.problem(t).Detail, `the client certificate "w1" has the role worker`)
		}
	}

	reg := func(cn, id string) *response {
		return as(cn, "", "POST", "/v1/workers/register", apitype.RegisterRequest{ID: id, Capacity: apitype.Capacity{Slots: 1}, Commands: true})
	}
	r := reg("w1", "w2")
	require.Equal(t, http.StatusForbidden, r.status)
	require.Contains(t, r.problem(t).Detail, `the client certificate "w1" may act only as worker "w1", not "w2"`)
	for _, path := range []string{"/v1/workers/w2/lease", "/v1/workers/w2/heartbeat"} {
		require.Equal(t, http.StatusForbidden, as("w1", "", "POST", path, `{"max": 0, "wait": "0s"}`).status, path)
	}

	admin := b.as("static-admin-secret")
	job := admin.createJob(t, `{"command": ["true"]}`)
	require.Equal(t, http.StatusOK, reg("w1", "w1").status)
	r = as("w1", "", "POST", "/v1/workers/w1/lease", `{"max": 1, "wait": "0s"}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var leases apitype.LeaseResponse
	r.decode(t, &leases)
	require.Len(t, leases.Leases, 1)
	require.Equal(t, job.Run.ID, leases.Leases[0].RunID)
	worker := admin.do(t, "GET", "/v1/workers/w1", nil)
	require.Equal(t, http.StatusOK, worker.status)

	// The certificate proves its id, as a bound token does: a restarted w1 takes over its
	// live session at once, and the attempt it held is lost.
	require.Equal(t, http.StatusOK, reg("w1", "w1").status)
	require.Equal(t, "lost", admin.getRun(t, job.Run.ID).Attempts[0].Status)

	r = reg("-", "w1")
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Contains(t, r.problem(t).Detail, "the client certificate has no Common Name")
	r = as("w1", "static-admin-secret", "GET", "/v1/jobs", nil)
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Contains(t, r.problem(t).Detail, "both a client certificate and a bearer token")
	require.Equal(t, http.StatusOK, admin.do(t, "GET", "/v1/jobs", nil).status, "without a certificate, tokens work as before")
}
