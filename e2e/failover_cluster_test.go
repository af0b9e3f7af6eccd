package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/client"
)

// TestClusterFailover is issue 11's failover test: three servers and four workers as real
// processes on one PostgreSQL database, two jobs firing every second and a stream of
// one-off jobs sent to random servers. The leader is killed (SIGKILL) and restarted, the
// next leader likewise, then a follower, each while one-off jobs run. Once the load has
// stopped and every run ended:
//
//   - every accepted run succeeded, and so did every other run in the store;
//   - no (job, instant) has two runs, and no instant between a cron job's first and last is
//     missing (two of the three servers were always up);
//   - no attempt that started was lost to a server's death: the workers re-attach elsewhere
//     with their leases ("sleep 5" outlives the 4 s lease TTL, so a lease left behind would
//     expire and show as a lost attempt). Each job leaves a file as it starts, so a lost
//     attempt is told apart from a lease that a server granted just before it died and
//     never delivered: the worker could not know of it, it ends when it expires, and the
//     run is tried again without using its retry budget. Those are counted, not failed
//     (they show on a loaded machine, where a lease poll's answer can take long enough to
//     be cut off by the kill);
//
// and it reports how long the survivors took to name a new leader.
func TestClusterFailover(t *testing.T) {
	started := time.Now()
	r := startRig(t, rigConfig{servers: 3, workers: 4, leaseTTL: clusterLeaseTTL})
	jobs := r.cronJobs(3)
	r.createCronJobs(jobs)
	p := r.startProducer(uint64(time.Now().UnixNano()), 250*time.Millisecond, 3)
	ctx := context.Background()

	type phase struct {
		what   string
		leader bool
	}
	var (
		reports   []string
		atKills   int // one-off runs running at the kills
		elections []time.Duration
	)
	for _, ph := range []phase{{"the leader", true}, {"the leader again", true}, {"a follower", false}} {
		var running int
		waitFor(t, 60*time.Second, "one-off jobs running before killing "+ph.what, func() bool {
			running = r.runningOneOffs()
			return running >= 2
		})
		leader := r.leader()
		require.NotEmpty(t, leader, "a server leads before killing %s", ph.what)
		victim := leader
		if !ph.leader {
			for _, i := range r.upServers() {
				if serverName(i) != leader {
					victim = serverName(i)
					break
				}
			}
		}
		r.kill(victim)
		log := r.log()
		killed := log[len(log)-1].at
		atKills += running
		report := fmt.Sprintf("killed %s (%s) with %d one-off runs running", victim, ph.what, running)

		if ph.leader {
			var next string
			waitFor(t, 15*time.Second, "a leader other than "+victim, func() bool {
				next = r.leader()
				return next != "" && next != victim
			})
			elected := time.Since(killed)
			elections = append(elections, elected)
			report += fmt.Sprintf("; %s leads %s after the kill", next, elected.Round(time.Millisecond))
		}
		// The cluster works on without the victim: the leader fires the next instants.
		var fired []time.Time
		waitFor(t, 30*time.Second, "two cron fires after killing "+ph.what, func() bool {
			fired = fired[:0]
			page, err := r.all.ListRuns(ctx, client.ListRunsOptions{Job: jobs[0].name, Limit: 20})
			if err != nil {
				return false
			}
			for _, run := range page.Items {
				if run.CreatedAt.After(killed) {
					fired = append(fired, run.CreatedAt)
				}
			}
			return len(fired) >= 2
		})
		if ph.leader {
			first := fired[0]
			for _, at := range fired {
				if at.Before(first) {
					first = at
				}
			}
			report += fmt.Sprintf("; cron fired again %s after it", first.Sub(killed).Round(time.Millisecond))
		}
		r.start(victim)
		reports = append(reports, report)
	}
	// A little more load on the whole cluster, then stop it.
	log := r.log()
	restarted := log[len(log)-1].at
	waitFor(t, 30*time.Second, "one-off runs accepted after the last restart", func() bool {
		page, err := r.all.ListRuns(ctx, client.ListRunsOptions{Limit: 20})
		if err != nil {
			return false
		}
		n := 0
		for _, run := range page.Items {
			if run.Trigger != "cron" && run.CreatedAt.After(restarted) {
				n++
			}
		}
		return n >= 4
	})
	p.stop()
	accepted, resent, deduped, abandoned, refused := p.results()
	require.Empty(t, refused, "submissions answered 4xx")
	require.Empty(t, abandoned, "submissions no server accepted within a minute")

	runs := r.quiesce(jobs, 90*time.Second)
	byID := requireSucceeded(t, runs, accepted)
	counts := cronSeries(t, runs, jobs)
	_, undelivered := r.losses(runs, r.log(), false)

	for _, rep := range reports {
		t.Log(rep)
	}
	kinds := map[string]int{}
	for id, kind := range accepted {
		if byID[id] != nil {
			kinds[kind]++
		}
	}
	var kindList []string
	for _, k := range oneOffKinds {
		kindList = append(kindList, fmt.Sprintf("%d %q", kinds[k.name], k.name))
	}
	t.Logf("new leader named %v after the leader's SIGKILL (leader TTL 1s)", elections)
	t.Logf("%d one-off runs accepted (%s), %d sent again after a server died (%d of them had been created by the first try), %d running at the kills; cron runs %v; %d runs in all succeeded, no started attempt lost; %d leases granted by a dying server and never delivered; %s in all",
		len(accepted), strings.Join(kindList, ", "), resent, deduped, atKills, counts, len(runs), undelivered, time.Since(started).Round(time.Second))
}
