package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/auth"
	"github.com/stint-dev/stint/internal/store"
)

// auditOf reads the audit log through the API.
func (b *testBundle) auditOf(t *testing.T, query string) []*apitype.AuditEntry {
	t.Helper()
	r := b.do(t, "GET", "/v1/audit"+query, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var out apitype.AuditList
	r.decode(t, &out)
	return out.Entries
}

// awaitAudit waits until the audit log holds n entries (they are written just after the
// answers) and returns them.
func (b *testBundle) awaitAudit(t *testing.T, n int) []*apitype.AuditEntry {
	t.Helper()
	var entries []*apitype.AuditEntry
	require.Eventually(t, func() bool {
		entries = b.auditOf(t, "")
		return len(entries) >= n
	}, 10*time.Second, time.Millisecond, "%d audit entries", n)
	require.Len(t, entries, n)
	return entries
}

func TestAuditRecordsChanges(t *testing.T) {
	t.Parallel()
	b := setup(t, withKeys(testKeys(t)))
	r := b.do(t, "POST", "/v1/jobs", `{"name": "etl", "command": ["true"], "secret_env": {"PASSWORD": "hunter2"}}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var created apitype.CreateJobResponse
	r.decode(t, &created)
	jobID := created.Job.ID

	r = b.do(t, "PATCH", "/v1/jobs/etl", `{"timeout": "1m", "alerts": {"consecutive_failures": 5}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	// Refused and dry-run calls change nothing and record nothing.
	r = b.do(t, "PATCH", "/v1/jobs/etl", `{"timeout": "-1m"}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	r = b.do(t, "PUT", "/v1/jobs/etl?dry_run=true", `{"command": ["false"]}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = b.do(t, "PATCH", "/v1/queues/default", `{"paused": true, "alerts": {"max_backlog": 50}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r = b.do(t, "POST", "/v1/jobs/etl/webhook", nil)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var hook apitype.WebhookSecret
	r.decode(t, &hook)

	entries := b.awaitAudit(t, 4)
	actions := []string{}
	for _, e := range entries {
		actions = append(actions, e.Action+" "+e.Target)
		require.Equal(t, "dev", e.Actor, "authentication is off")
		require.NotContains(t, string(e.Before)+string(e.After), "hunter2", "secret values are masked")
		require.NotContains(t, string(e.After), hook.Secret)
	}
	require.Equal(t, []string{"job.webhook_rotate job:" + jobID, "queue.update queue:default",
		"job.update job:" + jobID, "job.create job:" + jobID}, actions, "newest first; targets by id")

	create := entries[3]
	require.Nil(t, create.Before)
	require.Contains(t, string(create.After), `"PASSWORD":"`+apitype.SecretMask+`"`)
	update := entries[2]
	var before, after apitype.Job
	require.NoError(t, json.Unmarshal(update.Before, &before))
	require.NoError(t, json.Unmarshal(update.After, &after))
	require.Nil(t, before.Timeout)
	require.Equal(t, time.Minute, after.Timeout.Std())
	require.Equal(t, 5, after.Alerts.ConsecutiveFailures)
	var qBefore, qAfter apitype.Queue
	require.NoError(t, json.Unmarshal(entries[1].Before, &qBefore))
	require.NoError(t, json.Unmarshal(entries[1].After, &qAfter))
	require.False(t, qBefore.Paused)
	require.True(t, qAfter.Paused)
	require.Equal(t, 50, qAfter.Alerts.MaxBacklog)
	require.Contains(t, string(entries[0].After), hook.Path)

	// Filters and paging.
	require.Len(t, b.auditOf(t, "?target=job:"+jobID), 3)
	require.Len(t, b.auditOf(t, "?actor=someone"), 0)
	page := b.auditOf(t, "?limit=1&before="+entries[0].ID)
	require.Len(t, page, 1)
	require.Equal(t, entries[1].ID, page[0].ID)
	r = b.do(t, "GET", "/v1/audit?limit=0", nil)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, []string{"limit"}, r.fields(t))
}

func TestAuditNamesTheActor(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.Open = false; c.UserToken = "static-admin-secret" })
	b.token = "static-admin-secret"
	r := b.do(t, "POST", "/v1/tokens", `{"name": "ci", "role": "operator"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var tk apitype.CreatedToken
	r.decode(t, &tk)
	b.token = tk.Secret
	r = b.do(t, "POST", "/v1/jobs", `{"name": "a", "command": ["true"]}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)

	b.token = "static-admin-secret"
	entries := b.awaitAudit(t, 2)
	require.Equal(t, "ci ("+tk.Token.ID+")", entries[0].Actor)
	require.Equal(t, "operator", entries[0].Role)
	require.Equal(t, "job.create", entries[0].Action)
	require.Equal(t, staticAdminName, entries[1].Actor)
	require.Equal(t, "token.create", entries[1].Action)
	require.Equal(t, "token:"+tk.Token.ID, entries[1].Target)
	require.NotContains(t, string(entries[1].After), tk.Secret, "the token's secret is never recorded")
	require.Contains(t, string(entries[1].After), `"name":"ci"`)
}

// TestEveryChangeIsAudited: every route that changes something, but the worker protocol,
// records an action.
func TestEveryChangeIsAudited(t *testing.T) {
	t.Parallel()
	for _, rt := range routeTable() {
		changes := rt.Method != "GET" && rt.Perm != auth.Worker && rt.Path != "/v1/plan"
		require.Equal(t, changes, rt.Audit != "", "%s %s", rt.Method, rt.Path)
	}
}

func TestJobAndQueueAlertsValidated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, "POST", "/v1/jobs", `{"name": "a", "command": ["true"],
		"alerts": {"consecutive_failures": -1, "late_after": "-1s", "max_duration": "30s"}}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, []string{"alerts.consecutive_failures", "alerts.late_after", "alerts.max_duration"}, r.fields(t))
	r = b.do(t, "PATCH", "/v1/queues/default", `{"alerts": {"max_backlog": -1}}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, []string{"alerts.max_backlog"}, r.fields(t))

	r = b.do(t, "POST", "/v1/jobs", `{"name": "a", "command": ["true"], "alerts": {"off": true, "late_after": "2m", "max_duration": "1h"}}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var created apitype.CreateJobResponse
	r.decode(t, &created)
	require.True(t, created.Job.Alerts.Off)
	require.Equal(t, 2*time.Minute, created.Job.Alerts.LateAfter.Std())
	require.Equal(t, time.Hour, created.Job.Alerts.MaxDuration.Std())
	// Entries are written in order: the refused calls before it recorded nothing.
	require.Equal(t, "job.create", b.awaitAudit(t, 1)[0].Action)
	// {} returns to the server's defaults.
	r = b.do(t, "PATCH", "/v1/jobs/a", `{"alerts": {}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.NotContains(t, string(r.body), `"alerts"`)
}

func TestAlertsList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t0 := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	resolved := t0.Add(time.Minute)
	old := alerting.Alert{ID: "01A", Rule: alerting.RuleWorkerLost, Subject: "worker:w", State: alerting.Firing,
		Summary: "worker w lost", Link: "/ui/workers", StartedAt: t0}
	cur := alerting.Alert{ID: "01B", Rule: alerting.RuleJobFailing, Subject: "job:j", State: alerting.Firing,
		Summary: "job j failed 3 times in a row", Link: "/ui/jobs/j", StartedAt: t0}
	require.NoError(t, b.store.ApplyAlerts(t.Context(), &store.ApplyAlertsParams{Fire: []alerting.Alert{old, cur}}))
	old.State, old.ResolvedAt = alerting.Resolved, &resolved
	require.NoError(t, b.store.ApplyAlerts(t.Context(), &store.ApplyAlertsParams{Resolve: []alerting.Alert{old}}))

	r := b.do(t, "GET", "/v1/alerts", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"alerts": [
		{"id": "01B", "rule": "job_failing", "state": "firing", "subject": "job:j", "summary": "job j failed 3 times in a row",
		 "link": "/ui/jobs/j", "started_at": "2030-01-02T12:00:00Z"},
		{"id": "01A", "rule": "worker_lost", "state": "resolved", "subject": "worker:w", "summary": "worker w lost",
		 "link": "/ui/workers", "started_at": "2030-01-02T12:00:00Z", "resolved_at": "2030-01-02T12:01:00Z"}]}`, string(r.body))
	r = b.do(t, "GET", "/v1/alerts?state=resolved", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.True(t, strings.Contains(string(r.body), `"01A"`) && !strings.Contains(string(r.body), `"01B"`))
	r = b.do(t, "GET", "/v1/alerts?state=bogus", nil)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, []string{"state"}, r.fields(t))
}
