package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
)

// A Stepped engine acts only in Step: nothing is promoted, rescued or fired between two
// calls, whatever the clock says, and Step runs exactly what the loops would have.
func TestStepped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var ids int
	e, b := setup(t, func(c *Config) {
		c.Stepped = true
		c.LeaderTTL = time.Hour
		c.NewID = func(now time.Time) string {
			ids++
			return fmt.Sprintf("%013d-%012d", now.UnixMilli(), ids)
		}
	})
	settle := func() time.Time {
		t.Helper()
		for range 100 {
			next, err := e.Step(ctx)
			require.NoError(t, err)
			if next.After(b.clk.Now()) {
				return next
			}
		}
		t.Fatal("the services do not settle")
		return time.Time{}
	}

	require.Zero(t, e.Term(), "no lead before the first step")
	due := t0.Add(5 * time.Second)
	noDisruptions := 0
	run := submit(t, e, b, due, model.RetryPolicy{MaxDisruptions: &noDisruptions})
	instant := t0.Add(time.Minute) // "* * * * *" from t0
	job := cronJob(t, e, b, model.Schedule{Cron: "* * * * *"}, model.Concurrency{}, nil)
	require.Equal(t, due, settle(), "the promoter is next, at the run's due time")
	require.EqualValues(t, 1, e.Term(), "the first step won the lead")

	b.clk.Set(due)
	require.Equal(t, model.RunScheduled, getRun(t, b, run.ID).Status, "nothing runs between steps")
	require.Equal(t, due.Add(dueGrace), settle(), "then the promoter, at the end of the due run's grace")
	require.Equal(t, model.RunScheduled, getRun(t, b, run.ID).Status, "a due run is leased straight from scheduled")

	register(t, e, "w1")
	require.Len(t, lease(t, e, "w1", 1, 0).Leases, 1)
	expiry := due.Add(10 * time.Second) // LeaseTTL
	b.clk.Set(t0.Add(10 * time.Second))
	require.Equal(t, expiry.Add(time.Millisecond), settle(), "the rescuer found the lease")
	b.clk.Set(instant)
	require.Empty(t, runsOf(t, b, job.ID), "not fired between steps")
	next := settle()
	runs := runsOf(t, b, job.ID)
	require.Len(t, runs, 1)
	require.Equal(t, instant, runs[0].ScheduledFor)
	require.Equal(t, fmt.Sprintf("%013d-%012d", instant.UnixMilli(), ids), runs[0].ID, "the cron run's id is NewID's")
	require.Equal(t, model.RunFailed, getRun(t, b, run.ID).Status, "the lease expired at %s: rescued in the same settling", expiry)
	require.Equal(t, instant.Add(10*time.Second), next, "no lease: the rescuer's next round is a TTL away")

	_, err := New(Config{Store: b.store, Clock: b.clk}).Step(ctx)
	require.ErrorIs(t, err, errNotStepped)
}
