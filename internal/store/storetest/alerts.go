package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func testAlerts(t *testing.T, open OpenFunc) {
	t.Run("FireResolveList", func(t *testing.T) {
		f := setup(t, open)
		a1 := alerting.Alert{ID: f.id(), Rule: alerting.RuleWorkerLost, Subject: "worker:w1", State: alerting.Firing,
			Summary: "worker w1 lost", Link: "/ui/workers", StartedAt: t0}
		a2 := alerting.Alert{ID: f.id(), Rule: alerting.RuleQueueBacklog, Subject: "queue:q", State: alerting.Firing,
			Summary: "queue q: 11 runs queued", Link: "/ui/queues", StartedAt: at(time.Second)}
		require.NoError(t, f.s.ApplyAlerts(f.ctx, &store.ApplyAlertsParams{Fire: []alerting.Alert{a1, a2}}))

		// One firing alert per (rule, subject): a second is a conflict and writes nothing.
		dup := a1
		dup.ID = f.id()
		a3 := alerting.Alert{ID: f.id(), Rule: alerting.RuleWorkerLost, Subject: "worker:w2", State: alerting.Firing, StartedAt: t0}
		err := f.s.ApplyAlerts(f.ctx, &store.ApplyAlertsParams{Fire: []alerting.Alert{a3, dup}})
		require.ErrorIs(t, err, model.ErrConflict)

		got, err := f.s.ListAlerts(f.ctx, &store.ListAlertsParams{})
		require.NoError(t, err)
		require.Equal(t, []alerting.Alert{a2, a1}, got, "newest first; the conflicting batch wrote nothing")

		clear := at(time.Minute)
		a1.ClearSince = &clear
		require.NoError(t, f.s.ApplyAlerts(f.ctx, &store.ApplyAlertsParams{Update: []alerting.Alert{a1}}))
		resolved := at(2 * time.Minute)
		a1.State, a1.ResolvedAt = alerting.Resolved, &resolved
		require.NoError(t, f.s.ApplyAlerts(f.ctx, &store.ApplyAlertsParams{Resolve: []alerting.Alert{a1}}))

		firing, err := f.s.ListAlerts(f.ctx, &store.ListAlertsParams{State: alerting.Firing})
		require.NoError(t, err)
		require.Equal(t, []alerting.Alert{a2}, firing)
		done, err := f.s.ListAlerts(f.ctx, &store.ListAlertsParams{State: alerting.Resolved})
		require.NoError(t, err)
		require.Equal(t, []alerting.Alert{a1}, done)

		// Once resolved, the pair may fire again; resolving a resolved alert changes nothing.
		again := alerting.Alert{ID: f.id(), Rule: a1.Rule, Subject: a1.Subject, State: alerting.Firing, Summary: "again", StartedAt: at(time.Hour)}
		later := at(2 * time.Hour)
		stale := a1
		stale.ResolvedAt = &later
		require.NoError(t, f.s.ApplyAlerts(f.ctx, &store.ApplyAlertsParams{Fire: []alerting.Alert{again}, Resolve: []alerting.Alert{stale}}))
		page, err := f.s.ListAlerts(f.ctx, &store.ListAlertsParams{Limit: 2})
		require.NoError(t, err)
		require.Equal(t, []alerting.Alert{again, a2}, page)
		page, err = f.s.ListAlerts(f.ctx, &store.ListAlertsParams{Before: a2.ID})
		require.NoError(t, err)
		require.Equal(t, []alerting.Alert{a1}, page, "paging; the first resolution stands")
	})

	t.Run("Facts", func(t *testing.T) {
		f := setup(t, open)
		// A job failing twice after a success, and one succeeding.
		failing, _ := f.submit("failing", func(j *model.Job) {
			j.Spec.Queue, j.Spec.Timeout = "fq", time.Minute
			j.Spec.Alerts = &model.JobAlerts{ConsecutiveFailures: 2}
		})
		f.createRuns(f.run(failing), f.run(failing))
		okJob, _ := f.submit("ok", func(j *model.Job) { j.Spec.Queue = "aq" }) // leased first: queues go by name
		f.finish(f.leaseOne("w", at(time.Second)), model.AttemptSucceeded, intp(0), at(2*time.Second))
		for i := range 3 {
			status := model.AttemptFailed
			if i == 0 {
				status = model.AttemptSucceeded
			}
			f.finish(f.leaseOne("w", at(3*time.Second)), status, intp(1), at(time.Duration(4+i)*time.Second))
		}
		facts, err := f.s.AlertFacts(f.ctx, &store.AlertFactsParams{Now: at(time.Minute), FailedAfter: at(4 * time.Second),
			StreakJobs: []string{okJob.ID, "gone"}, Streak: 5, RunningBefore: at(time.Minute)})
		require.NoError(t, err)
		byJob := map[string]alerting.Streak{}
		for _, s := range facts.Streaks {
			byJob[s.Job.ID] = s
		}
		require.Len(t, byJob, 3, "jobs that failed after FailedAfter, and those asked for")
		require.Equal(t, []model.RunStatus{model.RunFailed, model.RunFailed, model.RunSucceeded}, byJob[failing.ID].Recent)
		require.Equal(t, alerting.Job{ID: failing.ID, Namespace: "default", Name: "failing",
			Alerts: &model.JobAlerts{ConsecutiveFailures: 2}, Timeout: time.Minute}, byJob[failing.ID].Job)
		require.Equal(t, []model.RunStatus{model.RunSucceeded}, byJob[okJob.ID].Recent)
		require.Empty(t, byJob["gone"].Recent)
		require.Empty(t, facts.Cron)
		require.Empty(t, facts.Running)

		facts, err = f.s.AlertFacts(f.ctx, &store.AlertFactsParams{Now: at(time.Minute), FailedAfter: at(time.Hour), Streak: 5, RunningBefore: t0})
		require.NoError(t, err)
		require.Empty(t, facts.Streaks, "no run failed after FailedAfter")
	})

	t.Run("FactsOfCronQueuesWorkersRunning", func(t *testing.T) {
		f := setup(t, open)
		next := at(time.Hour)
		cj := f.job("nightly", func(j *model.Job) {
			j.Spec.Queue = "cq"
			j.Spec.Schedule = &model.Schedule{Cron: "0 * * * *"}
			j.NextFireAt = &next
		})
		f.createJob(cj, nil)
		// A second cron job, none of whose instants came yet: no runs, its own thresholds.
		quiet := f.job("quiet", func(j *model.Job) {
			j.Spec.Schedule = &model.Schedule{Cron: "0 * * * *"}
			j.Spec.Timeout, j.Spec.Alerts = time.Hour, &model.JobAlerts{LateAfter: time.Minute}
			j.NextFireAt = &next
		})
		f.createJob(quiet, nil)
		f.createRuns(
			f.run(cj, cronAt(at(-2*time.Hour))),
			f.run(cj, cronAt(at(-time.Hour)), func(r *model.Run) { r.Queue = "cq" }),
			f.run(cj, cronAt(at(-3*time.Hour))),
			f.run(cj, cronAt(at(time.Hour)), func(r *model.Run) { r.Status, r.ScheduledFor = model.RunScheduled, at(time.Hour) }),
		)
		_, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "cq", Paused: boolp(true),
			Alerts: &model.QueueAlerts{MaxBacklog: 2, MaxAge: time.Minute}, Now: t0})
		require.NoError(t, err)
		run, _ := f.submit("long", func(j *model.Job) { j.Spec.Alerts = &model.JobAlerts{MaxDuration: time.Minute} })
		f.register("w1", "s1", t0)
		f.register("w2", "s2", t0)
		require.NoError(t, f.s.SetWorkerState(f.ctx, &store.SetWorkerStateParams{ID: "w2", State: model.WorkerLost}))
		l := f.leaseOne("w1", at(time.Second))
		require.Equal(t, run.ID, l.Run.JobID)

		facts, err := f.s.AlertFacts(f.ctx, &store.AlertFactsParams{Now: t0, FailedAfter: t0, Streak: 3, RunningBefore: at(time.Second)})
		require.NoError(t, err)
		require.Len(t, facts.Cron, 2)
		require.Equal(t, "quiet", facts.Cron[1].Job.Name, "by job id")
		require.Empty(t, facts.Cron[1].Latest)
		require.Equal(t, time.Hour, facts.Cron[1].Job.Timeout)
		require.Equal(t, &model.JobAlerts{LateAfter: time.Minute}, facts.Cron[1].Job.Alerts)
		c := facts.Cron[0]
		require.Equal(t, "nightly", c.Job.Name)
		require.Equal(t, next, *c.NextFireAt)
		require.Len(t, c.Latest, store.CronLatest, "the latest whose instant came, newest first")
		require.Equal(t, at(-time.Hour), c.Latest[0].Instant)
		require.Equal(t, at(-2*time.Hour), c.Latest[1].Instant)
		require.Equal(t, model.RunQueued, c.Latest[0].Status)
		require.Equal(t, "cq", c.Latest[0].Queue)
		require.Nil(t, c.Latest[0].StartedAt)

		queues := map[string]alerting.Queue{}
		for _, q := range facts.Queues {
			queues[q.Name] = q
		}
		require.True(t, queues["cq"].Paused)
		require.Equal(t, &model.QueueAlerts{MaxBacklog: 2, MaxAge: time.Minute}, queues["cq"].Alerts)
		require.Equal(t, 3, queues["cq"].Queued)
		require.Equal(t, at(-3*time.Hour), *queues["cq"].OldestQueued)
		require.Equal(t, 0, queues[model.DefaultQueue].Queued)
		require.Nil(t, queues[model.DefaultQueue].OldestQueued)

		require.Equal(t, []alerting.Worker{{ID: "w1", State: model.WorkerActive, LastHeartbeat: t0},
			{ID: "w2", State: model.WorkerLost, LastHeartbeat: t0}}, facts.Workers)
		require.Len(t, facts.Running, 1)
		require.Equal(t, l.Run.ID, facts.Running[0].ID)
		require.Equal(t, at(time.Second), facts.Running[0].AttemptStarted)
		require.Equal(t, &model.JobAlerts{MaxDuration: time.Minute}, facts.Running[0].Job.Alerts)

		facts, err = f.s.AlertFacts(f.ctx, &store.AlertFactsParams{Now: t0, FailedAfter: t0, Streak: 3, RunningBefore: t0})
		require.NoError(t, err)
		require.Empty(t, facts.Running, "started after RunningBefore")
		require.False(t, facts.ScansUnread)

		facts, err = f.s.AlertFacts(f.ctx, &store.AlertFactsParams{Now: t0, FailedAfter: t0, Streak: 3,
			RunningBefore: at(time.Second), SkipScans: true})
		require.NoError(t, err)
		require.True(t, facts.ScansUnread)
		require.Empty(t, facts.Cron, "the cron jobs left out")
		require.Empty(t, facts.Queues, "the queues left out")
		require.Empty(t, facts.Running, "the running runs left out")
		require.Len(t, facts.Workers, 2, "the rest read as before")
	})

	t.Run("QueueAlertsSetAndRemoved", func(t *testing.T) {
		f := setup(t, open)
		q, err := f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "q", Alerts: &model.QueueAlerts{Off: true}, Now: t0})
		require.NoError(t, err)
		require.Equal(t, &model.QueueAlerts{Off: true}, q.Alerts)
		q, err = f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "q", Priority: intp(1), Now: t0})
		require.NoError(t, err)
		require.Equal(t, &model.QueueAlerts{Off: true}, q.Alerts, "unset: kept")
		q, err = f.s.UpdateQueue(f.ctx, &store.UpdateQueueParams{Name: "q", Alerts: &model.QueueAlerts{}, Now: t0})
		require.NoError(t, err)
		require.Nil(t, q.Alerts, "a zero QueueAlerts removes them")
	})
}

func testAudit(t *testing.T, open OpenFunc) {
	t.Run("AppendAndList", func(t *testing.T) {
		f := setup(t, open)
		e1 := &model.AuditEntry{ID: f.id(), At: t0, Actor: "ci (t1)", Role: model.RoleOperator, Action: "job.create",
			Target: "job:j1", After: rawJSON(`{"name": "a", "secret_env": {"K": "********"}}`)}
		e2 := &model.AuditEntry{ID: f.id(), At: at(time.Second), Actor: "admin (t2)", Role: model.RoleAdmin, Action: "job.update",
			Target: "job:j1", Before: rawJSON(`{"name": "a"}`), After: rawJSON(`{"name": "b"}`)}
		e3 := &model.AuditEntry{ID: f.id(), At: at(2 * time.Second), Actor: "dev", Action: "queue.update", Target: "queue:q"}
		require.NoError(t, f.s.AppendAudit(f.ctx, &store.AppendAuditParams{Entries: []*model.AuditEntry{e1}}))
		require.NoError(t, f.s.AppendAudit(f.ctx, &store.AppendAuditParams{Entries: []*model.AuditEntry{e2, e3}}))
		e4 := &model.AuditEntry{ID: f.id(), At: t0, Actor: "dev", Action: "job.delete", Target: "job:j1"}
		err := f.s.AppendAudit(f.ctx, &store.AppendAuditParams{Entries: []*model.AuditEntry{e4, e1}})
		require.ErrorIs(t, err, model.ErrConflict, "an id taken")

		all, err := f.s.ListAudit(f.ctx, &store.ListAuditParams{})
		require.NoError(t, err)
		require.Len(t, all, 3, "a failed batch writes nothing")
		require.Equal(t, []string{e3.ID, e2.ID, e1.ID}, []string{all[0].ID, all[1].ID, all[2].ID})
		require.Equal(t, e3, all[0], "no before nor after: nil")
		require.JSONEq(t, string(e2.Before), string(all[1].Before))
		require.JSONEq(t, string(e2.After), string(all[1].After))
		require.Equal(t, e2.Actor, all[1].Actor)
		require.Equal(t, e2.At, all[1].At)
		require.Equal(t, model.RoleAdmin, all[1].Role)

		byTarget, err := f.s.ListAudit(f.ctx, &store.ListAuditParams{Target: "job:j1"})
		require.NoError(t, err)
		require.Len(t, byTarget, 2)
		byActor, err := f.s.ListAudit(f.ctx, &store.ListAuditParams{Actor: "ci (t1)"})
		require.NoError(t, err)
		require.Len(t, byActor, 1)
		require.Equal(t, e1.ID, byActor[0].ID)
		page, err := f.s.ListAudit(f.ctx, &store.ListAuditParams{Before: e3.ID, Limit: 1})
		require.NoError(t, err)
		require.Len(t, page, 1)
		require.Equal(t, e2.ID, page[0].ID)
	})
}
