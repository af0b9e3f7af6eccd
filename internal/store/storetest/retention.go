package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// ended creates a run of j, leases it at end-1s and ends it with status at end, with one
// chunk of output; it returns the run as it is after.
func (f *fx) ended(j *model.Job, status model.AttemptStatus, end time.Time) *model.Run {
	f.t.Helper()
	r := f.createRuns(f.run(j))[0]
	l := f.leaseOne("w", end.Add(-time.Second))
	require.Equal(f.t, r.ID, l.Run.ID)
	f.appendLogs(model.LogChunk{RunID: r.ID, Attempt: 1, Seq: 1, Stream: model.Stdout, Data: []byte("out"),
		CreatedAt: end, Token: l.Token})
	return f.finish(l, status, intp(0), end)
}

// prune runs PruneRuns and requires success.
func (f *fx) prune(p store.PruneRunsParams) int {
	f.t.Helper()
	n, err := f.s.PruneRuns(f.ctx, &p)
	require.NoError(f.t, err)
	return n
}

// gone requires that runs no longer exist, nor anything of theirs: a run created again
// with the same id has no attempts and no output.
func (f *fx) gone(j *model.Job, runs ...*model.Run) {
	f.t.Helper()
	for _, r := range runs {
		_, err := f.s.GetRun(f.ctx, &store.GetRunParams{ID: r.ID})
		require.ErrorIs(f.t, err, model.ErrNotFound, "run %s", r.ID)
		again := f.createRuns(f.run(j, func(n *model.Run) { n.ID = r.ID }))[0]
		require.Empty(f.t, f.getRun(again.ID).Attempts, "the attempts went with the run")
		chunks, err := f.s.ReadLogs(f.ctx, &store.ReadLogsParams{RunID: r.ID, Attempt: 1})
		require.NoError(f.t, err)
		require.Empty(f.t, chunks, "the output went with the run")
		_, err = f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{r.ID}, Now: t0})
		require.NoError(f.t, err)
	}
}

func testRetention(t *testing.T, open OpenFunc) {
	t.Run("AgeRule", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 1 })
		f.createJob(j, nil)
		ok := f.ended(j, model.AttemptSucceeded, at(time.Minute))
		bad := f.ended(j, model.AttemptFailed, at(2*time.Minute))
		late := f.ended(j, model.AttemptSucceeded, at(time.Hour))
		waiting := f.createRuns(f.run(j))[0] // old, but not final

		require.Equal(t, 2, f.prune(store.PruneRunsParams{Before: at(30 * time.Minute)}))
		require.Equal(t, model.RunSucceeded, f.getRun(late.ID).Status, "finished after the cutoff: stays")
		require.Equal(t, model.RunQueued, f.getRun(waiting.ID).Status, "not final: never deleted")
		require.Zero(t, f.prune(store.PruneRunsParams{Before: at(30 * time.Minute)}), "nothing left past age")
		f.gone(j, ok, bad)
		require.Zero(t, f.prune(store.PruneRunsParams{}), "no rule, nothing goes")
	})

	t.Run("BatchesOfLimit", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("a")
		f.createJob(j, nil)
		for i := range 5 {
			f.ended(j, model.AttemptSucceeded, at(time.Duration(i+1)*time.Minute))
		}
		var got []int
		for range 4 {
			got = append(got, f.prune(store.PruneRunsParams{Before: at(time.Hour), Limit: 2}))
		}
		require.Equal(t, []int{2, 2, 1, 0}, got)
	})

	t.Run("KeepPerJob", func(t *testing.T) {
		f := setup(t, open)
		a, b := f.job("a"), f.job("b")
		f.createJob(a, nil)
		f.createJob(b, nil)
		var as []*model.Run
		for i := range 4 {
			as = append(as, f.ended(a, model.AttemptSucceeded, at(time.Duration(i+1)*time.Minute)))
		}
		rareB := f.ended(b, model.AttemptSucceeded, at(10*time.Minute))
		waiting := f.createRuns(f.run(a))[0] // not final: does not count among the kept

		require.Equal(t, 2, f.prune(store.PruneRunsParams{Before: at(time.Hour), KeepPerJob: 2}))
		require.Equal(t, model.RunSucceeded, f.getRun(as[2].ID).Status)
		require.Equal(t, model.RunSucceeded, f.getRun(as[3].ID).Status)
		require.Equal(t, model.RunSucceeded, f.getRun(rareB.ID).Status, "a job's last runs stay however old")
		require.Equal(t, model.RunQueued, f.getRun(waiting.ID).Status)
		f.gone(a, as[0], as[1])
	})

	t.Run("MaxPerJob", func(t *testing.T) {
		f := setup(t, open)
		a, b := f.job("a"), f.job("b")
		f.createJob(a, nil)
		f.createJob(b, nil)
		var as []*model.Run
		for i := range 5 {
			as = append(as, f.ended(a, model.AttemptSucceeded, at(time.Duration(i+1)*time.Minute)))
		}
		bs := []*model.Run{f.ended(b, model.AttemptSucceeded, at(10*time.Minute))}
		waiting := f.createRuns(f.run(a))[0]

		require.Equal(t, 3, f.prune(store.PruneRunsParams{MaxPerJob: 2}), "recent, but past the count")
		for _, r := range append(as[3:], bs...) {
			require.Equal(t, model.RunSucceeded, f.getRun(r.ID).Status)
		}
		require.Equal(t, model.RunQueued, f.getRun(waiting.ID).Status)
		require.Zero(t, f.prune(store.PruneRunsParams{MaxPerJob: 2}))
		f.gone(a, as[:3]...)
	})

	t.Run("UpstreamStaysForItsDependants", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("up")
		f.createJob(j, nil)
		up := f.ended(j, model.AttemptSucceeded, at(time.Minute))
		down := f.job("down")
		downRun := f.createJob(down, f.run(down, func(r *model.Run) {
			r.DependsOn = []model.Dependency{{RunID: up.ID, Condition: model.CondFailed}}
		})).Run
		require.Equal(t, model.RunSkipped, downRun.Status, "its condition can no longer hold")
		other := f.job("other")
		waitingRun := f.createJob(other, f.run(other, func(r *model.Run) {
			r.DependsOn = []model.Dependency{{RunID: up.ID, Condition: model.CondSucceeded}}
		})).Run
		require.Equal(t, model.RunQueued, waitingRun.Status)

		require.Equal(t, 1, f.prune(store.PruneRunsParams{Before: at(time.Hour)}), "the skipped dependant goes, not the upstream")
		require.Equal(t, model.RunSucceeded, f.getRun(up.ID).Status, "a dependant is not final")
		_, err := f.s.CancelRuns(f.ctx, &store.CancelRunsParams{RunIDs: []string{waitingRun.ID}, Now: at(2 * time.Minute)})
		require.NoError(t, err)
		require.Equal(t, 2, f.prune(store.PruneRunsParams{Before: at(time.Hour)}))
		f.gone(j, up)
	})

	t.Run("PipelineRunGoesWhole", func(t *testing.T) {
		f := setup(t, open)
		pr := &model.PipelineRun{ID: f.id(), PipelineID: f.id(), PipelineName: "etl", Namespace: model.DefaultNamespace,
			Trigger: model.TriggerManual, ScheduledFor: t0, CreatedAt: t0}
		p := &store.CreateGraphParams{PipelineRun: pr, Steps: []string{"extract", "load"}, Now: t0}
		var jobs []*model.Job
		for i, step := range p.Steps {
			j := f.job("etl." + step)
			f.createJob(j, nil)
			r := f.run(j, func(r *model.Run) { r.Trigger = model.TriggerPipeline })
			if i > 0 {
				r.DependsOn = []model.Dependency{{RunID: p.Runs[i-1].ID, Condition: model.CondSucceeded}}
			}
			jobs, p.Runs = append(jobs, j), append(p.Runs, r)
		}
		_, err := f.s.CreateGraph(f.ctx, p)
		require.NoError(t, err)
		f.finish(f.leaseOne("w", at(time.Minute)), model.AttemptSucceeded, intp(0), at(2*time.Minute))

		require.Zero(t, f.prune(store.PruneRunsParams{Before: at(time.Hour)}), "a step is still to run")
		require.Zero(t, f.prune(store.PruneRunsParams{MaxPerJob: 0}))
		f.finish(f.leaseOne("w", at(2*time.Hour)), model.AttemptSucceeded, intp(0), at(3*time.Hour))
		require.Zero(t, f.prune(store.PruneRunsParams{Before: at(time.Hour)}), "a step finished after the cutoff")
		require.Equal(t, 2, f.prune(store.PruneRunsParams{Before: at(4 * time.Hour)}))
		_, err = f.s.GetPipelineRun(f.ctx, &store.GetPipelineRunParams{ID: pr.ID})
		require.ErrorIs(t, err, model.ErrNotFound, "the pipeline run went with its last step")
		f.gone(jobs[0], p.Runs[0])
	})

	t.Run("Workers", func(t *testing.T) {
		f := setup(t, open)
		f.register("old", "s1", t0)
		f.register("busy", "s2", t0)
		f.register("new", "s3", at(time.Hour))
		f.submit("a")
		require.Len(t, f.lease("busy", 1, t0), 1)

		n, err := f.s.PruneWorkers(f.ctx, &store.PruneWorkersParams{Before: at(30 * time.Minute)})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		_, err = f.s.GetWorker(f.ctx, &store.GetWorkerParams{ID: "old"})
		require.ErrorIs(t, err, model.ErrNotFound)
		ws, err := f.s.ListWorkers(f.ctx)
		require.NoError(t, err)
		require.Len(t, ws, 2, "a silent worker that holds a running run stays, and so does a live one")
		n, err = f.s.PruneWorkers(f.ctx, &store.PruneWorkersParams{Before: at(30 * time.Minute)})
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("RateLimits", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("rated")
		f.createJob(j, nil)
		rated := func() *model.Run {
			return f.limited(j, "key:default:api", 0, model.ConcurrencyAllow, func(r *model.Run) {
				r.Concurrency.Rate = &model.RateLimit{Rate: 1, Per: time.Minute}
			})
		}
		require.Equal(t, model.RunQueued, f.createOne(rated()).Run.Status)
		prune := func(before time.Time) int {
			n, err := f.s.PruneRateLimits(f.ctx, &store.PruneRateLimitsParams{Before: before})
			require.NoError(t, err)
			return n
		}
		require.Zero(t, prune(at(30*time.Second)), "its next turn is still ahead")
		require.Equal(t, 1, prune(at(2*time.Minute)))
		require.Equal(t, model.RunQueued, f.createOne(rated()).Run.Status, "the key starts afresh")
	})
}
