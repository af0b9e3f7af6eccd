package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func testJobs(t *testing.T, open OpenFunc) {
	t.Run("CreateAndGet", func(t *testing.T) {
		f := setup(t, open)
		loc := time.FixedZone("X", 5*3600)
		created := time.Date(2026, 1, 2, 8, 4, 5, 123456789, loc) // 03:04:05.123456789 UTC
		j := f.job("nightly", func(j *model.Job) {
			j.Spec = model.JobSpec{
				Shell:        "echo hi",
				Args:         rawJSON(`{"a":1,"b":["x"]}`),
				Env:          map[string]string{"K": "V"},
				Dir:          "/tmp",
				Queue:        "batch",
				Priority:     7,
				Requirements: model.Requirements{CPU: 0.5, MemoryMB: 256, GPU: 1, Labels: map[string]string{"os": "linux"}},
				Timeout:      90 * time.Second,
				Retry:        model.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Second, MaxDelay: time.Minute, Multiplier: 2, Jitter: 0.1, FinalExitCodes: []int{2}, RetryExitCodes: []int{75}},
				Schedule:     &model.Schedule{Cron: "0 * * * *", Timezone: "Europe/Paris", Misfire: "skip"},
				Concurrency:  model.Concurrency{Policy: "forbid", Max: 1, Key: "k"},
				Tags:         []string{"a", "b"},
			}
			j.NextFireAt = timep(created.Add(time.Hour))
			j.IdempotencyKey = "key-1"
			j.RequestHash = "hash-1"
			j.CreatedAt = created
			j.UpdatedAt = created
		})
		r := f.run(j, func(r *model.Run) {
			r.Args = rawJSON(`{"x":true}`)
			r.ScheduledFor = created
			r.CreatedAt = created
			r.IdempotencyKey = "run-key-1"
			r.PendingCode = model.PendingNotDue
			r.PendingReason = "not due until later"
			r.Status = model.RunScheduled
		})
		res := f.createJob(j, r)

		want := *j
		want.CreatedAt, want.UpdatedAt = micro(created), micro(created)
		want.NextFireAt = timep(micro(created.Add(time.Hour)))
		require.Equal(t, &want, res.Job)
		require.Equal(t, time.UTC, res.Job.CreatedAt.Location())

		wantRun := *r
		wantRun.ScheduledFor, wantRun.CreatedAt = micro(created), micro(created)
		wantRun.Requirements = j.Spec.Requirements // copied from the job
		require.Equal(t, &wantRun, res.Run)

		for _, key := range []string{j.ID, j.Name} {
			got, err := f.s.GetJob(f.ctx, &store.GetJobParams{Namespace: model.DefaultNamespace, IDOrName: key})
			require.NoError(t, err)
			require.Equal(t, &want, got)
			require.Equal(t, time.UTC, got.CreatedAt.Location())
			require.Equal(t, time.UTC, got.NextFireAt.Location())
		}
		gotRun := f.getRun(r.ID)
		require.Empty(t, gotRun.Attempts)
		gotRun.Attempts = nil
		require.Equal(t, &wantRun, gotRun)
		require.Equal(t, time.UTC, gotRun.ScheduledFor.Location())
	})

	t.Run("CreateWithoutRun", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("cron", func(j *model.Job) {
			j.Spec.Schedule = &model.Schedule{Cron: "* * * * *"}
			j.NextFireAt = timep(at(time.Minute))
		})
		res := f.createJob(j, nil)
		require.Nil(t, res.Run)
		page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{JobID: j.ID})
		require.NoError(t, err)
		require.Empty(t, page.Runs)
	})

	t.Run("GetJobNotFound", func(t *testing.T) {
		f := setup(t, open)
		j, _ := f.submit("a")
		other := f.job("b", func(j *model.Job) { j.Namespace = "other" })
		f.createJob(other, nil)

		for _, p := range []store.GetJobParams{
			{Namespace: model.DefaultNamespace, IDOrName: "missing"},
			{Namespace: model.DefaultNamespace, IDOrName: f.id()},
			{Namespace: "other", IDOrName: "a"},                // name in another namespace
			{Namespace: model.DefaultNamespace, IDOrName: "b"}, // name in another namespace
		} {
			_, err := f.s.GetJob(f.ctx, &p)
			require.ErrorIs(t, err, model.ErrNotFound, "%+v", p)
		}
		// An empty namespace means the default one.
		got, err := f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: "a"})
		require.NoError(t, err)
		require.Equal(t, j.ID, got.ID)
		// An id finds its job whatever the namespace.
		got, err = f.s.GetJob(f.ctx, &store.GetJobParams{Namespace: model.DefaultNamespace, IDOrName: other.ID})
		require.NoError(t, err)
		require.Equal(t, other.ID, got.ID)
	})

	t.Run("IdempotencyKey", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("a", func(j *model.Job) { j.IdempotencyKey, j.RequestHash = "k", "h1" })
		first := f.createJob(j, f.run(j))

		// The same key and hash: the first answer, nothing new.
		again := f.job("a-again", func(j *model.Job) { j.IdempotencyKey, j.RequestHash = "k", "h1" })
		res, err := f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Jobs: []store.NewJob{{Job: again, Run: f.run(again)}}, Now: at(time.Second)})
		require.NoError(t, err)
		require.Len(t, res, 1)
		require.NoError(t, res[0].Err)
		require.True(t, res[0].Existing)
		require.False(t, res[0].Conflict)
		require.Equal(t, first.Job, res[0].Job)
		require.Equal(t, first.Run, res[0].Run)

		// The same key, another hash: the first answer flagged as a conflict.
		other := f.job("a-other", func(j *model.Job) { j.IdempotencyKey, j.RequestHash = "k", "h2" })
		res, err = f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Jobs: []store.NewJob{{Job: other, Run: f.run(other)}}, Now: at(time.Second)})
		require.NoError(t, err)
		require.True(t, res[0].Existing)
		require.True(t, res[0].Conflict)
		require.NoError(t, res[0].Err)
		require.Equal(t, first.Job, res[0].Job)

		// Nothing of the repeats was stored.
		for _, name := range []string{"a-again", "a-other"} {
			_, err := f.s.GetJob(f.ctx, &store.GetJobParams{Namespace: model.DefaultNamespace, IDOrName: name})
			require.ErrorIs(t, err, model.ErrNotFound)
		}
		page, err := f.s.ListRuns(f.ctx, &store.ListRunsParams{})
		require.NoError(t, err)
		require.Equal(t, []string{first.Run.ID}, runIDs(page.Runs))

		// Keys are per namespace.
		elsewhere := f.job("a", func(j *model.Job) { j.Namespace, j.IdempotencyKey, j.RequestHash = "other", "k", "h1" })
		f.createJob(elsewhere, nil)

		// A job without a run answers Existing with a nil run.
		norun := f.job("norun", func(j *model.Job) { j.IdempotencyKey = "k2" })
		f.createJob(norun, nil)
		norun2 := f.job("norun2", func(j *model.Job) { j.IdempotencyKey = "k2" })
		res, err = f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Jobs: []store.NewJob{{Job: norun2, Run: f.run(norun2)}}, Now: t0})
		require.NoError(t, err)
		require.True(t, res[0].Existing)
		require.Equal(t, norun.ID, res[0].Job.ID)
		require.Nil(t, res[0].Run)
	})

	t.Run("IdempotencyKeyWithinBatch", func(t *testing.T) {
		f := setup(t, open)
		a := f.job("a", func(j *model.Job) { j.IdempotencyKey, j.RequestHash = "k", "h" })
		b := f.job("b", func(j *model.Job) { j.IdempotencyKey, j.RequestHash = "k", "other" })
		ra := f.run(a)
		res, err := f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Jobs: []store.NewJob{{Job: a, Run: ra}, {Job: b, Run: f.run(b)}}, Now: t0})
		require.NoError(t, err)
		require.Len(t, res, 2)
		require.False(t, res[0].Existing)
		require.True(t, res[1].Existing)
		require.True(t, res[1].Conflict)
		require.Equal(t, a.ID, res[1].Job.ID)
		require.Equal(t, ra.ID, res[1].Run.ID)
	})

	t.Run("DuplicateName", func(t *testing.T) {
		f := setup(t, open)
		f.submit("taken")
		j1, j2, j3, j4 := f.job("one"), f.job("taken"), f.job("three"), f.job("one")
		r1, r2, r3, r4 := f.run(j1), f.run(j2), f.run(j3), f.run(j4)
		res, err := f.s.CreateJobs(f.ctx, &store.CreateJobsParams{
			Jobs: []store.NewJob{{Job: j1, Run: r1}, {Job: j2, Run: r2}, {Job: j3, Run: r3}, {Job: j4, Run: r4}},
			Now:  t0,
		})
		require.NoError(t, err)
		require.Len(t, res, 4)
		require.NoError(t, res[0].Err)
		require.ErrorIs(t, res[1].Err, model.ErrConflict)
		require.NoError(t, res[2].Err)
		require.ErrorIs(t, res[3].Err, model.ErrConflict, "a duplicate within the batch")

		for _, r := range []*model.Run{r1, r3} {
			f.getRun(r.ID)
		}
		for _, r := range []*model.Run{r2, r4} {
			_, err := f.s.GetRun(f.ctx, &store.GetRunParams{ID: r.ID})
			require.ErrorIs(t, err, model.ErrNotFound)
		}
		for _, j := range []*model.Job{j2, j4} {
			_, err := f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j.ID})
			require.ErrorIs(t, err, model.ErrNotFound)
		}
		// The same name in another namespace is fine.
		f.createJob(f.job("taken", func(j *model.Job) { j.Namespace = "other" }), nil)
	})

	t.Run("RunIdempotencyKeyTaken", func(t *testing.T) {
		f := setup(t, open)
		j := f.job("a")
		f.createJob(j, f.run(j, func(r *model.Run) { r.IdempotencyKey = "rk" }))
		j2 := f.job("b")
		res, err := f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Jobs: []store.NewJob{{Job: j2, Run: f.run(j2, func(r *model.Run) { r.IdempotencyKey = "rk" })}}, Now: t0})
		require.NoError(t, err)
		require.ErrorIs(t, res[0].Err, model.ErrConflict)
		_, err = f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j2.ID})
		require.ErrorIs(t, err, model.ErrNotFound, "the entry is written whole or not at all")
	})

	t.Run("CreatesQueues", func(t *testing.T) {
		f := setup(t, open)
		_, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "tuned", Priority: intp(5), Paused: boolp(true), Now: t0})
		require.NoError(t, err)
		f.submit("a", func(j *model.Job) { j.Spec.Queue = "fresh" })
		f.submit("b", func(j *model.Job) { j.Spec.Queue = "tuned" })

		q, err := f.s.GetQueue(f.ctx, &store.GetQueueParams{Name: "fresh"})
		require.NoError(t, err)
		require.Equal(t, "fresh", q.Name)
		require.Equal(t, 0, q.Priority)
		require.Equal(t, 0, q.MaxConcurrency)
		require.False(t, q.Paused)
		require.Equal(t, 1, q.Depth[model.RunQueued])

		q, err = f.s.GetQueue(f.ctx, &store.GetQueueParams{Name: "tuned"})
		require.NoError(t, err)
		require.Equal(t, 5, q.Priority, "an existing queue keeps its settings")
		require.True(t, q.Paused)
	})

	t.Run("ListJobs", func(t *testing.T) {
		f := setup(t, open)
		for _, name := range []string{"e", "c", "a", "d", "b"} {
			f.submit(name, func(j *model.Job) {
				if name == "b" || name == "d" {
					j.Spec.Queue = "q2"
				}
				j.Enabled = name != "c"
			})
		}
		f.createJob(f.job("c", func(j *model.Job) { j.Namespace = "ns2" }), nil)

		names := func(p *store.ListJobsParams) []string {
			t.Helper()
			var out []string
			for pages := 0; ; pages++ {
				require.Less(t, pages, 10)
				page, err := f.s.ListJobs(f.ctx, p)
				require.NoError(t, err)
				if p.Limit > 0 {
					require.LessOrEqual(t, len(page.Jobs), p.Limit)
				}
				for _, j := range page.Jobs {
					out = append(out, j.Namespace+"/"+j.Name)
				}
				if page.NextCursor == "" {
					return out
				}
				p.Cursor = page.NextCursor
			}
		}
		def := model.DefaultNamespace + "/"
		require.Equal(t, []string{def + "a", def + "b", def + "c", def + "d", def + "e"},
			names(&store.ListJobsParams{Namespace: model.DefaultNamespace}))
		require.Equal(t, []string{def + "a", def + "b", def + "c", def + "d", def + "e"},
			names(&store.ListJobsParams{Namespace: model.DefaultNamespace, Limit: 2}))
		require.Equal(t, []string{def + "b", def + "d"}, names(&store.ListJobsParams{Namespace: model.DefaultNamespace, Queue: "q2", Limit: 1}))
		require.Equal(t, []string{def + "c"}, names(&store.ListJobsParams{Namespace: model.DefaultNamespace, Enabled: boolp(false)}))
		require.Equal(t, []string{def + "a", def + "b", def + "d", def + "e"}, names(&store.ListJobsParams{Namespace: model.DefaultNamespace, Enabled: boolp(true), Limit: 3}))
		require.Equal(t, []string{"ns2/c"}, names(&store.ListJobsParams{Namespace: "ns2"}))
		require.Empty(t, names(&store.ListJobsParams{Namespace: "none"}))
		// A token's scope: only its namespaces, across them or within one.
		require.Equal(t, []string{"ns2/c"}, names(&store.ListJobsParams{Namespaces: []string{"ns2", "none"}, Limit: 1}))
		require.Equal(t, []string{def + "a", def + "b", def + "c", "ns2/c", def + "d", def + "e"},
			names(&store.ListJobsParams{Namespaces: []string{"ns2", model.DefaultNamespace}, Limit: 2}))
		require.Empty(t, names(&store.ListJobsParams{Namespace: model.DefaultNamespace, Namespaces: []string{"ns2"}}),
			"a namespace outside the scope lists nothing")

		// All namespaces: by name, then namespace; paging never skips nor repeats a job,
		// even where two jobs share a name.
		all := []string{def + "a", def + "b", def + "c", "ns2/c", def + "d", def + "e"}
		for limit := 1; limit <= 7; limit++ {
			require.Equal(t, all, names(&store.ListJobsParams{Limit: limit}), "limit %d", limit)
		}

		// A full last page says so: NextCursor is empty exactly when nothing follows.
		page, err := f.s.ListJobs(f.ctx, &store.ListJobsParams{Namespace: model.DefaultNamespace, Limit: 5})
		require.NoError(t, err)
		require.Len(t, page.Jobs, 5)
		require.Empty(t, page.NextCursor)
	})

	t.Run("UpdateJob", func(t *testing.T) {
		f := setup(t, open)
		j, r := f.submit("a")
		spec := j.Spec
		spec.Command = nil
		spec.Handler = "email"
		spec.Priority = 9
		spec.Retry.MaxAttempts = 4
		next := time.Date(2026, 5, 6, 7, 8, 9, 999, time.UTC)
		got, err := f.s.UpdateJob(f.ctx, &store.UpdateJobParams{ID: j.ID, Spec: spec, Enabled: false, NextFireAt: &next, Now: at(time.Hour)})
		require.NoError(t, err)
		want := *j
		want.Spec = spec
		want.Enabled = false
		want.NextFireAt = timep(micro(next))
		want.UpdatedAt = at(time.Hour)
		require.Equal(t, &want, got)

		read, err := f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j.ID})
		require.NoError(t, err)
		require.Equal(t, &want, read)

		// Clearing NextFireAt.
		got, err = f.s.UpdateJob(f.ctx, &store.UpdateJobParams{ID: j.ID, Spec: spec, Enabled: true, Now: at(2 * time.Hour)})
		require.NoError(t, err)
		require.Nil(t, got.NextFireAt)
		require.True(t, got.Enabled)

		// A lease carries the job's current spec; the queued run now is a handler run.
		ls, err := Leases(f.s.LeaseRuns(f.ctx, &store.LeaseRunsParams{WorkerID: "w", Max: 1, LeaseTTL: time.Minute, Handlers: []string{"email"}, Now: at(2 * time.Hour)}))
		require.NoError(t, err)
		require.Len(t, ls, 1)
		require.Equal(t, r.ID, ls[0].Run.ID)
		require.Equal(t, spec, ls[0].Spec)

		_, err = f.s.UpdateJob(f.ctx, &store.UpdateJobParams{ID: "missing", Spec: spec, Now: t0})
		require.ErrorIs(t, err, model.ErrNotFound)
	})

	t.Run("DeleteJob", func(t *testing.T) {
		f := setup(t, open)
		j, queued := f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 3 })
		running, scheduled, done := f.run(j), f.run(j), f.run(j)
		scheduled.Status, scheduled.ScheduledFor, scheduled.PendingCode = model.RunScheduled, at(time.Hour), model.PendingNotDue
		f.createRuns(running, scheduled, done)
		// Lease queued-first order: queued (older id), running, done.
		ls := f.lease("w", 3, at(time.Second))
		require.Equal(t, []string{queued.ID, running.ID, done.ID}, leaseIDs(ls))
		f.finish(ls[2], model.AttemptSucceeded, intp(0), at(2*time.Second))
		// Put the first back to queued: it failed once and is retried at once.
		f.finish(ls[0], model.AttemptFailed, intp(1), at(2*time.Second))

		now := at(time.Minute)
		changed, err := f.s.DeleteJob(f.ctx, &store.DeleteJobParams{ID: j.ID, Now: now})
		require.NoError(t, err)
		byID := map[string]*model.Run{}
		for _, r := range changed {
			byID[r.ID] = r
		}
		require.Len(t, byID, 3)
		for _, id := range []string{queued.ID, scheduled.ID} {
			require.Equal(t, model.RunCancelled, byID[id].Status)
			require.Equal(t, timep(now), byID[id].FinishedAt)
			require.Equal(t, model.PendingNone, byID[id].PendingCode)
		}
		require.Equal(t, model.RunRunning, byID[running.ID].Status)
		require.True(t, byID[running.ID].CancelRequested)
		require.Nil(t, byID[running.ID].FinishedAt)

		_, err = f.s.GetJob(f.ctx, &store.GetJobParams{IDOrName: j.ID})
		require.ErrorIs(t, err, model.ErrNotFound)
		// The runs stay readable; the finished one is untouched.
		require.Equal(t, model.RunSucceeded, f.getRun(done.ID).Status)
		require.Equal(t, model.RunCancelled, f.getRun(queued.ID).Status)

		// The worker stops the running one; it ends cancelled whatever it reports.
		r := f.finish(ls[1], model.AttemptFailed, intp(137), at(2*time.Minute))
		require.Equal(t, model.RunCancelled, r.Status)

		// A run of a deleted job cannot be retried: nothing could run it.
		_, err = f.s.RetryRun(f.ctx, &store.RetryRunParams{ID: queued.ID, Now: now})
		require.ErrorIs(t, err, model.ErrInvalidState)

		// The name is free again.
		f.submit("a")

		_, err = f.s.DeleteJob(f.ctx, &store.DeleteJobParams{ID: j.ID, Now: now})
		require.ErrorIs(t, err, model.ErrNotFound)
	})

	t.Run("BigBatch", func(t *testing.T) {
		f := setup(t, open)
		var batch []store.NewJob
		for i := range 250 {
			j := f.job(fmt.Sprintf("job-%03d", i), func(j *model.Job) {
				if i%2 == 0 {
					j.Spec.Queue = fmt.Sprintf("q%d", i%5)
				}
			})
			var r *model.Run
			if i%3 != 0 {
				r = f.run(j)
			}
			batch = append(batch, store.NewJob{Job: j, Run: r})
		}
		res, err := f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Jobs: batch, Now: t0})
		require.NoError(t, err)
		require.Len(t, res, len(batch))
		for i, r := range res {
			require.NoError(t, r.Err)
			require.Equal(t, batch[i].Job.ID, r.Job.ID)
			if batch[i].Run == nil {
				require.Nil(t, r.Run)
			} else {
				require.Equal(t, batch[i].Run.ID, r.Run.ID)
			}
		}
		page, err := f.s.ListJobs(f.ctx, &store.ListJobsParams{Limit: 1000})
		require.NoError(t, err)
		require.Len(t, page.Jobs, 250)
		qs, err := f.s.ListQueues(f.ctx)
		require.NoError(t, err)
		total := 0
		for _, q := range qs {
			total += q.Depth[model.RunQueued]
		}
		require.Equal(t, 166, total)

		// A bigger batch whose last entry clashes: the others still commit, with their runs.
		batch = batch[:0]
		for i := range 600 {
			name := fmt.Sprintf("more-%03d", i)
			if i == 599 {
				name = "job-000"
			}
			j := f.job(name)
			batch = append(batch, store.NewJob{Job: j, Run: f.run(j)})
		}
		res, err = f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Jobs: batch, Now: t0})
		require.NoError(t, err)
		for i, r := range res[:599] {
			require.NoError(t, r.Err)
			require.Equal(t, batch[i].Run.ID, r.Run.ID)
		}
		require.ErrorIs(t, res[599].Err, model.ErrConflict)
		page, err = f.s.ListJobs(f.ctx, &store.ListJobsParams{Limit: 1000})
		require.NoError(t, err)
		require.Len(t, page.Jobs, 849)
		q, err := f.s.GetQueue(f.ctx, &store.GetQueueParams{Name: model.DefaultQueue})
		require.NoError(t, err)
		require.Equal(t, 599+qs[0].Depth[model.RunQueued], q.Depth[model.RunQueued])
	})
}
