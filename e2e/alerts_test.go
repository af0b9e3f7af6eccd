package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/testsmtp"
)

// receiver is a local HTTP receiver of alert posts: it keeps every body.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) all() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// TestAlerts runs a real `stint dev` (with its local worker) whose alerts go to a JSON
// webhook and a Slack-compatible webhook (local HTTP receivers) and to a local SMTP sink. A
// job fails twice in a row (its threshold): job_failing fires once; it succeeds: the alert
// resolves once, after the hysteresis. A queued run in a paused queue then grows older
// than its queue's max_age: queue_backlog fires, some ten evaluations later, and by then
// nothing more came for the first alert (no flood). `stint alerts` and `stint audit` show
// it all.
func TestAlerts(t *testing.T) {
	t.Parallel()
	hook, slack := newReceiver(t), newReceiver(t)
	sink := testsmtp.Start(t)
	srv := startServer(t, "dev", "--data", t.TempDir(),
		"--alert-webhook", hook.srv.URL, "--alert-slack", slack.srv.URL,
		"--alert-smtp", sink.Addr, "--alert-email-to", "ops@example.com", "--alert-email-from", "stint@example.com",
		"--alert-link-base", "https://stint.example.com", "--alert-interval", "200ms", "--alert-hysteresis", "1s",
		"--alert-retry", "50ms")
	c := srv.client(t)
	ctx := context.Background()

	flag := filepath.Join(t.TempDir(), "ok")
	created, _, err := c.CreateJob(ctx, &apitype.JobSpec{Name: "flaky", Shell: `test -f "$FLAG"`,
		Env: map[string]string{"FLAG": flag}, Alerts: &apitype.JobAlerts{ConsecutiveFailures: 2}})
	require.NoError(t, err)
	jobID := created.Job.ID
	waitRun(t, c, created.Run.ID, 30*time.Second)
	run, err := c.TriggerJob(ctx, "flaky", &apitype.TriggerRequest{})
	require.NoError(t, err)
	require.Equal(t, "failed", waitRun(t, c, run.ID, 30*time.Second).Status)

	// One firing post on each channel.
	waitFor(t, 30*time.Second, "the firing alert on every channel", func() bool {
		return len(hook.all()) >= 1 && len(slack.all()) >= 1 && len(sink.Mails) >= 1
	})
	var fired apitype.Alert
	require.NoError(t, json.Unmarshal(hook.all()[0], &fired))
	require.Equal(t, "job_failing", fired.Rule)
	require.Equal(t, "firing", fired.State)
	require.Equal(t, "job:"+jobID, fired.Subject)
	require.Equal(t, "job flaky failed 2 times in a row", fired.Summary)
	require.Equal(t, "https://stint.example.com/ui/jobs/"+jobID, fired.Link)
	require.Contains(t, string(slack.all()[0]), "[FIRING] job_failing: job flaky failed 2 times in a row")
	mail := <-sink.Mails
	require.Equal(t, []string{"ops@example.com"}, mail.To)
	require.Contains(t, mail.Data, "Subject: [stint] FIRING job_failing: job flaky failed 2 times in a row")

	out, errOut, code := cli(t, srv, "alerts", "--state", "firing")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "job flaky failed 2 times in a row")

	// It succeeds: the alert resolves, once.
	require.NoError(t, os.WriteFile(flag, nil, 0o600))
	run, err = c.TriggerJob(ctx, "flaky", &apitype.TriggerRequest{})
	require.NoError(t, err)
	require.Equal(t, "succeeded", waitRun(t, c, run.ID, 30*time.Second).Status)
	waitFor(t, 30*time.Second, "the resolved alert on every channel", func() bool {
		return len(hook.all()) >= 2 && len(slack.all()) >= 2 && len(sink.Mails) >= 1
	})
	var resolved apitype.Alert
	require.NoError(t, json.Unmarshal(hook.all()[1], &resolved))
	require.Equal(t, fired.ID, resolved.ID)
	require.Equal(t, "resolved", resolved.State)
	require.NotNil(t, resolved.ResolvedAt)
	mail = <-sink.Mails
	require.Contains(t, mail.Data, "Subject: [stint] RESOLVED job_failing")

	// A second alert that needs time to hold: some ten evaluations pass before it fires.
	_, err = c.CreateQueue(ctx, "held", &apitype.QueuePatch{Paused: ptr(true),
		Alerts: &apitype.QueueAlerts{MaxAge: ptr(apitype.Duration(2 * time.Second))}})
	require.NoError(t, err)
	_, _, err = c.CreateJob(ctx, &apitype.JobSpec{Name: "waits", Shell: "true", Queue: "held"})
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "queue_backlog on the webhook", func() bool { return len(hook.all()) >= 3 })
	var backlog apitype.Alert
	require.NoError(t, json.Unmarshal(hook.all()[2], &backlog))
	require.Equal(t, "queue_backlog", backlog.Rule)
	require.Equal(t, "queue:held", backlog.Subject)
	require.True(t, strings.HasSuffix(backlog.Summary, "(paused)"), backlog.Summary)
	require.Len(t, hook.all(), 3, "one fire and one resolve of the first alert, nothing more")

	out, errOut, code = cli(t, srv, "alerts", "--json")
	require.Zero(t, code, errOut)
	var list apitype.AlertList
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list.Alerts, 2)
	require.Equal(t, "firing", list.Alerts[0].State)
	require.Equal(t, "resolved", list.Alerts[1].State)

	// The audit log has the changes, by "dev" (stint dev is open). Entries are written in
	// order just after the answers: once the queue's is there, the job's are.
	waitFor(t, 10*time.Second, "the queue's audit entry", func() bool {
		out, _, code := cli(t, srv, "audit", "--target", "queue:held", "--json")
		return code == 0 && strings.Contains(out, `"action": "queue.update"`)
	})
	out, errOut, code = cli(t, srv, "audit", "--target", "job:"+jobID)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "job.create")
	require.Contains(t, out, "job.trigger")
	require.Contains(t, out, "dev")
}
