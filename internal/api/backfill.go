package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/cron"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// maxBackfill caps the instants of one backfill.
const maxBackfill = 10000

// backfill serves POST /v1/jobs/{id}/backfill: one cron run per instant of the range that
// has none yet, up to now (scheduler.BackfillInstants: instants after now are left to the
// schedule, and an @every job's instants are those of its own grid). Backfilled runs are cron runs of their instant, so the store's one run per
// (job, instant) rule (invariant 4) keeps them from doubling a fire or each other.
func (a *API) backfill(w http.ResponseWriter, r *http.Request) error {
	var req apitype.BackfillRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	fe := &fieldErrors{}
	if req.From.IsZero() {
		fe.add("from", "is required: an RFC 3339 time")
	}
	if req.To.IsZero() {
		fe.add("to", "is required: an RFC 3339 time")
	} else if req.To.Before(req.From) {
		fe.add("to", "must not be before from")
	}
	if len(fe.errs) > 0 {
		return invalidFields(fe.errs)
	}
	j, err := a.findJob(r)
	if err != nil {
		return err
	}
	if j.Spec.Schedule == nil {
		return &httpError{status: http.StatusConflict, detail: fmt.Sprintf("job %q has no schedule to backfill", j.Name)}
	}
	sc, err := cron.Parse(j.Spec.Schedule.Cron, j.Spec.Schedule.Timezone)
	if err != nil {
		return fmt.Errorf("backfill: job %s: %w", j.ID, err)
	}
	now := a.clock.Now()
	var fired []time.Time
	readFired := func() (err error) {
		fired, err = a.store.FiredInstants(r.Context(), &store.FiredInstantsParams{JobID: j.ID, From: req.From, To: req.To})
		return err
	}
	anchored := sc.Every() == 0 || j.NextFireAt != nil
	if !anchored { // the fired instants anchor the grid (GridAnchor)
		if err := readFired(); err != nil {
			return err
		}
	}
	instants, more := scheduler.BackfillInstants(sc, scheduler.GridAnchor(j, fired), req.From, req.To, now, maxBackfill)
	if more {
		return invalidField("to", fmt.Sprintf("the range holds more than %d instants: backfill it in parts", maxBackfill))
	}
	if anchored {
		if err := readFired(); err != nil {
			return err
		}
	}
	had := make(map[time.Time]bool, len(fired))
	for _, t := range fired {
		had[t.UTC()] = true
	}
	out := apitype.BackfillResponse{DryRun: req.DryRun, Instants: make([]apitype.BackfillInstant, len(instants))}
	var runs []*model.Run
	var idx []int
	for i, at := range instants {
		out.Instants[i] = apitype.BackfillInstant{At: at.UTC(), AtLocal: at.In(sc.Location()), Existed: had[at.UTC()]}
		if had[at.UTC()] || req.DryRun {
			continue
		}
		runs = append(runs, scheduler.NewCronRun(id.New(now), j, at, now))
		idx = append(idx, i)
	}
	if len(runs) > 0 {
		res, err := a.eng.Trigger(r.Context(), runs)
		if err != nil {
			return err
		}
		for k, rr := range res {
			if rr.Err != nil {
				return fmt.Errorf("backfill %s: %w", instants[idx[k]], rr.Err)
			}
			out.Instants[idx[k]].RunID = rr.Run.ID
			if rr.Existing {
				out.Instants[idx[k]].Existed = true // fired meanwhile
			} else {
				out.Created++
			}
		}
	}
	status := http.StatusOK
	if out.Created > 0 {
		status = http.StatusCreated
	}
	writeJSON(w, status, out)
	return nil
}
