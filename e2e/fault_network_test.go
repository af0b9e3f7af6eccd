package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// TestFaultWorkerCutOff cuts a worker off the network while it runs a job: the worker's
// connections to the server go through a proxy that stops forwarding anything (cutProxy),
// as a partition that drops packets does. One server and a worker run a stream of one-off
// jobs meanwhile. The server's lease TTL is 6 s: this test is about the lease, and a short
// one makes its expiry come soon, while its kill margin (a tenth) stays well above how late
// a timer fires on a loaded machine.
//
// The job on the cut-off worker (it holds a lock for as long as any process of its attempt
// lives, and its first attempt runs until killed) must be killed by its worker before the
// server's lease expires: the worker kills an attempt it could not renew a tenth of the TTL
// before the expiry. The server then runs it again on another worker, and the second attempt
// finds the lock free: two processes of the run never ran at once. Once the network is back,
// the cut-off worker takes work again. Every run succeeded, and the clients saw no error.
func TestFaultWorkerCutOff(t *testing.T) {
	t.Parallel()
	const ttl = 6 * time.Second
	r := startRig(t, rigConfig{servers: 1, workers: 1, leaseTTL: ttl.String(), store: sqliteStore})
	p := r.startProducer(uint64(time.Now().UnixNano()), 250*time.Millisecond, 3)
	ctx := context.Background()
	c := r.clients[0]
	srv := r.servers[0]

	proxy := startCutProxy(t, srv.addr)
	cut := startClusterWorkerWith(t, proxy.url(), "cut", workerToken(t, srv.url(), "cut"), "--labels", "pool=victim,side=far")
	script := `exec 9>"$MARKS/$STINT_RUN_ID.lock"
flock -n 9 || { echo "attempt $STINT_ATTEMPT: another attempt of this run still holds the lock"; exit 99; }
echo $$ > "$MARKS/$STINT_RUN_ID.$STINT_ATTEMPT.pid"
` + markScript(`
[ "$STINT_ATTEMPT" -gt 1 ] || exec sleep 600`)
	victim := submitSpec(t, c, &apitype.JobSpec{Shell: script, Env: r.markEnv(),
		Requirements: &apitype.Requirements{Labels: map[string]string{"pool": "victim"}},
		Retry:        &apitype.RetryPolicy{MaxAttempts: 1, MaxDisruptions: ptr(3)}})
	waitFor(t, time.Minute, "the job running on the worker to be cut off", func() bool {
		run, err := c.GetRun(ctx, victim)
		return err == nil && run.Status == "running" && run.WorkerID == "cut" && r.started(victim, 1)
	})
	pidText, err := os.ReadFile(filepath.Join(r.marks, victim+".1.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	require.NoError(t, err)
	startClusterWorkerWith(t, srv.url(), "spare", workerToken(t, srv.url(), "spare"), "--labels", "pool=victim")

	cutAt := time.Now()
	proxy.cutOff()
	killRe := regexp.MustCompile(`time=(\S+) level=WARN ` + leaseKillLog + `.* run_id=` + victim)
	var killedAt time.Time
	waitFor(t, 30*time.Second, "the cut-off worker to kill the attempt", func() bool {
		m := killRe.FindStringSubmatch(cut.out.String())
		if m == nil {
			return false
		}
		killedAt, err = time.Parse(time.RFC3339Nano, m[1])
		require.NoError(t, err)
		return true
	})
	waitFor(t, 10*time.Second, "the attempt's process gone", func() bool { return gone(pid) })
	w, err := c.GetWorker(ctx, "cut")
	require.NoError(t, err)
	expiry := w.LastHeartbeat.Add(ttl) // the last renewal that reached the server, plus the TTL

	run := waitRun(t, c, victim, time.Minute)
	require.Equal(t, "succeeded", run.Status, "%s: %+v", run.Error, run.Attempts)
	require.Equal(t, 2, run.Attempt)
	require.Equal(t, 1, run.Disruptions, "the lost attempt is a disruption, not a failure")
	first, second := run.Attempts[0], run.Attempts[1]
	require.Equal(t, "lost", first.Status)
	require.Equal(t, "spare", second.WorkerID)
	require.True(t, killedAt.Before(expiry), "killed at %s, after the lease's expiry at %s", killedAt, expiry)
	require.True(t, killedAt.Before(second.StartedAt), "killed at %s, after attempt 2 started at %s", killedAt, second.StartedAt)

	healAt := time.Now()
	proxy.heal()
	waitFor(t, time.Minute, "the cut-off worker's heartbeats to reach the server again", func() bool {
		w, err := c.GetWorker(ctx, "cut")
		return err == nil && w.LastHeartbeat.After(healAt)
	})
	back := time.Since(healAt)
	far := submitSpec(t, c, &apitype.JobSpec{Shell: "true",
		Requirements: &apitype.Requirements{Labels: map[string]string{"side": "far"}}})
	farRun := waitRun(t, c, far, time.Minute)
	require.Equal(t, "succeeded", farRun.Status, farRun.Error)
	require.Equal(t, "cut", farRun.Attempts[len(farRun.Attempts)-1].WorkerID)

	accepted, runs := r.endLoad(t, p)
	r.requireServersUp(t)
	disrupted := 0
	for _, run := range runs {
		if run.ID != victim {
			disrupted += run.Disruptions
		}
	}
	t.Logf("lease TTL %s: cut off %s after its job started; the worker killed it %s after the cut, %s before the lease's expiry; attempt 2 started on another worker %s after the kill; the worker was back %s after the network",
		ttl, cutAt.Sub(first.StartedAt).Round(time.Millisecond), killedAt.Sub(cutAt).Round(time.Millisecond),
		expiry.Sub(killedAt).Round(time.Millisecond), second.StartedAt.Sub(killedAt).Round(time.Millisecond), back.Round(time.Millisecond))
	t.Logf("%d one-off runs accepted, %d runs in all succeeded; %d other runs disrupted (run on the cut-off worker); no client saw an error",
		len(accepted), len(runs), disrupted)
}
