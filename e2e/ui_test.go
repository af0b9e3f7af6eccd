package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// The web UI's tests drive it in headless Chromium against the real binary. They skip,
// saying so, where no Chromium is installed, unless STINT_UI_TESTS=required (CI sets it:
// there a missing browser fails the suite).

// uiWait bounds every wait of the UI tests: pages poll the API every two seconds.
const uiWait = 45 * time.Second

// chromium finds the browser, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("STINT_UI_TESTS") == "required" {
		t.Fatal("STINT_UI_TESTS=required but no chromium on PATH (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH: skipping the web UI's browser tests (apt-get install chromium to run them)")
	return ""
}

// browser starts a headless Chromium with a profile of its own for one test and returns its
// tab's context. JavaScript exceptions and console errors of the pages fail the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	// The profile is removed once Chromium's processes have left it: its helpers (renderer,
	// crash handler) outlive the browser process that chromedp waits for, and on a loaded
	// machine still write there for a while, so that t.TempDir's one RemoveAll would fail.
	profile, err := os.MkdirTemp("", "stint-e2e-chromium-")
	require.NoError(t, err)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1360, 900),
		chromedp.WSURLReadTimeout(uiWait), // the default 20 s is short for a start on a busy machine
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		waitFor(t, uiWait, "chromium's processes to leave its profile", func() bool { return os.RemoveAll(profile) == nil })
	})
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			t.Errorf("javascript exception: %s", ev.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value))
				}
				t.Errorf("console error: %s", strings.Join(args, " "))
			}
		}
	})
	require.NoError(t, chromedp.Run(ctx), "start chromium")
	return ctx
}

// do runs browser actions, each wait bounded by uiWait.
func do(t *testing.T, ctx context.Context, actions ...chromedp.Action) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, uiWait)
	defer cancel()
	require.NoError(t, chromedp.Run(c, actions...))
}

// until waits for a JavaScript expression to be true on the page. It asks again every 50ms
// (a page of a real browser: there is nothing to subscribe to), and an evaluation that
// fails while the page is being replaced counts as false.
func until(expr string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		var lastErr error
		for {
			var ok bool
			if lastErr = chromedp.Evaluate("!!("+expr+")", &ok).Do(ctx); lastErr == nil && ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s (last error: %v): %w", expr, lastErr, ctx.Err())
			case <-tick.C:
			}
		}
	})
}

// textHas is an expression: the text of the first element matching sel contains s.
func textHas(sel, s string) string {
	return fmt.Sprintf(`(document.querySelector(%q)?.textContent || '').includes(%q)`, sel, s)
}

func submit(t *testing.T, c *client.Client, spec *apitype.JobSpec) *apitype.Run {
	t.Helper()
	resp, _, err := c.CreateJob(context.Background(), spec)
	require.NoError(t, err)
	return resp.Run
}

// TestUIRunsLogsAndButtons drives the UI of a stint dev: a run submitted through the API
// appears on /ui/runs, its page streams its log while it runs, and its cancel and retry
// buttons act; a failed run is retried from the dead-letter view; a queue is paused; a
// pipeline's and a DAG's graphs show their steps' states; a run's address opens directly.
func TestUIRunsLogsAndButtons(t *testing.T) {
	ctx := browser(t)
	srv := startServer(t, "dev", "--data", t.TempDir())
	c := srv.client(t)
	base := srv.url()
	bg := context.Background()

	// A run that writes a line every 200ms for a while, then waits to be cancelled.
	run := submit(t, c, &apitype.JobSpec{Name: "ticker", Shell: `i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo tick-$i; sleep 0.2; done; sleep 300`})
	do(t, ctx, chromedp.Navigate(base+"/ui/runs"), chromedp.WaitVisible(`tr[data-run="`+run.ID+`"]`))
	do(t, ctx, chromedp.Click(`tr[data-run="`+run.ID+`"] a[href="/ui/runs/`+run.ID+`"]`), until(textHas("h1", run.ID)))

	// The log streams: lines keep arriving while the run is running.
	do(t, ctx, until(textHas("#logs", "tick-3")))
	var first string
	do(t, ctx, chromedp.Text("#logs", &first))
	do(t, ctx, until(fmt.Sprintf(`document.querySelector('#logs').textContent.length > %d && %s`, len(first)+20, textHas("#logs", "tick-10"))))
	cur, err := c.GetRun(bg, run.ID)
	require.NoError(t, err)
	require.Equal(t, "running", cur.Status, "the lines arrived while the run ran")
	do(t, ctx, until(`document.querySelector('#logs').dataset.streaming === 'true'`))

	// Cancel by the button; then retry it by the button.
	do(t, ctx, chromedp.Click(`button[data-act="cancelRun"]`))
	require.Equal(t, "cancelled", waitRun(t, c, run.ID, uiWait).Status)
	do(t, ctx, until(textHas("h1", "cancelled")), chromedp.Click(`button[data-act="retryRun"]`))
	waitFor(t, uiWait, "the retried run's second attempt", func() bool {
		r, err := c.GetRun(bg, run.ID)
		return err == nil && r.Attempt == 2 && r.Status == "running"
	})
	do(t, ctx, until(textHas("#log-state", "attempt 2")))
	_, err = c.CancelRun(bg, run.ID)
	require.NoError(t, err)

	// The dead-letter view retries a failed run.
	failed := submit(t, c, &apitype.JobSpec{Name: "broken", Shell: "echo boom >&2; exit 3", Retry: &apitype.RetryPolicy{MaxAttempts: 1}})
	require.Equal(t, "failed", waitRun(t, c, failed.ID, uiWait).Status)
	row := `tr[data-run="` + failed.ID + `"]`
	do(t, ctx, chromedp.Navigate(base+"/ui/dead"), chromedp.WaitVisible(row), until(textHas(row, "exit")))
	do(t, ctx, chromedp.Click(row+` button[data-act="retryRun"]`))
	waitFor(t, uiWait, "the failed run's retry", func() bool {
		r, err := c.GetRun(bg, failed.ID)
		return err == nil && len(r.Attempts) == 2
	})

	// Pause a queue.
	submit(t, c, &apitype.JobSpec{Name: "batch-job", Shell: "true", Queue: "batch"})
	qrow := `tr[data-queue="batch"]`
	do(t, ctx, chromedp.Navigate(base+"/ui/queues"), chromedp.WaitVisible(qrow+` button[data-act="pauseQueue"]`))
	do(t, ctx, chromedp.Click(qrow+` button[data-act="pauseQueue"]`), chromedp.WaitVisible(qrow+` button[data-act="resumeQueue"]`))
	q, err := c.GetQueue(bg, "batch")
	require.NoError(t, err)
	require.True(t, q.Paused)

	// A pipeline's graph shows each step's state, live.
	_, err = c.PutPipeline(bg, "etl", &apitype.PipelineSpec{Steps: map[string]apitype.JobSpec{
		"extract": {Shell: "echo extracting"},
		"load":    {Shell: "exit 1", DependsOn: []apitype.Dependency{{Ref: "extract"}}, Retry: &apitype.RetryPolicy{MaxAttempts: 1}},
		"notify":  {Shell: "true", DependsOn: []apitype.Dependency{{Ref: "load", Condition: "failed"}}},
	}})
	require.NoError(t, err)
	pr, err := c.TriggerPipeline(bg, "etl", nil)
	require.NoError(t, err)
	do(t, ctx, chromedp.Navigate(base+"/ui/pipelines/etl"),
		until(`!!document.querySelector('[data-node="extract"][data-state="succeeded"]')`),
		until(`!!document.querySelector('[data-node="load"][data-state="failed"]')`),
		until(`!!document.querySelector('[data-node="notify"][data-state="succeeded"]')`),
		until(textHas("main", pr.ID[len(pr.ID)-8:])))

	// A DAG's graph, at its stable address.
	dag, err := c.SubmitDAG(bg, &apitype.DAGRequest{Runs: map[string]apitype.JobSpec{
		"a": {Shell: "true"},
		"b": {Shell: "true", DependsOn: []apitype.Dependency{{Ref: "a"}}},
	}})
	require.NoError(t, err)
	do(t, ctx, chromedp.Navigate(base+"/ui/dags/"+dag.Runs["a"]),
		until(`!!document.querySelector('[data-node="a"][data-state="succeeded"]')`),
		until(`!!document.querySelector('[data-node="b"][data-state="succeeded"]')`),
		until(textHas("h1", "succeeded")))

	// A link straight to a run opens its page; the overview says no alert is firing.
	do(t, ctx, chromedp.Navigate(base+"/ui/runs/"+failed.ID), until(textHas("h1", failed.ID)), until(textHas("#logs", "boom")))
	do(t, ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(`[data-alerts="none"]`), chromedp.WaitVisible(`[data-stat="oldest-queued"]`))
}

// TestUIAlertsAndAudit: a job whose last three runs failed fires job_failing; the
// overview's Active alerts panel lists it, and its link (a path on this server, though the
// server has a public --alert-link-base) opens the job's page. /ui/audit shows the job's
// creation and a queue's pause, both made through the API.
func TestUIAlertsAndAudit(t *testing.T) {
	ctx := browser(t)
	srv := startServer(t, "dev", "--data", t.TempDir(), "--alert-interval", "200ms",
		"--alert-link-base", "https://stint.example.com")
	c := srv.client(t)
	base := srv.url()
	bg := context.Background()

	created, _, err := c.CreateJob(bg, &apitype.JobSpec{Name: "always-fails", Shell: "exit 1", Retry: &apitype.RetryPolicy{MaxAttempts: 1}})
	require.NoError(t, err)
	job := created.Job.ID
	require.Equal(t, "failed", waitRun(t, c, created.Run.ID, uiWait).Status)
	for range 2 {
		r, err := c.TriggerJob(bg, job, nil)
		require.NoError(t, err)
		require.Equal(t, "failed", waitRun(t, c, r.ID, uiWait).Status)
	}
	var alert *apitype.Alert
	waitFor(t, uiWait, "job_failing to fire", func() bool {
		l, err := c.ListAlerts(bg, client.ListAlertsOptions{State: "firing"})
		if err != nil || len(l.Alerts) == 0 {
			return false
		}
		alert = l.Alerts[0]
		return true
	})
	require.Equal(t, "job_failing", alert.Rule)
	require.Equal(t, "/ui/jobs/"+job, alert.Link)

	li := `li[data-alert="` + alert.ID + `"]`
	do(t, ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(li), until(textHas(li, "job_failing")),
		until(textHas(li, alert.Summary)))
	do(t, ctx, chromedp.Click(li+` a[href="/ui/jobs/`+job+`"]`), until(`location.pathname === '/ui/jobs/`+job+`'`),
		until(textHas("h1", "always-fails")))

	_, err = c.UpdateQueue(bg, "default", &apitype.QueuePatch{Paused: ptr(true)})
	require.NoError(t, err)
	byAction := map[string]*apitype.AuditEntry{}
	waitFor(t, uiWait, "the job's creation and the queue's pause in the audit log", func() bool { // written asynchronously
		audit, err := c.ListAudit(bg, client.ListAuditOptions{})
		if err != nil {
			return false
		}
		for _, e := range audit.Entries {
			byAction[e.Action] = e
		}
		return byAction["job.create"] != nil && byAction["queue.update"] != nil
	})
	do(t, ctx, chromedp.Navigate(base+"/ui/audit"))
	for _, action := range []string{"job.create", "queue.update"} {
		row := `tr[data-audit="` + byAction[action].ID + `"]`
		do(t, ctx, chromedp.WaitVisible(row), until(textHas(row, action)), until(textHas(row, byAction[action].Target)))
	}
	do(t, ctx, chromedp.Click(`tr[data-audit="`+byAction["job.create"].ID+`"] a[href="/ui/jobs/`+job+`"]`),
		until(textHas("h1", "always-fails")))
}

// TestUILoginAndRoles: a server that needs a token shows the login page first; a viewer's
// token shows the data without the buttons, an operator's shows them.
func TestUILoginAndRoles(t *testing.T) {
	ctx := browser(t)
	srv := startServer(t, "server", "--data", t.TempDir())
	c := srv.client(t)
	bg := context.Background()
	token := func(role string) string {
		ct, err := c.CreateToken(bg, &apitype.CreateTokenRequest{Name: "ui-" + role, Role: role})
		require.NoError(t, err)
		return ct.Secret
	}
	viewer, operator := token("viewer"), token("operator")
	run := submit(t, c, &apitype.JobSpec{Name: "waits", Shell: "true"}) // no worker: it stays queued

	login := func(secret string) {
		t.Helper()
		do(t, ctx, chromedp.WaitVisible(`input[name="token"]`), chromedp.SetValue(`input[name="token"]`, secret),
			chromedp.Click(`form[data-form="login"] button`))
	}
	page := srv.url() + "/ui/runs/" + run.ID
	do(t, ctx, chromedp.Navigate(page), until(`location.pathname === '/ui/login'`))
	login("stint_not-a-token")
	do(t, ctx, until(textHas(".form-error", "does not accept")))

	login(viewer)
	do(t, ctx, until(`location.pathname === '/ui/runs/`+run.ID+`'`), until(textHas("h1", "queued")),
		until(textHas("#who", "viewer")))
	var buttons int
	do(t, ctx, chromedp.Evaluate(`document.querySelectorAll('button[data-act]:not([data-act="logout"])').length`, &buttons))
	require.Zero(t, buttons, "a viewer sees no buttons")
	do(t, ctx, chromedp.Navigate(srv.url()+"/ui/queues"), chromedp.WaitVisible(`tr[data-queue="default"]`))
	do(t, ctx, chromedp.Evaluate(`document.querySelectorAll('button[data-act]:not([data-act="logout"])').length`, &buttons))
	require.Zero(t, buttons, "a viewer sees no buttons")

	do(t, ctx, chromedp.Click(`button[data-act="logout"]`), until(`location.pathname === '/ui/login'`))
	do(t, ctx, chromedp.Navigate(page), until(`location.pathname === '/ui/login'`))
	login(operator)
	do(t, ctx, until(`location.pathname === '/ui/runs/`+run.ID+`'`), chromedp.WaitVisible(`button[data-act="cancelRun"]`))
	do(t, ctx, chromedp.Click(`button[data-act="cancelRun"]`))
	require.Equal(t, "cancelled", waitRun(t, c, run.ID, uiWait).Status)
}

// TestUIScreenshots writes a PNG of each page into the directory STINT_UI_SCREENSHOTS
// names (docs/ui in the repository: STINT_UI_SCREENSHOTS=$PWD/docs/ui go test ./e2e -run
// Screenshots), taken from a stint dev with some data; it skips without the variable.
func TestUIScreenshots(t *testing.T) {
	dir := os.Getenv("STINT_UI_SCREENSHOTS")
	if dir == "" {
		t.Skip("STINT_UI_SCREENSHOTS not set: not taking screenshots")
	}
	ctx := browser(t)
	srv := startServer(t, "dev", "--data", t.TempDir())
	c := srv.client(t)
	base := srv.url()
	bg := context.Background()

	nightly, _, err := c.CreateJob(bg, &apitype.JobSpec{Name: "nightly-report", Shell: "echo report",
		Schedule: &apitype.Schedule{Cron: "0 2 * * *", Timezone: "Europe/Berlin"}})
	require.NoError(t, err)
	for range 3 {
		_, err := c.TriggerJob(bg, nightly.Job.ID, nil)
		require.NoError(t, err)
	}
	for i := range 24 {
		shell := fmt.Sprintf("echo batch %d; sleep 0.%d", i, i%5)
		if i%6 == 5 {
			shell = "echo 'connection refused' >&2; exit 2"
		}
		submit(t, c, &apitype.JobSpec{Name: fmt.Sprintf("sync-%02d", i), Shell: shell, Queue: []string{"default", "batch", "ml"}[i%3], Retry: &apitype.RetryPolicy{MaxAttempts: 1}})
	}
	long := submit(t, c, &apitype.JobSpec{Name: "train-model", Queue: "ml",
		Shell: `for e in 1 2 3 4 5 6 7 8; do echo "epoch $e: loss=0.$((90-e*9))"; sleep 0.1; done; sleep 300`})
	_, err = c.PutPipeline(bg, "etl", &apitype.PipelineSpec{Steps: map[string]apitype.JobSpec{
		"extract":   {Shell: "echo extract"},
		"transform": {Shell: "sleep 1", DependsOn: []apitype.Dependency{{Ref: "extract"}}},
		"load":      {Shell: "sleep 300", DependsOn: []apitype.Dependency{{Ref: "transform"}}},
		"report":    {Shell: "true", DependsOn: []apitype.Dependency{{Ref: "load"}}},
		"alert":     {Shell: "true", DependsOn: []apitype.Dependency{{Ref: "load", Condition: "failed"}}},
	}})
	require.NoError(t, err)
	_, err = c.TriggerPipeline(bg, "etl", nil)
	require.NoError(t, err)
	dag, err := c.SubmitDAG(bg, &apitype.DAGRequest{Runs: map[string]apitype.JobSpec{
		"fetch":   {Shell: "true"},
		"resize":  {Shell: "true", DependsOn: []apitype.Dependency{{Ref: "fetch"}}},
		"thumbs":  {Shell: "exit 1", Retry: &apitype.RetryPolicy{MaxAttempts: 1}, DependsOn: []apitype.Dependency{{Ref: "fetch"}}},
		"publish": {Shell: "true", DependsOn: []apitype.Dependency{{Ref: "resize"}, {Ref: "thumbs"}}},
	}})
	require.NoError(t, err)
	_, err = c.UpdateQueue(bg, "batch", &apitype.QueuePatch{Paused: ptr(true)})
	require.NoError(t, err)
	waitFor(t, uiWait, "the sample runs to settle", func() bool {
		l, err := c.ListRuns(bg, client.ListRunsOptions{Status: "running", Limit: 100})
		return err == nil && len(l.Items) == 2 // train-model and the pipeline's load
	})
	failed, err := c.ListRuns(bg, client.ListRunsOptions{Status: "failed", Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, failed.Items)

	require.NoError(t, os.MkdirAll(dir, 0o755))
	shot := func(name, path, ready string) {
		t.Helper()
		var png []byte
		do(t, ctx, chromedp.Navigate(base+path), until(`document.getElementById('live')?.dataset.loaded === 'true'`), until(ready),
			chromedp.Sleep(300*time.Millisecond), // let the page finish drawing (a screenshot, not a test of behaviour)
			chromedp.FullScreenshot(&png, 100))   // 100: PNG
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
	}
	shot("overview", "/ui/", "true")
	shot("jobs", "/ui/jobs", "true")
	shot("job", "/ui/jobs/"+nightly.Job.ID, "true")
	shot("runs", "/ui/runs", "true")
	shot("run", "/ui/runs/"+long.ID, textHas("#logs", "epoch 8"))
	shot("pipeline", "/ui/pipelines/etl", `!!document.querySelector('[data-node="load"][data-state="running"]')`)
	shot("dag", "/ui/dags/"+dag.Runs["fetch"], `!!document.querySelector('[data-node="publish"][data-state="skipped"]')`)
	shot("workers", "/ui/workers", "true")
	shot("queues", "/ui/queues", "true")
	shot("dead-letters", "/ui/dead", "true")
}
