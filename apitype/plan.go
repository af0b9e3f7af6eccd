package apitype

import "time"

// PlanResponse answers POST /v1/plan: what the job spec of the request would do if it
// were submitted now. Nothing is created.
type PlanResponse struct {
	// Placement is where its run would go among the active workers.
	Placement PlanPlacement `json:"placement"`
	// DueAt is when the run a submission creates at once would be due: now, run_at, or
	// after delay. Absent when a submission creates no run (a schedule, or enabled false).
	DueAt *time.Time `json:"due_at,omitempty"`
	// NextFireTimes are the schedule's next instants in UTC; NextFireTimesLocal the same
	// instants in the schedule's time zone (as GET /v1/jobs/{id} shows them).
	NextFireTimes      []time.Time `json:"next_fire_times,omitempty"`
	NextFireTimesLocal []time.Time `json:"next_fire_times_local,omitempty"`
	// HeldBy lists what would hold its run back now, in the order it applies, each in the
	// words of a run's pending_code and pending_reason; empty when nothing would.
	HeldBy []PlanHold `json:"held_by"`
	// Enabled is the spec's enabled flag: a disabled job gets no run.
	Enabled bool `json:"enabled"`
	// ExistingJob is the id of the job that already has the spec's name in its namespace:
	// POST /v1/jobs would refuse the spec (409), PUT /v1/jobs/{name} would update that job.
	ExistingJob string `json:"existing_job,omitempty"`
}

// PlanPlacement is where a run would go now.
type PlanPlacement struct {
	// Constrained says the spec has requirements. An unconstrained run goes to whichever
	// worker asks first: Fits then lists every active worker, by id, and Worker is empty.
	Constrained bool `json:"constrained"`
	// Workers counts the active workers considered.
	Workers int `json:"workers"`
	// Fits lists the workers the run fits now (labels, and free capacity), best fit first.
	Fits []string `json:"fits"`
	// Worker is the best fit: the worker a constrained run goes to.
	Worker string `json:"worker,omitempty"`
	// Code is no_worker_fits when the run fits no worker now, with Reason in words such as
	// "no worker fits: 3 registered, 3 lack gpu >= 4".
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Never counts, per constraint ("gpu >= 4", "label zone=eu"), the workers that can
	// never meet it; Busy, those that meet it by what they declared but not with what is
	// free now. Both are set only when nothing fits.
	Never map[string]int `json:"never,omitempty"`
	Busy  map[string]int `json:"busy,omitempty"`
}

// PlanHold is one reason a run would wait.
type PlanHold struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
}
