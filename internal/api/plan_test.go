package api

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// registerGPUWorkers registers gpu0, gpu1 and gpu2: command workers with 8 cpus, 16 GiB and
// 0, 1 and 2 GPUs.
func (b *testBundle) registerGPUWorkers(t *testing.T) {
	t.Helper()
	for n, id := range []string{"gpu0", "gpu1", "gpu2"} {
		r := b.do(t, "POST", "/v1/workers/register", apitype.RegisterRequest{
			ID: id, Capacity: apitype.Capacity{CPU: 8, MemoryMB: 16384, GPU: n, Slots: 4}, Commands: true,
			Labels: map[string]string{"zone": "us"},
		})
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	}
}

// plan posts a spec to /v1/plan and requires a 200.
func (b *testBundle) plan(t *testing.T, spec string) apitype.PlanResponse {
	t.Helper()
	r := b.do(t, "POST", "/v1/plan", spec)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var out apitype.PlanResponse
	r.decode(t, &out)
	return out
}

func TestPlanPlacement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createJob(t, `{"name": "existing", "command": ["true"]}`)
	b.registerGPUWorkers(t)
	jobs, runs := b.counts(t)

	out := b.plan(t, `{"name": "train", "command": ["python3", "train.py"], "requirements": {"gpu": 4}}`)
	p := out.Placement
	require.True(t, p.Constrained)
	require.Equal(t, 3, p.Workers)
	require.Empty(t, p.Fits)
	require.Empty(t, p.Worker)
	require.Equal(t, "no_worker_fits", p.Code)
	require.Equal(t, "no worker fits: 3 registered, 3 lack gpu >= 4", p.Reason)
	require.Equal(t, map[string]int{"gpu >= 4": 3}, p.Never)
	require.Empty(t, p.Busy)
	require.Equal(t, []apitype.PlanHold{{Code: "no_worker_fits", Reason: p.Reason}}, out.HeldBy)
	require.NotNil(t, out.DueAt, "due now")
	require.Equal(t, time.UTC, out.DueAt.Location())
	require.True(t, out.Enabled)
	require.Empty(t, out.ExistingJob)

	out = b.plan(t, `{"command": ["true"], "requirements": {"gpu": 2, "labels": {"zone": "eu"}}}`)
	require.Equal(t, map[string]int{"gpu >= 2": 2, "label zone=eu": 3}, out.Placement.Never)
	require.Equal(t, "no worker fits: 3 registered, 3 lack label zone=eu, 2 lack gpu >= 2", out.Placement.Reason)

	out = b.plan(t, `{"command": ["true"], "requirements": {"gpu": 1, "cpu": 2, "labels": {"zone": "us"}}}`)
	p = out.Placement
	require.Equal(t, []string{"gpu1", "gpu2"}, p.Fits, "best fit first")
	require.Equal(t, "gpu1", p.Worker, "the tightest fit: it leaves no GPU idle")
	require.Empty(t, p.Code)
	require.Empty(t, p.Never)
	require.Empty(t, out.HeldBy)

	out = b.plan(t, `{"command": ["true"]}`)
	require.False(t, out.Placement.Constrained)
	require.Equal(t, []string{"gpu0", "gpu1", "gpu2"}, out.Placement.Fits)
	require.Empty(t, out.Placement.Worker, "an unconstrained run goes to the first worker that asks")

	out = b.plan(t, `{"name": "existing", "command": ["true"]}`)
	require.NotEmpty(t, out.ExistingJob)

	j, r := b.counts(t)
	require.Equal(t, jobs, j, "plan created no job")
	require.Equal(t, runs, r, "plan created no run")
}

func TestPlanScheduleAndHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "w1")
	jobs, runs := b.counts(t)

	out := b.plan(t, `{"command": ["true"], "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Paris"}}`)
	require.Nil(t, out.DueAt, "a scheduled job gets no run at once")
	require.Len(t, out.NextFireTimes, nextFireCount)
	require.Len(t, out.NextFireTimesLocal, nextFireCount)
	for i, at := range out.NextFireTimes {
		require.Equal(t, time.UTC, at.Location())
		require.True(t, at.Equal(out.NextFireTimesLocal[i]))
		local := out.NextFireTimesLocal[i]
		require.Equal(t, 3, local.Hour(), "03:00 in Paris: %s", local)
		_, offset := local.Zone()
		require.Contains(t, []int{3600, 7200}, offset, "Paris time: %s", local)
	}
	require.Empty(t, out.HeldBy)

	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	out = b.plan(t, fmt.Sprintf(`{"command": ["true"], "run_at": %q}`, at.Format(time.RFC3339)))
	require.NotNil(t, out.DueAt)
	require.True(t, at.Equal(*out.DueAt))
	require.Equal(t, []apitype.PlanHold{{Code: "not_due", Reason: "not due until " + at.Format(time.RFC3339Nano)}}, out.HeldBy)

	r := b.do(t, "PATCH", "/v1/queues/default", `{"paused": true}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	out = b.plan(t, `{"command": ["true"]}`)
	require.Equal(t, []apitype.PlanHold{{Code: "queue_paused", Reason: `queue "default" is paused`}}, out.HeldBy)

	out = b.plan(t, `{"command": ["true"], "enabled": false}`)
	require.False(t, out.Enabled)
	require.Nil(t, out.DueAt, "a disabled job gets no run")

	j, n := b.counts(t)
	require.Equal(t, jobs, j)
	require.Equal(t, runs, n)
}

func TestPlanConcurrencyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "w1")
	b.createJob(t, `{"name": "sync", "command": ["true"], "concurrency": {"policy": "queue", "max": 1}}`)

	out := b.plan(t, `{"name": "sync", "command": ["true"], "concurrency": {"policy": "queue", "max": 1}}`)
	require.NotEmpty(t, out.ExistingJob)
	require.Equal(t, []apitype.PlanHold{{Code: "concurrency_limit",
		Reason: `concurrency limit: 1 of 1 runs of job "sync" active: a new run would wait for one to end`}}, out.HeldBy)

	out = b.plan(t, `{"name": "sync", "command": ["true"], "concurrency": {"policy": "queue", "max": 2}}`)
	require.Empty(t, out.HeldBy, "room for a second run")
}

func TestPlanBadSpec(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jobs, runs := b.counts(t)

	r := b.do(t, "POST", "/v1/plan", `{"command": [], "priority": 5000, "requirements": {"gpu": -1}}`)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.Subset(t, r.fields(t), []string{"command", "priority", "requirements.gpu"})

	r = b.do(t, "POST", "/v1/plan", `{"shell": "true", "schedule": {"cron": "61 * * * *"}}`)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.Len(t, r.fields(t), 1)
	require.Contains(t, r.fields(t)[0], "schedule.")

	r = b.do(t, "POST", "/v1/plan", `{"shell": "true", "gpus": 1}`)
	require.Equal(t, http.StatusBadRequest, r.status, "unknown fields are refused: %s", r.body)
	require.Contains(t, r.fields(t), "gpus")

	r = b.do(t, "POST", "/v1/plan", nil)
	require.Equal(t, http.StatusBadRequest, r.status, "an empty body: %s", r.body)

	j, n := b.counts(t)
	require.Equal(t, jobs, j)
	require.Equal(t, runs, n)
}
