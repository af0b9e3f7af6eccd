package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// applyJob serves PUT /v1/jobs/{id}: create the job named {id} from the spec, or make the
// job of that name match it (what `stint apply` sends for each job of a file). The answer
// says what happened and which fields changed; ?dry_run=true says it without doing it. It
// manages definitions: a job without a schedule gets no run here (it runs when triggered),
// unlike POST /v1/jobs; a changed schedule (or enabled flag) fires by its new rule from now
// on.
func (a *API) applyJob(w http.ResponseWriter, r *http.Request) error {
	var spec apitype.JobSpec
	if err := decodeBody(r, &spec, false); err != nil {
		return err
	}
	name := r.PathValue("id")
	if spec.Name != "" && spec.Name != name {
		return invalidField("name", fmt.Sprintf("must be the name in the path (%q) or left out", name))
	}
	spec.Name = name
	ns, err := namespaceParam(r.URL.Query())
	if err != nil {
		return err
	}
	if spec.Namespace == "" {
		spec.Namespace = ns
	} else if spec.Namespace != ns {
		return invalidField("namespace", fmt.Sprintf("must be the ?namespace= of the call (%q) or left out", ns))
	}
	if err := actIn(r.Context(), "namespace", ns); err != nil {
		return err
	}
	dryRun := false
	if s := r.URL.Query().Get("dry_run"); s != "" {
		if dryRun, err = strconv.ParseBool(s); err != nil {
			return invalidField("dry_run", "must be true or false")
		}
	}
	if len(spec.DependsOn) > 0 {
		return invalidField("depends_on", "applies to a job's first run, which PUT /v1/jobs/{name} does not create: "+
			"submit the run with POST /v1/jobs or POST /v1/dags")
	}
	cur, err := a.store.GetJob(r.Context(), &store.GetJobParams{Namespace: ns, IDOrName: name})
	switch {
	case errors.Is(err, model.ErrNotFound) || err == nil && (cur.Name != name || cur.Namespace != ns):
		cur = nil // none, or the name is another job's id
	case err != nil:
		return fmt.Errorf("apply job %s: %w", name, err)
	}
	sl := sealing{keys: a.keys}
	if cur != nil {
		sl.prev = cur.Spec.SecretEnv // secret_env values of "***" keep these
	}
	vj, errs := buildDefinition(&spec, "", a.clock.Now(), a.lim, sl)
	if len(errs) > 0 {
		return invalidFields(errs)
	}
	if cur == nil {
		return a.applyCreate(w, r, vj, dryRun)
	}
	changes, err := specChanges(cur, vj.Job)
	if err != nil {
		return err
	}
	out := apitype.ApplyResponse{Action: "unchanged", Changes: changes, Job: jobToAPI(cur, nil)}
	if len(changes) == 0 || dryRun {
		if len(changes) > 0 {
			out.Action = "updated"
		}
		out.DryRun = dryRun
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	reschedule := slices.Contains(changes, "schedule") || slices.Contains(changes, "enabled")
	updated, err := a.storeUpdate(r.Context(), cur, vj.Job.Spec, vj.Job.Enabled, reschedule)
	if err != nil {
		return fmt.Errorf("apply job %s: %w", name, err)
	}
	out.Action, out.Job = "updated", jobToAPI(updated, nil)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// applyCreate creates a job for applyJob.
func (a *API) applyCreate(w http.ResponseWriter, r *http.Request, vj *validJob, dryRun bool) error {
	if dryRun {
		writeJSON(w, http.StatusOK, apitype.ApplyResponse{Action: "created", DryRun: true, Job: jobToAPI(vj.Job, nil)})
		return nil
	}
	res, err := a.eng.SubmitJobs(r.Context(), []store.NewJob{{Job: vj.Job, Run: vj.Run}})
	if err != nil {
		return err
	}
	item, _, err := createResult(res[0], "", vj.Job)
	if err != nil {
		return err
	}
	noteAudit(r.Context(), "job:"+item.Job.ID, nil)
	writeJSON(w, http.StatusCreated, apitype.ApplyResponse{Action: "created", Job: item.Job})
	return nil
}

// specChanges names the fields of a job's definition (as the API writes them) that differ
// between cur and next, in order.
func specChanges(cur, next *model.Job) ([]string, error) {
	a, err := definition(cur)
	if err != nil {
		return nil, err
	}
	b, err := definition(next)
	if err != nil {
		return nil, err
	}
	keys := maps.Clone(a)
	maps.Copy(keys, b)
	var out []string
	for _, k := range sortedKeys(keys) {
		if string(a[k]) != string(b[k]) {
			out = append(out, k)
		}
	}
	return out, nil
}

// definition is the part of a job that a spec sets, as JSON fields; secret_env has the
// sealed values, which stay the same while the values do (sealSecretEnv).
func definition(j *model.Job) (map[string]json.RawMessage, error) {
	v := jobToAPI(&model.Job{Spec: j.Spec, Enabled: j.Enabled}, nil)
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode job: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode job: %w", err)
	}
	for _, k := range []string{"id", "namespace", "name", "created_at", "updated_at", "next_fire_times", "next_fire_times_local", "last_run", "idempotency_key"} {
		delete(m, k)
	}
	if len(j.Spec.SecretEnv) > 0 {
		if m["secret_env"], err = json.Marshal(j.Spec.SecretEnv); err != nil {
			return nil, fmt.Errorf("encode secret env: %w", err)
		}
	}
	return m, nil
}
