package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func TestCronJobLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	created := b.createJob(t, `{"name": "nightly", "command": ["true"], "schedule": {"cron": "0 2 * * *", "timezone": "Asia/Kolkata"}}`)
	require.Nil(t, created.Run, "a cron job gets its runs from the schedule")

	var j apitype.Job
	r := b.do(t, "GET", "/v1/jobs/nightly", nil)
	r.decode(t, &j)
	require.Len(t, j.NextFireTimes, 5)
	require.Len(t, j.NextFireTimesLocal, 5)
	for i, at := range j.NextFireTimes {
		local := j.NextFireTimesLocal[i]
		require.True(t, at.Equal(local))
		require.Equal(t, 20, at.Hour(), "02:00 IST is 20:30 UTC")
		require.Equal(t, 30, at.Minute())
		require.Equal(t, 2, local.Hour(), "the local form keeps the zone's offset")
		_, off := local.Zone()
		require.Equal(t, 5*3600+30*60, off)
		if i > 0 {
			require.Equal(t, 24*time.Hour, at.Sub(j.NextFireTimes[i-1]))
		}
	}

	// A new rule applies at once.
	r = b.do(t, "PATCH", "/v1/jobs/nightly", `{"schedule": {"cron": "*/10 * * * *"}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	r.decode(t, &j)
	require.Equal(t, 0, j.NextFireTimes[0].Minute()%10)
	require.Less(t, time.Until(j.NextFireTimes[0]), 10*time.Minute+time.Second)

	// Pause: no next fire; resume: fires again from now.
	r = b.do(t, "POST", "/v1/jobs/nightly/pause", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	j = apitype.Job{} // decode into a fresh value: omitted fields must read as empty
	r.decode(t, &j)
	require.True(t, j.Schedule.Paused)
	require.Empty(t, j.NextFireTimes)
	r = b.do(t, "POST", "/v1/jobs/nightly/resume", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	j = apitype.Job{}
	r.decode(t, &j)
	require.False(t, j.Schedule.Paused)
	require.Len(t, j.NextFireTimes, 5)

	// Disabled: no next fire either.
	r = b.do(t, "PATCH", "/v1/jobs/nightly", `{"enabled": false}`)
	j = apitype.Job{}
	r.decode(t, &j)
	require.Empty(t, j.NextFireTimes)
}

func TestWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createJob(t, `{"name": "deploy", "command": ["true"], "enabled": false}`)

	r := b.do(t, "POST", "/v1/jobs/deploy/webhook", nil)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var sec apitype.WebhookSecret
	r.decode(t, &sec)
	require.NotEmpty(t, sec.Secret)
	require.Equal(t, "/v1/hooks/deploy", sec.Path)

	body := []byte(`{"ref": "main", "sha": "abc"}`)
	hook := func(sig, key string, body []byte) *response {
		h := http.Header{}
		if sig != "" {
			h.Set(apitype.WebhookSignatureHeader, sig)
		}
		if key != "" {
			h.Set("Idempotency-Key", key)
		}
		return b.doCtx(t, t.Context(), "POST", sec.Path, body, h)
	}
	jobs0, runs0 := b.counts(t)
	require.Equal(t, http.StatusConflict, hook(apitype.WebhookSignature(sec.Secret, body), "", body).status, "a disabled job runs nothing")
	b.do(t, "PATCH", "/v1/jobs/deploy", `{"enabled": true}`)
	for _, bad := range []string{"", "sha256=00", apitype.WebhookSignature("wrong", body), apitype.WebhookSignature(sec.Secret, []byte(`{"ref": "evil"}`))} {
		r = hook(bad, "", body)
		require.Equal(t, http.StatusUnauthorized, r.status, "signature %q: %s", bad, r.body)
		r.problem(t)
	}
	jobs, runs := b.counts(t)
	require.Equal(t, [2]int{jobs0, runs0}, [2]int{jobs, runs}, "refused calls leave nothing behind")

	r = hook(apitype.WebhookSignature(sec.Secret, body), "delivery-1", body)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var rr apitype.RunResponse
	r.decode(t, &rr)
	require.Equal(t, "event", rr.Run.Trigger)
	require.JSONEq(t, string(body), string(rr.Run.Args), "the body is the run's args")
	r = hook(apitype.WebhookSignature(sec.Secret, body), "delivery-1", body)
	require.Equal(t, http.StatusOK, r.status, "a redelivery answers with the first run")

	// Rotation: the old secret stops working.
	r = b.do(t, "POST", "/v1/jobs/deploy/webhook", nil)
	var rotated apitype.WebhookSecret
	r.decode(t, &rotated)
	require.NotEqual(t, sec.Secret, rotated.Secret)
	require.Equal(t, http.StatusUnauthorized, hook(apitype.WebhookSignature(sec.Secret, body), "", body).status)
	require.Equal(t, http.StatusCreated, hook(apitype.WebhookSignature(rotated.Secret, nil), "", nil).status, "an empty body is a run without args")

	// Args over the limit are a 400 naming the body, once the signature holds.
	big := []byte(`{"x": "` + strings.Repeat("y", DefaultLimits().MaxArgsBytes) + `"}`)
	r = hook(apitype.WebhookSignature(rotated.Secret, big), "", big)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %.300s", r.body)
	require.Equal(t, []string{"body"}, r.fields(t))
}

// A webhook of a job or pipeline that does not exist answers exactly as a wrong signature
// for one that does: the webhook routes are open, and must not tell which names exist.
func TestWebhookUnknownNameLooksLikeBadSignature(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createJob(t, `{"name": "deploy", "command": ["true"], "enabled": false}`)
	r := b.do(t, "POST", "/v1/jobs/deploy/webhook", nil)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	r = b.do(t, "PUT", "/v1/pipelines/etl", `{"steps": {"a": {"command": ["true"]}}}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	r = b.do(t, "POST", "/v1/pipelines/etl/webhook", nil)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)

	jobs0, runs0 := b.counts(t)
	body := []byte(`{"ref": "main"}`)
	sig := http.Header{apitype.WebhookSignatureHeader: {apitype.WebhookSignature("guess", body)}}
	for _, pair := range [][2]string{
		{"/v1/hooks/deploy", "/v1/hooks/no-such-job"},
		{"/v1/hooks/pipelines/etl", "/v1/hooks/pipelines/no-such-pipeline"},
	} {
		known := b.doCtx(t, t.Context(), "POST", pair[0], body, sig)
		unknown := b.doCtx(t, t.Context(), "POST", pair[1], body, sig)
		require.Equal(t, http.StatusUnauthorized, known.status, "body: %s", known.body)
		require.Equal(t, known.status, unknown.status, "%s vs %s", pair[0], pair[1])
		require.Equal(t, string(known.body), string(unknown.body))
		require.Equal(t, known.header.Get("WWW-Authenticate"), unknown.header.Get("WWW-Authenticate"))
	}
	jobs, runs := b.counts(t)
	require.Equal(t, [2]int{jobs0, runs0}, [2]int{jobs, runs}, "nothing was created")
}

func TestBackfill(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createJob(t, `{"name": "hourly", "command": ["true"], "schedule": {"cron": "0 * * * *", "timezone": "Europe/Berlin"}}`)
	body := `{"from": "2026-03-29T00:00:00Z", "to": "2026-03-29T03:00:00Z", "dry_run": true}`
	r := b.do(t, "POST", "/v1/jobs/hourly/backfill", body)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var dry apitype.BackfillResponse
	r.decode(t, &dry)
	require.True(t, dry.DryRun)
	require.Equal(t, 0, dry.Created)
	// 01:00 CET .. 05:00 CEST: Berlin springs forward at 01:00 UTC, so 02:00 local does not
	// exist and 03:00 CEST is 01:00 UTC.
	require.Len(t, dry.Instants, 4)
	_, runs0 := b.counts(t)
	require.Zero(t, runs0, "a dry run creates nothing")

	r = b.do(t, "POST", "/v1/jobs/hourly/backfill", `{"from": "2026-03-29T00:00:00Z", "to": "2026-03-29T01:00:00Z"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var first apitype.BackfillResponse
	r.decode(t, &first)
	require.Equal(t, 2, first.Created)

	r = b.do(t, "POST", "/v1/jobs/hourly/backfill", `{"from": "2026-03-29T00:00:00Z", "to": "2026-03-29T03:00:00Z"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var second apitype.BackfillResponse
	r.decode(t, &second)
	require.Equal(t, 2, second.Created, "instants that have runs are left alone")
	require.True(t, second.Instants[0].Existed)
	require.True(t, second.Instants[1].Existed)
	require.False(t, second.Instants[2].Existed)
	_, runs := b.counts(t)
	require.Equal(t, 4, runs)

	r = b.do(t, "POST", "/v1/jobs/hourly/backfill", `{"from": "2026-03-29T00:00:00Z", "to": "2026-01-01T00:00:00Z"}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, []string{"to"}, r.fields(t))
	r = b.do(t, "POST", "/v1/jobs/hourly/backfill", `{"from": "2020-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}`)
	require.Equal(t, http.StatusBadRequest, r.status, "too many instants")
	require.Equal(t, []string{"to"}, r.fields(t))
}

func TestConcurrencyKeyIsSharedAcrossJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, name := range []string{"sync", "bill"} {
		b.createJob(t, `{"name": "`+name+`", "command": ["true"], "enabled": false,
			"concurrency": {"policy": "queue", "key": "customer-{{.customer_id}}"}}`)
	}
	trigger := func(job, args string) *apitype.Run {
		t.Helper()
		r := b.do(t, "POST", "/v1/jobs/"+job+"/trigger", `{"args": `+args+`}`)
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
		var rr apitype.RunResponse
		r.decode(t, &rr)
		return rr.Run
	}
	require.Equal(t, "queued", trigger("sync", `{"customer_id": 7}`).Status)
	held := trigger("bill", `{"customer_id": 7}`)
	require.Equal(t, "waiting", held.Status, "same customer: waits for the sync run")
	require.Equal(t, "concurrency_limit", held.PendingCode)
	require.Contains(t, held.PendingReason, "customer-7")
	require.Equal(t, "queued", trigger("bill", `{"customer_id": 8}`).Status, "another customer runs at once")

	r := b.do(t, "POST", "/v1/jobs/bill/trigger", `{"args": {"id": 8}}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, []string{"args"}, r.fields(t))
}

func TestApplyJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	apply := func(path, body string) (int, apitype.ApplyResponse) {
		t.Helper()
		r := b.do(t, "PUT", path, body)
		var out apitype.ApplyResponse
		if r.status < 300 {
			r.decode(t, &out)
		}
		return r.status, out
	}
	spec := `{"command": ["report"], "schedule": {"cron": "0 2 * * *", "timezone": "Europe/Berlin"}, "priority": 3}`
	status, out := apply("/v1/jobs/report?namespace=team", spec)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, "created", out.Action)
	require.Equal(t, "team", out.Job.Namespace)

	status, out = apply("/v1/jobs/on-demand", `{"shell": "echo"}`)
	require.Equal(t, http.StatusCreated, status)
	_, runs := b.counts(t)
	require.Zero(t, runs, "applied definitions run on their schedule or when triggered, not at once")

	status, out = apply("/v1/jobs/report?namespace=team", spec)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "unchanged", out.Action)
	require.Empty(t, out.Changes)

	changed := `{"command": ["report", "--full"], "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Berlin"}, "priority": 3}`
	status, out = apply("/v1/jobs/report?namespace=team&dry_run=true", changed)
	require.Equal(t, http.StatusOK, status)
	require.True(t, out.DryRun)
	require.Equal(t, []string{"command", "schedule"}, out.Changes)
	r := b.do(t, "GET", "/v1/jobs/report?namespace=team", nil)
	var j apitype.Job
	r.decode(t, &j)
	require.Equal(t, "0 2 * * *", j.Schedule.Cron, "a dry run changes nothing")

	_, out = apply("/v1/jobs/report?namespace=team", changed)
	require.Equal(t, "updated", out.Action)
	require.Equal(t, "0 3 * * *", out.Job.Schedule.Cron)
	require.Equal(t, 3, out.Job.NextFireTimesLocal[0].Hour(), "the new rule applies at once")

	status, _ = apply("/v1/jobs/report", `{"name": "other", "command": ["x"]}`)
	require.Equal(t, http.StatusBadRequest, status)
	status, _ = apply("/v1/jobs/report", `{"command": ["x"], "schedule": {"cron": "bad"}}`)
	require.Equal(t, http.StatusBadRequest, status)
}

func TestRateLimitedTriggers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createJob(t, `{"name": "mail", "command": ["true"], "enabled": false, "concurrency": {"rate": {"rate": 2, "per": "1h"}}}`)
	var statuses, codes []string
	for range 3 {
		r := b.do(t, "POST", "/v1/jobs/mail/trigger", nil)
		require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
		var rr apitype.RunResponse
		r.decode(t, &rr)
		statuses = append(statuses, rr.Run.Status)
		codes = append(codes, rr.Run.PendingCode)
	}
	require.Equal(t, []string{"queued", "queued", "waiting"}, statuses, "two an hour: the third waits for its turn")
	require.Equal(t, "rate_limited", codes[2])
}

// cronRunsOf lists a job's runs by the instant they are for.
func cronRunsOf(t *testing.T, b *testBundle, jobID string) map[time.Time]*model.Run {
	t.Helper()
	page, err := b.store.ListRuns(t.Context(), &store.ListRunsParams{JobID: jobID, Limit: 1000})
	require.NoError(t, err)
	out := make(map[time.Time]*model.Run, len(page.Runs))
	for _, r := range page.Runs {
		if r.Instant != nil {
			out[r.Instant.UTC()] = r
		}
	}
	return out
}

// TestBackfillAfterARetry: a cron run retried by hand is due again now, but it keeps the
// instant it was fired for, which the API shows; a backfill over the instant finds it and
// makes no second run. Runs of other triggers have no instant.
func TestBackfillAfterARetry(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 30, 0, time.UTC)
	clk := clock.NewFake(now)
	b := setupOn(t, clk, nil)
	b.createJob(t, `{"name": "minutely", "command": ["true"], "schedule": {"cron": "* * * * *"}}`)
	instant := time.Date(2030, 1, 1, 11, 59, 0, 0, time.UTC)
	backfill := func() apitype.BackfillResponse {
		t.Helper()
		r := b.do(t, "POST", "/v1/jobs/minutely/backfill", `{"from": "2030-01-01T11:59:00Z", "to": "2030-01-01T11:59:00Z"}`)
		require.Contains(t, []int{http.StatusOK, http.StatusCreated}, r.status, "body: %s", r.body)
		var out apitype.BackfillResponse
		r.decode(t, &out)
		require.Len(t, out.Instants, 1)
		return out
	}
	run := func(method, path string) *apitype.Run {
		t.Helper()
		r := b.do(t, method, path, nil)
		require.Contains(t, []int{http.StatusOK, http.StatusCreated}, r.status, "body: %s", r.body)
		var rr apitype.RunResponse
		r.decode(t, &rr)
		return rr.Run
	}

	first := backfill()
	require.Equal(t, 1, first.Created)
	id := first.Instants[0].RunID
	r := b.do(t, "GET", "/v1/runs/"+id, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	got := &apitype.Run{}
	r.decode(t, got)
	require.Equal(t, "cron", got.Trigger)
	require.Equal(t, instant, *got.Instant)
	require.Equal(t, instant, got.ScheduledFor)

	r = b.do(t, "POST", "/v1/jobs/minutely/trigger", nil)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.NotContains(t, string(r.body), `"instant"`, "a manual run has no instant")

	require.Equal(t, "cancelled", run("POST", "/v1/runs/"+id+"/cancel").Status)
	later := now.Add(15 * time.Second)
	clk.Set(later)
	got = run("POST", "/v1/runs/"+id+"/retry")
	require.Equal(t, "queued", got.Status)
	require.Equal(t, later, got.ScheduledFor, "a manual retry is due now")
	require.Equal(t, instant, *got.Instant, "and keeps its instant")

	again := backfill()
	require.Zero(t, again.Created, "the instant has its run")
	require.True(t, again.Instants[0].Existed)
	require.Len(t, cronRunsOf(t, b, got.JobID), 1)
}

// TestBackfillEveryKeepsTheJobsGrid: an @every job's instants are on the grid of its own
// fires (from its creation on), not on one anchored at the range's start, so instants that
// fired are not listed as missing and a backfill does not run them a second time.
func TestBackfillEveryKeepsTheJobsGrid(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	b := setupOn(t, clk, nil)
	created := b.createJob(t, `{"name": "tick", "command": ["true"], "schedule": {"cron": "@every 10s"}}`)
	for i := 1; i <= 3; i++ {
		clk.Set(start.Add(time.Duration(i) * 10 * time.Second))
		require.Eventually(t, func() bool { return len(cronRunsOf(t, b, created.Job.ID)) == i }, 10*time.Second, time.Millisecond, "fire %d", i)
	}

	body := `{"from": "2030-01-01T12:00:05Z", "to": "2030-01-01T12:00:30Z", "dry_run": true}`
	r := b.do(t, "POST", "/v1/jobs/tick/backfill", body)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var dry apitype.BackfillResponse
	r.decode(t, &dry)
	var listed []time.Time
	for _, in := range dry.Instants {
		listed = append(listed, in.At)
		require.True(t, in.Existed, "%s fired", in.At)
	}
	require.Equal(t, []time.Time{start.Add(10 * time.Second), start.Add(20 * time.Second), start.Add(30 * time.Second)}, listed)

	r = b.do(t, "POST", "/v1/jobs/tick/backfill", `{"from": "2030-01-01T12:00:05Z", "to": "2030-01-01T12:00:30Z"}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var done apitype.BackfillResponse
	r.decode(t, &done)
	require.Zero(t, done.Created)
	require.Len(t, cronRunsOf(t, b, created.Job.ID), 3, "no second run for a fired instant")
}

// TestBackfillStopsAtNow: a backfill reaching past now creates no run for a future
// instant (nor lists one); those instants fire on schedule, when they come.
func TestBackfillStopsAtNow(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 30, 0, time.UTC)
	clk := clock.NewFake(now)
	b := setupOn(t, clk, nil)
	created := b.createJob(t, `{"name": "minutely", "command": ["true"], "schedule": {"cron": "* * * * *"}}`)

	r := b.do(t, "POST", "/v1/jobs/minutely/backfill", `{"from": "2030-01-01T11:58:00Z", "to": "2030-01-01T12:03:00Z"}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	var out apitype.BackfillResponse
	r.decode(t, &out)
	runs := cronRunsOf(t, b, created.Job.ID)
	for at := range runs {
		require.False(t, at.After(now), "a run for the future instant %s", at)
	}
	require.Len(t, runs, 3)
	require.Equal(t, 3, out.Created)
	var listed []time.Time
	for _, in := range out.Instants {
		listed = append(listed, in.At)
	}
	past := []time.Time{now.Add(-150 * time.Second), now.Add(-90 * time.Second), now.Add(-30 * time.Second)} // 11:58, 11:59, 12:00
	require.Equal(t, past, listed, "instants after now are not listed")

	// 12:01 fires on schedule, from the cron loop.
	next := time.Date(2030, 1, 1, 12, 1, 0, 0, time.UTC)
	clk.Set(next)
	require.Eventually(t, func() bool { return cronRunsOf(t, b, created.Job.ID)[next] != nil }, 10*time.Second, time.Millisecond)
	require.Equal(t, next, cronRunsOf(t, b, created.Job.ID)[next].CreatedAt.UTC(), "made when its instant came")
}
