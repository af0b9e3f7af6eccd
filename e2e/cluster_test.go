package e2e

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// clusterLeaseTTL is the servers' lease TTL in these tests: shorter than the jobs (so an
// attempt whose worker could not re-attach would be lost and retried, and seen), longer
// than it takes a worker to move to the next server.
const clusterLeaseTTL = "4s"

// freeAddr returns a loopback address nothing listens on, so that a server restarted at it
// is found where the workers' lists name it.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// clusterServer is one `stint server` of a cluster on a shared PostgreSQL, at a fixed
// address.
type clusterServer struct {
	addr string
	args []string
	p    *proc
}

func (s *clusterServer) start(t *testing.T) {
	t.Helper()
	s.p = startServer(t, "server", append(s.args, "--addr", s.addr)...)
}

func (s *clusterServer) url() string { return "http://" + s.addr }

// startRestartableCluster starts n servers on one fresh PostgreSQL database, each at a fixed
// address so that it can be restarted there.
func startRestartableCluster(t *testing.T, n int) []*clusterServer {
	t.Helper()
	db := freshPostgres(t)
	srvs := make([]*clusterServer, n)
	for i := range srvs {
		srvs[i] = &clusterServer{addr: freeAddr(t), args: []string{"--store", db, "--data", t.TempDir(), "--lease-ttl", clusterLeaseTTL}}
		srvs[i].start(t)
	}
	return srvs
}

// startClusterWorker runs `stint worker --server LIST --id id`.
func startClusterWorker(t *testing.T, servers string, id string) *fleetWorker {
	t.Helper()
	return startClusterWorkerWith(t, servers, id, workerToken(t, servers, id))
}

// startClusterWorkerWith is startClusterWorker with a worker token made beforehand, for a
// worker restarted while no server may be up to make one, and more flags.
func startClusterWorkerWith(t *testing.T, servers, id, token string, args ...string) *fleetWorker {
	t.Helper()
	cmd := exec.Command(stintBin, append([]string{"worker", "--server", servers, "--id", id, "--slots", "4", "--log-level", "info"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = stintEnv("STINT_TOKEN=" + token)
	w := &fleetWorker{id: id, cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		w.kill()
		if t.Failed() {
			t.Logf("stint worker %s output:\n%s", id, w.out.String())
		}
	})
	return w
}

// submitSleeps submits n jobs running `sleep secs` (retries allowed, so that a lost attempt
// shows as a second attempt rather than a failure) and waits until all run.
func submitSleeps(t *testing.T, c *client.Client, n int, secs string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		resp, _, err := c.CreateJob(context.Background(), &apitype.JobSpec{
			Command: []string{"sleep", secs},
			Retry:   &apitype.RetryPolicy{MaxAttempts: 3, InitialDelay: ptr(apitype.Duration(10 * time.Millisecond))},
		})
		require.NoError(t, err)
		ids[i] = resp.Run.ID
	}
	waitFor(t, 30*time.Second, "every job to run", func() bool {
		for _, id := range ids {
			r, err := c.GetRun(context.Background(), id)
			if err != nil || r.Status != "running" {
				return false
			}
		}
		return true
	})
	return ids
}

// requireOneAttempt waits for the runs and requires each succeeded with its first attempt,
// on the worker that started it.
func requireOneAttempt(t *testing.T, c *client.Client, ids []string) {
	t.Helper()
	for _, id := range ids {
		r := waitRun(t, c, id, 60*time.Second)
		require.Equal(t, "succeeded", r.Status, "run %s: %+v", id, r)
		require.Equal(t, 1, r.Attempt, "run %s ran once: its attempt was never lost", id)
		require.Len(t, r.Attempts, 1, "run %s", id)
	}
}

// Killing the server a worker is attached to, or restarting every server one at a time,
// kills no job: the workers move to the next server and keep their attempts.
func TestWorkersSurviveServerDeath(t *testing.T) {
	srvs := startRestartableCluster(t, 3)
	list := make([]string, len(srvs))
	for i, s := range srvs {
		list[i] = s.url()
	}
	servers := strings.Join(list, ",")
	c, err := client.New(servers, client.WithToken(adminToken))
	require.NoError(t, err)
	// Every worker tries the first server first: it is the one they are attached to.
	for _, id := range []string{"w1", "w2"} {
		startClusterWorker(t, servers, id)
	}

	t.Run("SIGKILL of the attached server", func(t *testing.T) {
		ids := submitSleeps(t, c, 6, "5")
		srvs[0].p.kill()
		requireOneAttempt(t, c, ids)
		srvs[0].start(t)
	})

	t.Run("rolling restart", func(t *testing.T) {
		ids := submitSleeps(t, c, 6, "8")
		for _, s := range srvs {
			s.p.kill()
			s.start(t) // waits until it listens again
			require.NoError(t, s.p.client(t).Ready(context.Background()))
		}
		requireOneAttempt(t, c, ids)
	})
}

// A worker killed -9 and started again with the same id is a new process: its old attempts
// are lost at once (and retried), not kept.
func TestRestartedWorkerLosesItsAttempts(t *testing.T) {
	srvs := startRestartableCluster(t, 1)
	servers := srvs[0].url()
	c, err := client.New(servers, client.WithToken(adminToken))
	require.NoError(t, err)
	w := startClusterWorker(t, servers, "w1")
	ids := submitSleeps(t, c, 2, "3")
	w.kill()
	startClusterWorker(t, servers, "w1")
	for _, id := range ids {
		r := waitRun(t, c, id, 60*time.Second)
		require.Equal(t, "succeeded", r.Status, "run %s: %+v", id, r)
		require.Equal(t, 2, r.Attempt, "run %s was run again", id)
		require.Len(t, r.Attempts, 2)
		require.Equal(t, "lost", r.Attempts[0].Status)
		require.Contains(t, r.Attempts[0].Error, "worker restarted")
	}
}
