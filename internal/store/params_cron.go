package store

import (
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// DueJobsParams select the jobs whose next cron fire is due.
type DueJobsParams struct {
	Now   time.Time
	Limit int
}

// NextFireParams bound NextFire's search.
type NextFireParams struct {
	// After: only fires later than this count (zero: any). It is a bound, not the
	// current time: the cron loop passes the end of its lead.
	After time.Time
}

// Fire is one due job's cron fire: the runs it creates and where its schedule goes next.
type Fire struct {
	JobID string
	// Expect is the job's NextFireAt as the caller read it. The fire applies only if the
	// job still has it (and is enabled): otherwise another server fired it, or the schedule
	// changed, and the fire is stale.
	Expect time.Time
	// Next becomes the job's NextFireAt; nil when the schedule has no further instant.
	Next *time.Time
	// Runs are the cron runs to create (Trigger cron, ScheduledFor the instant each fires
	// for). A run whose (JobID, ScheduledFor) exists already is not created again.
	Runs []*model.Run
}

// FireJobsParams are the arguments of FireJobs.
type FireJobsParams struct {
	Fires []Fire
	// Term is the firing leader's term: the store checks, in the fire's transaction, that
	// the leader lease still has this term and has not expired, and otherwise refuses the
	// whole call with model.ErrNotLeader, writing nothing (a deposed leader that wakes late
	// cannot fire). Zero: not fenced (a caller outside leadership, such as a test).
	Term int64
	Now  time.Time
}

// FireResult is the outcome of one Fire.
type FireResult struct {
	// Stale: the job's NextFireAt was no longer Expect, or it was disabled or deleted;
	// nothing was written.
	Stale bool
	// Runs holds one result per Fire.Runs entry (nil when Stale).
	Runs []CreateRunResult
}

// SetWebhookSecretParams set a job's webhook secret.
type SetWebhookSecretParams struct {
	JobID  string
	Secret string
	Now    time.Time
}

// FiredInstantsParams select a job's cron instants that have runs.
type FiredInstantsParams struct {
	JobID    string
	From, To time.Time
}

// WebhookSecretParams name the job or pipeline whose webhook secret to read.
type WebhookSecretParams struct {
	JobID string // a job's or a pipeline's id
}

// AdmitHeldParams are the arguments of AdmitHeld.
type AdmitHeldParams struct {
	Now time.Time
}

// ReleaseDueParams are the arguments of ReleaseDue.
type ReleaseDueParams struct {
	Now time.Time
}

// NextQueueTurnParams are the arguments of NextQueueTurn.
type NextQueueTurnParams struct {
	Now time.Time
	// After is the instant of the caller's previous look: turns at or before it are known.
	After time.Time
}
