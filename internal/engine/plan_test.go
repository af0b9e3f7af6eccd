package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// planJob is a job as the API builds it for a submission at now, named name (its id when
// empty), with its first run unless it has a schedule.
func planJob(name string, spec model.JobSpec, due, now time.Time) (*model.Job, *model.Run) {
	if spec.Queue == "" {
		spec.Queue = model.DefaultQueue
	}
	j := &model.Job{ID: id.New(now), Namespace: model.DefaultNamespace, Name: name, Spec: spec, Enabled: true, CreatedAt: now, UpdatedAt: now}
	if j.Name == "" {
		j.Name = j.ID
	}
	if spec.Schedule != nil {
		j.NextFireAt = NextFireAt(j, now)
		return j, nil
	}
	return j, scheduler.NewRun(id.New(now), j, model.TriggerSubmit, nil, due, now)
}

func TestPlanPlacement(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	plan := func(req model.Requirements) *Plan {
		t.Helper()
		j, r := planJob("", model.JobSpec{Handler: "noop", Requirements: req}, time.Time{}, b.clk.Now())
		p, err := e.Plan(ctx, j, r, 3)
		require.NoError(t, err)
		return p
	}

	// No worker at all.
	p := plan(model.Requirements{})
	require.Equal(t, model.PendingNoWorker, p.Placement.Code)
	require.Equal(t, "no worker is connected", p.Placement.Reason)
	require.Equal(t, []Hold{{model.PendingNoWorker, "no worker is connected"}}, p.Holds)

	registerGPUFleet(t, e)

	p = plan(model.Requirements{GPU: 4})
	require.True(t, p.Constrained)
	require.Equal(t, 3, p.Workers)
	require.Empty(t, p.Placement.Fits)
	require.Equal(t, model.PendingNoWorker, p.Placement.Code)
	require.Equal(t, "no worker fits: 3 registered, 3 lack gpu >= 4", p.Placement.Reason)
	require.Equal(t, map[string]int{"gpu >= 4": 3}, p.Placement.Never)
	require.Empty(t, p.Placement.Busy)
	require.Equal(t, []Hold{{model.PendingNoWorker, p.Placement.Reason}}, p.Holds)
	require.Equal(t, t0, p.Due, "due now")

	p = plan(model.Requirements{GPU: 1, Labels: map[string]string{"zone": "us"}})
	require.Equal(t, []string{"gpu1", "gpu2"}, p.Placement.Fits, "best fit first: gpu1 is left with no GPU idle")
	require.Equal(t, model.PendingNone, p.Placement.Code)
	require.Empty(t, p.Holds)

	p = plan(model.Requirements{})
	require.False(t, p.Constrained)
	require.Equal(t, []string{"gpu0", "gpu1", "gpu2"}, p.Placement.Fits, "any worker, in id order")
	require.Empty(t, p.Holds)

	// Nothing was created.
	page, err := b.store.ListJobs(ctx, &store.ListJobsParams{Limit: 100})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
}

func TestPlanHolds(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	registerGPUFleet(t, e)
	now := b.clk.Now()

	// A job under a limit of 1 with a run already queued.
	limited := model.JobSpec{Handler: "noop", Concurrency: model.Concurrency{Policy: "forbid", Max: 1}}
	j, r := planJob("nightly", limited, time.Time{}, now)
	res, err := e.SubmitJobs(ctx, []store.NewJob{{Job: j, Run: r}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	j, r = planJob("nightly", limited, now.Add(time.Hour), now)
	p, err := e.Plan(ctx, j, r, 3)
	require.NoError(t, err)
	require.NotNil(t, p.Existing)
	require.Equal(t, res[0].Job.ID, p.Existing.ID)
	require.Equal(t, now.Add(time.Hour), p.Due)
	require.Equal(t, []Hold{
		{model.PendingConcurrencyLimit, `concurrency limit: 1 of 1 runs of job "nightly" active: a new run would be skipped (policy forbid)`},
		{model.PendingNotDue, "not due until 2026-03-01T13:00:00Z"},
	}, p.Holds)

	// Another name: no run counts against its limit.
	j, r = planJob("other", limited, time.Time{}, now)
	p, err = e.Plan(ctx, j, r, 3)
	require.NoError(t, err)
	require.Nil(t, p.Existing)
	require.Empty(t, p.Holds)

	// The queue comes first; a queue that does not exist yet holds nothing.
	paused := true
	_, err = e.UpdateQueue(ctx, &store.UpdateQueueParams{Name: model.DefaultQueue, Paused: &paused})
	require.NoError(t, err)
	j, r = planJob("nightly", limited, time.Time{}, now)
	p, err = e.Plan(ctx, j, r, 3)
	require.NoError(t, err)
	require.Len(t, p.Holds, 2)
	require.Equal(t, Hold{model.PendingQueuePaused, `queue "default" is paused`}, p.Holds[0])
	require.Equal(t, model.PendingConcurrencyLimit, p.Holds[1].Code)

	j, r = planJob("", model.JobSpec{Handler: "noop", Queue: "fresh"}, time.Time{}, now)
	p, err = e.Plan(ctx, j, r, 3)
	require.NoError(t, err)
	require.Empty(t, p.Holds)
}

func TestPlanSchedule(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	j, r := planJob("", model.JobSpec{Handler: "noop", Schedule: &model.Schedule{Cron: "0 3 * * *", Timezone: "Europe/Paris"}}, time.Time{}, b.clk.Now())
	require.Nil(t, r)
	p, err := e.Plan(context.Background(), j, r, 2)
	require.NoError(t, err)
	require.True(t, p.Due.IsZero(), "a scheduled job gets no run at once")
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	require.Len(t, p.NextFires, 2)
	require.True(t, time.Date(2026, 3, 2, 3, 0, 0, 0, paris).Equal(p.NextFires[0]), "%v", p.NextFires)
	require.True(t, time.Date(2026, 3, 3, 3, 0, 0, 0, paris).Equal(p.NextFires[1]), "%v", p.NextFires)
	require.Equal(t, "Europe/Paris", p.NextFires[0].Location().String())
}
