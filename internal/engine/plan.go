package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/placement"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// Plan is what a job would do if it were submitted now; see Engine.Plan.
type Plan struct {
	// Constrained says the job has requirements. An unconstrained run goes to whichever
	// worker asks first, so Placement.Fits then lists every active worker, in id order.
	Constrained bool
	// Workers counts the active workers that placement considered.
	Workers int
	// Placement is where the job's run fits now: Fits best first, or Code no_worker_fits
	// with a Reason and counts per constraint when it fits no worker.
	Placement placement.Verdict
	// Due is when the run that a submission creates at once would be due (now, run_at or
	// after delay); zero when a submission creates no run (a schedule, or disabled).
	Due time.Time
	// NextFires are the schedule's next instants, in its time zone (none without one).
	NextFires []time.Time
	// Existing is the job that already has the spec's name in its namespace, or nil. A
	// submission would be refused (409); an apply would update that job, and its active runs
	// count against the job's concurrency limit.
	Existing *model.Job
	// Holds say what would hold the run back now, in the order they apply; empty when
	// nothing would.
	Holds []Hold
}

// Hold is one reason a run would wait, in the words of a run's pending reason.
type Hold struct {
	Code   model.PendingCode
	Reason string
}

// Plan works out, creating nothing, where the run of job would go and what would hold it
// back if job were submitted now. job and run are what the API builds for a submission
// (run is nil when the job gets no run at once: it has a schedule, or is disabled); fires
// is how many next fire times of a schedule to list.
//
// It checks, in order: the job's queue (paused, at its max concurrency, under a rate limit:
// the queue need not exist yet); the job's concurrency limit, counted over the active
// runs (scheduled, queued, running) of the job that already has its name, when there is
// one and the limit is the job's own (a key template shares a limit among jobs of the
// namespace and is not counted here; neither is a rate limit on the job, nor a limit over
// maxPlanCount); a run_at or delay
// still ahead (not_due); and placement over the active workers, as ExplainPending does for
// a queued run.
func (e *Engine) Plan(ctx context.Context, job *model.Job, run *model.Run, fires int) (*Plan, error) {
	p := &Plan{Constrained: placement.Constrained(job.Spec.Requirements), NextFires: NextFireTimes(job, fires)}
	if run != nil {
		p.Due = run.ScheduledFor
	}

	qname := job.Spec.Queue
	if qname == "" {
		qname = model.DefaultQueue
	}
	q, err := e.store.GetQueue(ctx, &store.GetQueueParams{Name: qname})
	switch {
	case errors.Is(err, model.ErrNotFound): // a new queue: no pause, no limits
	case err != nil:
		return nil, fmt.Errorf("plan: %w", err)
	default:
		if code, reason := scheduler.QueueHold(q); code != model.PendingNone {
			p.Holds = append(p.Holds, Hold{code, reason})
		}
	}

	if job.Name != job.ID {
		got, err := e.store.GetJob(ctx, &store.GetJobParams{Namespace: job.Namespace, IDOrName: job.Name})
		switch {
		case errors.Is(err, model.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("plan: %w", err)
		case got.Name == job.Name && got.Namespace == job.Namespace: // not a job whose id is the name
			p.Existing = got
		}
	}
	if h, err := e.concurrencyHold(ctx, job, p.Existing); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	} else if h != nil {
		p.Holds = append(p.Holds, *h)
	}

	if run != nil && run.Status == model.RunScheduled {
		p.Holds = append(p.Holds, Hold{run.PendingCode, run.PendingReason}) // not_due, as the store says it
	}

	rooms, err := e.activeRooms(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	p.Workers = len(rooms)
	switch {
	case p.Constrained || len(rooms) == 0:
		p.Placement = placement.Explain(rooms, job.Spec.Requirements)
	default: // every worker fits; none is better
		for _, r := range rooms {
			p.Placement.Fits = append(p.Placement.Fits, r.WorkerID)
		}
	}
	if p.Placement.Code != model.PendingNone {
		p.Holds = append(p.Holds, Hold{p.Placement.Code, p.Placement.Reason})
	}
	return p, nil
}

// concurrencyHold says whether a new run of job would be held (or skipped, or replace
// another) by the job's own concurrency limit, given existing, the job of that name (nil:
// none, so no run counts yet). It returns nil when the limit has room, or when the limit is
// not one it counts (see Plan).
func (e *Engine) concurrencyHold(ctx context.Context, job, existing *model.Job) (*Hold, error) {
	rc := scheduler.RunConcurrency(job, nil)
	if existing == nil || rc == nil || rc.Max == 0 || rc.Max > maxPlanCount || job.Spec.Concurrency.Key != "" {
		return nil, nil
	}
	active := 0
	for _, s := range []model.RunStatus{model.RunScheduled, model.RunQueued, model.RunRunning} {
		page, err := e.store.ListRuns(ctx, &store.ListRunsParams{JobID: existing.ID, Status: s, Limit: rc.Max - active})
		if err != nil {
			return nil, fmt.Errorf("count active runs of %s: %w", existing.ID, err)
		}
		if active += len(page.Runs); active >= rc.Max {
			break
		}
	}
	reason := scheduler.AdmissionPreview(rc, active, existing.Name)
	if reason == "" {
		return nil, nil
	}
	return &Hold{model.PendingConcurrencyLimit, reason}, nil
}

// maxPlanCount is the largest concurrency limit Plan counts the active runs of (it lists
// them, up to the limit).
const maxPlanCount = 1000
