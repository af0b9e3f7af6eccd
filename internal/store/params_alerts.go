package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/model"
)

// AlertFactsParams ask for the facts the alert rules read (alerting.Facts).
type AlertFactsParams struct {
	Now time.Time
	// FailedAfter: the jobs with a run that failed after this instant get their streak
	// read, and so do StreakJobs (those with a job_failing alert firing).
	FailedAfter time.Time
	StreakJobs  []string
	// Streak is how many of a job's latest ended (succeeded or failed) runs to read.
	Streak int
	// RunningBefore: the running runs whose attempt started at or before it are read.
	RunningBefore time.Time
	// SkipScans leaves out the cron jobs, the queues and the running runs (Facts.Cron,
	// Queues and Running empty, ScansUnread set): a row per scheduled job, a count of every
	// queued run (a backlog of a million is a scan of a million index entries), and a walk
	// of the running runs' index, with the entries of every run that ended since the last
	// vacuum. The alerter makes them at most once per interval.
	SkipScans bool
}

// CronLatest is how many of a cron job's latest runs whose instant came AlertFacts reads.
const CronLatest = 2

// AlertJob is a job as the alert rules read it, from its columns and its stored spec (a
// model.JobSpec as JSON): only the spec's timeout and alert thresholds are decoded.
func AlertJob(id, ns, name string, spec []byte) (alerting.Job, error) {
	var sp struct {
		Timeout time.Duration    `json:"timeout"`
		Alerts  *model.JobAlerts `json:"alerts"`
	}
	if err := json.Unmarshal(spec, &sp); err != nil {
		return alerting.Job{}, fmt.Errorf("decode spec of job %s: %w", id, err)
	}
	return alerting.Job{ID: id, Namespace: ns, Name: name, Alerts: sp.Alerts, Timeout: sp.Timeout}, nil
}

// ApplyAlertsParams persist what alerting.Evaluate decided: new alerts (with their IDs),
// resolved ones and updated ones.
type ApplyAlertsParams struct {
	Fire    []alerting.Alert
	Resolve []alerting.Alert
	Update  []alerting.Alert
}

// ListAlertsParams filter the alert history.
type ListAlertsParams struct {
	State  alerting.State // empty: both
	Before string         // an alert id: only older ones (paging)
	Limit  int            // <= 0: 100
}

// AppendAuditParams add entries to the audit log.
type AppendAuditParams struct {
	Entries []*model.AuditEntry
}

// ListAuditParams filter the audit log.
type ListAuditParams struct {
	Target string // exact target ("job:<id>"), empty: any
	Actor  string // exact actor, empty: any
	Before string // an entry id: only older ones (paging)
	Limit  int    // <= 0: 100
}

// QueueAlertsColumn is how both engines store UpdateQueueParams.Alerts: whether to set the
// column, and its value (JSON; nil for a zero QueueAlerts, which removes them).
func QueueAlertsColumn(a *model.QueueAlerts) (set bool, value []byte, err error) {
	if a == nil {
		return false, nil, nil
	}
	if *a == (model.QueueAlerts{}) {
		return true, nil, nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return false, nil, fmt.Errorf("encode queue alerts: %w", err)
	}
	return true, b, nil
}

// DecodeQueueAlerts decodes a queue's stored alert thresholds (the queues.alerts column of
// both engines; empty or NULL: none).
func DecodeQueueAlerts(b []byte) (*model.QueueAlerts, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var a model.QueueAlerts
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("decode alerts: %w", err)
	}
	return &a, nil
}
