package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// TestCronFiresEachSecondOnceAcrossAKill runs a real server with a job that fires every
// second, kills the server with SIGKILL, restarts it on the same store and checks, in real
// time: every run is a cron run of a whole-second instant, no instant has two runs
// (invariant 4), the instants missed while the server was down, each late by less than
// the misfire grace, got a run each (no second is skipped), and firing goes on after the
// restart.
func TestCronFiresEachSecondOnceAcrossAKill(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			args := sc.args(t)
			srv := startServer(t, "dev", args...)
			c := srv.client(t)
			ctx := context.Background()
			_, _, err := c.CreateJob(ctx, &apitype.JobSpec{Name: "tick", Handler: "noop", Schedule: &apitype.Schedule{Cron: "* * * * * *"}})
			require.NoError(t, err)

			waitFor(t, 30*time.Second, "three ticks", func() bool { return len(cronRuns(t, c)) >= 3 })
			before := cronRuns(t, c)
			for _, r := range before {
				require.Zero(t, instantOf(t, r).Nanosecond(), "a tick is a whole second: %s", instantOf(t, r))
				require.Equal(t, "cron", r.Trigger)
			}
			srv.kill()
			down := time.Now()
			// The server stays down across several instants, more than its cron lead (2s: the
			// runs of the next two seconds exist already): no condition can stand in for real
			// time passing here.
			waitFor(t, 10*time.Second, "five seconds of downtime", func() bool { return time.Since(down) > 5*time.Second })

			srv2 := startServer(t, "dev", args...)
			c2 := srv2.client(t)
			up := time.Now()
			waitFor(t, 30*time.Second, "ticks after the restart", func() bool {
				n := 0
				for _, r := range cronRuns(t, c2) {
					if instantOf(t, r).After(up) {
						n++
					}
				}
				return n >= 2
			})
			runs := cronRuns(t, c2)
			seen := map[time.Time]string{}
			var late []*apitype.Run // runs the restarted server made for instants it had missed
			for _, r := range runs {
				at := instantOf(t, r)
				require.Empty(t, seen[at], "instant %s fired twice: runs %s and %s", at, seen[at], r.ID)
				seen[at] = r.ID
				if r.CreatedAt.After(down) && r.CreatedAt.Sub(at) > time.Second {
					late = append(late, r)
				}
			}
			// Each instant missed while down was late by less than the misfire grace (a minute),
			// so each got its own run under run_once: no second of the whole series is missing.
			require.GreaterOrEqual(t, len(late), 2, "runs for the instants missed while down")
			first, last := instantOf(t, runs[0]), instantOf(t, runs[0])
			for _, r := range runs {
				if at := instantOf(t, r); at.Before(first) {
					first = at
				} else if at.After(last) {
					last = at
				}
			}
			for at := first; !at.After(last); at = at.Add(time.Second) {
				require.NotEmpty(t, seen[at], "instant %s has no run (series %s to %s)", at, first, last)
			}
			for _, r := range runs {
				if instantOf(t, r).After(up) {
					final := waitRun(t, c2, r.ID, 30*time.Second)
					require.Equal(t, "succeeded", final.Status)
					require.Less(t, final.StartedAt.Sub(instantOf(t, final)), 2*time.Second, "started on time: %+v", final)
				}
			}
		})
	}
}

// instantOf is the instant cron run r was fired for. A series of cron runs is checked on
// it, not on scheduled_for, which a retry after a backoff (or by hand) moves.
func instantOf(t testing.TB, r *apitype.Run) time.Time {
	t.Helper()
	require.NotNil(t, r.Instant, "cron run %s has no instant", r.ID)
	return r.Instant.UTC()
}

// cronRuns lists the runs of job tick.
func cronRuns(t testing.TB, c *client.Client) []*apitype.Run {
	t.Helper()
	page, err := c.ListRuns(context.Background(), client.ListRunsOptions{Job: "tick", Limit: 1000})
	require.NoError(t, err)
	return page.Items
}
