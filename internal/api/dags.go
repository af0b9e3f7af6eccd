package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/secret"
	"github.com/stint-dev/stint/internal/store"
)

// dagEntry names entry name of a DAG request in field paths: "runs.load.".
func dagEntry(name string) string { return "runs." + name + "." }

// createDAG serves POST /v1/dags: runs with the dependencies between them, each entry a job
// spec validated as POST /v1/jobs validates it (fields named runs.<entry>.), whose
// depends_on may name other entries (ref) as well as existing runs (run). Everything is
// checked first (refs, cycles, upstream runs, names) and then created in one transaction:
// all or nothing. Validation and ordering are linear in entries plus edges.
func (a *API) createDAG(w http.ResponseWriter, r *http.Request) error {
	var req apitype.DAGRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	plan, err := buildDAG(&req, a.clock.Now(), a.lim, a.keys)
	if err != nil {
		return err
	}
	if err := actIn(r.Context(), "namespace", plan.ns); err != nil {
		return err
	}
	names, entries := plan.names, plan.entries
	if errs, err := a.missingUpstream(r.Context(), plan.ups); err != nil {
		return err
	} else if len(errs) > 0 {
		return batchErrors(http.StatusBadRequest, errs)
	}
	jobs := make([]store.NewJob, len(entries))
	for i, en := range entries {
		jobs[i] = store.NewJob{Job: en.Job, Run: en.Run}
	}
	entryOf := func(i int) string { return dagEntry(names[i]) }
	if errs, err := a.takenNames(r.Context(), jobs, entryOf); err != nil {
		return err
	} else if len(errs) > 0 {
		return batchErrors(http.StatusConflict, errs)
	}

	g, err := a.eng.SubmitGraph(r.Context(), entries)
	switch {
	case errors.Is(err, model.ErrConflict):
		// A name taken since the check above, or an idempotency key already used.
		if errs, cerr := a.takenNames(r.Context(), jobs, entryOf); cerr == nil && len(errs) > 0 {
			return batchErrors(http.StatusConflict, errs)
		}
		return &httpError{status: http.StatusConflict, detail: err.Error() + "; nothing was created"}
	case errors.Is(err, model.ErrNotFound):
		return &httpError{status: http.StatusBadRequest, detail: err.Error() + "; nothing was created"}
	case err != nil:
		return err
	}
	out := apitype.DAGResponse{Runs: make(map[string]string, len(names)), Jobs: make(map[string]string, len(names))}
	for i, name := range names {
		out.Runs[name] = g.Runs[i].ID
		out.Jobs[name] = g.Jobs[i].ID
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// dagPlan is a DAG request that passed every check that needs no store: its entries in
// name order, ready to submit, and the existing runs they name.
type dagPlan struct {
	ns      string // the namespace of every entry
	names   []string
	entries []scheduler.GraphEntry
	ups     []upstreamRef
}

// buildDAG checks a DAG request (entries, refs, cycles) and builds its entries; a bad
// request is a 400 naming every bad field.
func buildDAG(req *apitype.DAGRequest, now time.Time, lim *Limits, secrets *secret.Keys) (*dagPlan, error) {
	switch {
	case len(req.Runs) == 0:
		return nil, invalidField("runs", "must hold at least one entry")
	case len(req.Runs) > lim.MaxDAGRuns: // one request is one transaction
		return nil, invalidField("runs", fmt.Sprintf("must hold at most %d entries, got %d", lim.MaxDAGRuns, len(req.Runs)))
	}
	ns := req.Namespace
	if ns == "" {
		ns = model.DefaultNamespace
	} else if !namePattern.MatchString(ns) {
		return nil, invalidField("namespace", nameRule)
	}

	// Entries in name order, so that answers (which cycle, which error first) do not
	// depend on the order of a map.
	names := sortedKeys(req.Runs)
	index := make(map[string]int, len(names))
	for i, name := range names {
		index[name] = i
	}
	entries := make([]scheduler.GraphEntry, len(names))
	var errs []apitype.FieldError
	var ups []upstreamRef
	jobNames := make(map[string]string) // job name -> entry
	keys := make(map[string]string)     // idempotency key -> entry
	for i, name := range names {
		if !namePattern.MatchString(name) {
			errs = append(errs, apitype.FieldError{Field: mapPath("runs", name), Message: "entry names " + nameRule})
			continue
		}
		prefix := dagEntry(name)
		spec := req.Runs[name]
		if spec.Namespace == "" {
			spec.Namespace = ns
		} else if spec.Namespace != ns {
			errs = append(errs, apitype.FieldError{Field: prefix + "namespace",
				Message: fmt.Sprintf("must be the request's namespace (%q) or left out", ns)})
			continue
		}
		vj, fe := buildJobIn(&spec, prefix, now, depsOfEntry, lim, sealing{keys: secrets})
		if len(fe) > 0 {
			errs = append(errs, fe...)
			continue
		}
		if spec.Name != "" {
			if other, dup := jobNames[vj.Job.Name]; dup {
				errs = append(errs, apitype.FieldError{Field: prefix + "name", Message: "repeats the name of runs." + other})
			} else {
				jobNames[vj.Job.Name] = name
			}
		}
		if key := vj.Job.IdempotencyKey; key != "" {
			if other, dup := keys[key]; dup {
				errs = append(errs, apitype.FieldError{Field: prefix + "idempotency_key", Message: "repeats the idempotency_key of runs." + other})
			} else {
				keys[key] = name
			}
		}
		deps := make([]scheduler.GraphDep, len(vj.Deps))
		for j, d := range vj.Deps {
			if d.Run != "" {
				deps[j] = scheduler.GraphDep{RunID: d.Run, Condition: d.Condition}
				ups = append(ups, upstreamRef{field: fmt.Sprintf("%sdepends_on[%d].run", prefix, j), runID: d.Run})
				continue
			}
			up, ok := index[d.Ref]
			switch {
			case !ok:
				errs = append(errs, apitype.FieldError{Field: fmt.Sprintf("%sdepends_on[%d].ref", prefix, j),
					Message: fmt.Sprintf("no entry named %q", d.Ref)})
			case up == i:
				errs = append(errs, apitype.FieldError{Field: fmt.Sprintf("%sdepends_on[%d].ref", prefix, j),
					Message: fmt.Sprintf("self-edge: entry %q cannot depend on itself", name)})
			}
			deps[j] = scheduler.GraphDep{Entry: up, Condition: d.Condition}
		}
		entries[i] = scheduler.GraphEntry{Job: vj.Job, Run: vj.Run, Deps: deps}
	}
	if len(errs) > 0 {
		return nil, batchErrors(http.StatusBadRequest, errs)
	}
	if _, err := scheduler.OrderGraph(entries); err != nil {
		var ce *scheduler.CycleError
		if !errors.As(err, &ce) {
			return nil, err
		}
		path := make([]string, len(ce.Path))
		for k, i := range ce.Path {
			path[k] = names[i]
		}
		return nil, batchErrors(http.StatusBadRequest, []apitype.FieldError{{
			Field:   fmt.Sprintf("%sdepends_on[%d].ref", dagEntry(names[ce.Path[0]]), ce.Dep),
			Message: "cycle: " + strings.Join(path, " -> "),
		}})
	}
	markDAG(names, entries)
	return &dagPlan{ns: ns, names: names, entries: entries, ups: ups}, nil
}

// markDAG records in each entry's job its place in the DAG (model.DAGMember): the DAG's id
// is the first entry's run id, and the first entry's job keeps the map of all the runs.
func markDAG(names []string, entries []scheduler.GraphEntry) {
	root := entries[0].Run.ID
	runs := make(map[string]string, len(names))
	for i, name := range names {
		runs[name] = entries[i].Run.ID
	}
	for i, name := range names {
		m := &model.DAGMember{ID: root, Entry: name}
		if i == 0 {
			m.Runs = runs
		}
		entries[i].Job.Spec.DAG = m
	}
}

// dagScanPages bounds the pages of jobs one GET /v1/dags reads looking for DAGs.
const dagScanPages = 10

// getDAG serves GET /v1/dags/{id}: the DAG whose id, or one of whose runs' ids, is {id},
// with every entry's run and edges. It reads the first entry's job (its map of the runs)
// and then each run: linear in entries.
func (a *API) getDAG(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id := r.PathValue("id")
	notFound := func(why string) error {
		return &httpError{status: http.StatusNotFound, detail: fmt.Sprintf("DAG %q not found: %s", id, why)}
	}
	root, rootJob, err := a.dagMember(ctx, id)
	if err == nil && root != nil && root.ID != id {
		root, rootJob, err = a.dagMember(ctx, root.ID) // a run of another entry: go to the first
	}
	if err != nil {
		return err
	}
	if root == nil || root.Runs == nil {
		return notFound("no run of a DAG that you can see has this id")
	}
	entryOf := make(map[string]string, len(root.Runs)) // run id -> entry
	for name, runID := range root.Runs {
		entryOf[runID] = name
	}
	runs := make(map[string]*model.Run, len(root.Runs))
	var list []*model.Run
	for _, name := range sortedKeys(root.Runs) {
		run, err := a.store.GetRun(ctx, &store.GetRunParams{ID: root.Runs[name]})
		if errors.Is(err, model.ErrNotFound) {
			continue // its job was deleted
		}
		if err != nil {
			return fmt.Errorf("get run %s of DAG %s: %w", root.Runs[name], root.ID, err)
		}
		runs[name] = run
		list = append(list, run)
	}
	if err := a.eng.ExplainPending(ctx, list); err != nil {
		return err
	}
	out := apitype.DAG{ID: root.ID, Namespace: rootJob.Namespace, Status: string(model.GroupStatus(runs)),
		CreatedAt: rootJob.CreatedAt.UTC(), Entries: make([]apitype.DAGEntry, 0, len(runs))}
	for _, name := range sortedKeys(runs) {
		run := runs[name]
		en := apitype.DAGEntry{Name: name, Run: runToAPI(run)}
		for _, d := range run.DependsOn {
			dep := apitype.Dependency{Condition: string(d.Condition)}
			if ref, ok := entryOf[d.RunID]; ok {
				dep.Ref = ref
			} else {
				dep.Run = d.RunID
			}
			en.DependsOn = append(en.DependsOn, dep)
		}
		out.Entries = append(out.Entries, en)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// dagMember reads the run runID and its job's place in a DAG: nil when the run is not the
// caller's to see or belongs to no DAG (or its job was deleted).
func (a *API) dagMember(ctx context.Context, runID string) (*model.DAGMember, *model.Job, error) {
	run, err := a.store.GetRun(ctx, &store.GetRunParams{ID: runID})
	if errors.Is(err, model.ErrNotFound) || err == nil && !sees(ctx, run.Namespace) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get run %s: %w", runID, err)
	}
	job, err := a.store.GetJob(ctx, &store.GetJobParams{IDOrName: run.JobID})
	if errors.Is(err, model.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get job %s: %w", run.JobID, err)
	}
	return job.Spec.DAG, job, nil
}

// listDAGs serves GET /v1/dags?namespace=&limit=&cursor=: the DAGs, in the order of their
// first entry's job name. DAGs have no table of their own, so this scans jobs, at most
// dagScanPages pages of them per request; the cursor resumes the scan.
func (a *API) listDAGs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	ns := q.Get("namespace") // empty: every namespace
	limit, errs := a.limitParam(q)
	if ns != "" && !namePattern.MatchString(ns) {
		errs = append(errs, apitype.FieldError{Field: "namespace", Message: nameRule})
	}
	// The cursor is the store's cursor of a page of jobs and how many of that page's jobs
	// were read already: "<skip>.<store cursor>".
	skip, cursor := 0, ""
	if c := q.Get("cursor"); c != "" {
		n, rest, ok := strings.Cut(c, ".")
		k, err := strconv.Atoi(n)
		if !ok || err != nil || k < 0 {
			errs = append(errs, apitype.FieldError{Field: "cursor", Message: "is not a cursor of GET /v1/dags"})
		}
		skip, cursor = k, rest
	}
	if len(errs) > 0 {
		return invalidFields(errs)
	}
	ctx := r.Context()
	p := &store.ListJobsParams{Namespace: ns, Namespaces: scopeOf(ctx), Cursor: cursor, Limit: a.lim.MaxPageSize}
	out := apitype.DAGList{Items: []*apitype.DAGSummary{}}
	for range dagScanPages {
		page, err := a.store.ListJobs(ctx, p)
		if err != nil {
			return fmt.Errorf("list jobs: %w", err)
		}
		for i := skip; i < len(page.Jobs); i++ {
			j := page.Jobs[i]
			d := j.Spec.DAG
			if d == nil || d.Runs == nil {
				continue
			}
			out.Items = append(out.Items, &apitype.DAGSummary{ID: d.ID, Namespace: j.Namespace, Entries: len(d.Runs), CreatedAt: j.CreatedAt.UTC()})
			if len(out.Items) == limit && (i+1 < len(page.Jobs) || page.NextCursor != "") {
				out.NextCursor = fmt.Sprintf("%d.%s", i+1, p.Cursor)
				writeJSON(w, http.StatusOK, out)
				return nil
			}
		}
		skip = 0
		if page.NextCursor == "" {
			out.NextCursor = ""
			break
		}
		p.Cursor = page.NextCursor
		out.NextCursor = "0." + page.NextCursor
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
