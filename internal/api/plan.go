package api

import (
	"net/http"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
)

// plan serves POST /v1/plan: the body is a job spec, validated exactly as POST /v1/jobs
// validates it (a bad field is a 400 naming it); the answer says where its run would go,
// when it would fire or fall due, and what would hold it back now. Nothing is created.
func (a *API) plan(w http.ResponseWriter, r *http.Request) error {
	var spec apitype.JobSpec
	if err := decodeBody(r, &spec, false); err != nil {
		return err
	}
	vj, errs := buildJob(&spec, "", a.clock.Now(), a.lim, sealing{keys: a.keys})
	if len(errs) > 0 {
		return invalidFields(errs)
	}
	if err := actIn(r.Context(), "namespace", vj.Job.Namespace); err != nil {
		return err
	}
	p, err := a.eng.Plan(r.Context(), vj.Job, vj.Run, nextFireCount)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, planToAPI(vj.Job, p))
	return nil
}

// planToAPI turns an engine plan of job into its wire form. Times are UTC, except the local
// fire times.
func planToAPI(job *model.Job, p *engine.Plan) *apitype.PlanResponse {
	v := p.Placement
	out := &apitype.PlanResponse{
		Placement: apitype.PlanPlacement{
			Constrained: p.Constrained,
			Workers:     p.Workers,
			Fits:        v.Fits,
			Code:        string(v.Code),
			Reason:      v.Reason,
		},
		HeldBy:  make([]apitype.PlanHold, len(p.Holds)),
		Enabled: job.Enabled,
	}
	if out.Placement.Fits == nil {
		out.Placement.Fits = []string{}
	}
	if p.Constrained && len(v.Fits) > 0 {
		out.Placement.Worker = v.Fits[0]
	}
	if len(v.Fits) == 0 {
		if len(v.Never) > 0 {
			out.Placement.Never = v.Never
		}
		if len(v.Busy) > 0 {
			out.Placement.Busy = v.Busy
		}
	}
	if !p.Due.IsZero() {
		due := p.Due.UTC()
		out.DueAt = &due
	}
	for _, t := range p.NextFires {
		out.NextFireTimes = append(out.NextFireTimes, t.UTC())
		out.NextFireTimesLocal = append(out.NextFireTimesLocal, t)
	}
	for i, h := range p.Holds {
		out.HeldBy[i] = apitype.PlanHold{Code: string(h.Code), Reason: h.Reason}
	}
	if p.Existing != nil {
		out.ExistingJob = p.Existing.ID
	}
	return out
}
