package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// TestSchedulesJourney applies the example job file to a real `stint dev` and drives the
// schedule commands of the README with the real binary: apply (twice), jobs get, a cron
// tick that runs, pause and resume, trigger with args, backfill (dry, then for real), and a signed
// webhook call as an outside system would make it.
func TestSchedulesJourney(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "dev", "--data", t.TempDir())
	c := srv.client(t)
	ctx := context.Background()

	out, errOut, code := cli(t, srv, "apply", "-f", "../examples/schedules/jobs.yaml")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Equal(t, "job/heartbeat created\njob/nightly-report created\njob/sync-customer created\n", out)
	out, _, code = cli(t, srv, "apply", "-f", "../examples/schedules/jobs.yaml")
	require.Equal(t, 0, code)
	require.Equal(t, "job/heartbeat unchanged\njob/nightly-report unchanged\njob/sync-customer unchanged\n", out)

	ids := map[string]string{}
	page, err := c.ListJobs(ctx, client.ListJobsOptions{Namespace: "examples"})
	require.NoError(t, err)
	for _, j := range page.Items {
		ids[j.Name] = j.ID
	}
	js, _, code := cli(t, srv, "--namespace", "examples", "jobs", "get", "nightly-report", "--json")
	require.Equal(t, 0, code)
	var report apitype.Job
	require.NoError(t, json.Unmarshal([]byte(js), &report))
	require.Len(t, report.NextFireTimesLocal, 5)
	for _, at := range report.NextFireTimesLocal {
		require.Equal(t, [2]int{2, 30}, [2]int{at.Hour(), at.Minute()}, "02:30 Berlin time (03:00 only on a spring-forward night)")
	}

	// The heartbeat fires every ten seconds and its run succeeds.
	var tick *apitype.Run
	waitFor(t, 30*time.Second, "a heartbeat tick", func() bool {
		runs, err := c.ListRuns(ctx, client.ListRunsOptions{Job: ids["heartbeat"]})
		require.NoError(t, err)
		if len(runs.Items) > 0 {
			tick = runs.Items[0]
		}
		return tick != nil
	})
	require.Equal(t, "cron", tick.Trigger)
	require.Zero(t, instantOf(t, tick).Second()%10)
	require.Equal(t, "succeeded", waitRun(t, c, tick.ID, 30*time.Second).Status)

	_, _, code = cli(t, srv, "--namespace", "examples", "jobs", "pause", "heartbeat")
	require.Equal(t, 0, code)
	j, err := c.GetJob(ctx, ids["heartbeat"])
	require.NoError(t, err)
	require.True(t, j.Schedule.Paused)
	require.Empty(t, j.NextFireTimes)
	out, _, code = cli(t, srv, "jobs", "resume", ids["heartbeat"])
	require.Equal(t, 0, code)
	require.Contains(t, out, "resumed; next fire")

	// On demand: a trigger with args, then the webhook.
	out, errOut, code = cli(t, srv, "trigger", ids["sync-customer"], "--arg", "customer_id=7")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	run := waitRun(t, c, runIDFrom(t, out), 30*time.Second)
	require.Equal(t, "succeeded", run.Status)
	require.JSONEq(t, `{"customer_id": "7"}`, string(run.Args))

	out, _, code = cli(t, srv, "jobs", "webhook", ids["sync-customer"], "--json")
	require.Equal(t, 0, code)
	var secret apitype.WebhookSecret
	require.NoError(t, json.Unmarshal([]byte(out), &secret))
	_, err = c.SendWebhook(ctx, secret.Path, "wrong", []byte(`{"customer_id": "8"}`), "")
	var p *apitype.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, 401, p.Status)
	hooked, err := c.SendWebhook(ctx, secret.Path, secret.Secret, []byte(`{"customer_id": "8"}`), "delivery-1")
	require.NoError(t, err)
	require.Equal(t, "event", hooked.Trigger)
	require.Equal(t, "succeeded", waitRun(t, c, hooked.ID, 30*time.Second).Status)

	// Backfill, dry: the report's instants of a past week that have no run.
	out, errOut, code = cli(t, srv, "backfill", ids["nightly-report"], "--from", "2026-03-23T00:00:00Z", "--to", "2026-03-29T23:59:59Z")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, "dry run: 5 of 5 instants have no run")

	// With --yes: the five runs; again, none more (each instant has its run).
	out, errOut, code = cli(t, srv, "backfill", ids["nightly-report"], "--from", "2026-03-23T00:00:00Z", "--to", "2026-03-29T23:59:59Z", "--yes")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, "created 5 runs")
	require.Equal(t, 5, strings.Count(out, " created "), out)
	require.NotContains(t, errOut, "backfill ", "no bar: stderr is no terminal")
	out, errOut, code = cli(t, srv, "backfill", ids["nightly-report"], "--from", "2026-03-23T00:00:00Z", "--to", "2026-03-29T23:59:59Z", "--yes")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, "created 0 runs")
	require.Equal(t, 5, strings.Count(out, "has a run"), out)
}
