package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
)

func (b *testBundle) getDAG(t *testing.T, id string) apitype.DAG {
	t.Helper()
	r := b.do(t, "GET", "/v1/dags/"+id, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var d apitype.DAG
	r.decode(t, &d)
	return d
}

// TestGetDAG: a DAG is read whole from any of its runs, with each entry's state and its
// edges by entry name (or by run id, for a run from outside it), and its state follows the
// entries'.
func TestGetDAG(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.createJob(t, `{"command": ["true"]}`)
	out := b.postDAG(t, `{"runs": {
		"extract":   {"command": ["./extract"]},
		"transform": {"command": ["./transform"], "depends_on": [{"ref": "extract"}]},
		"load":      {"command": ["./load"], "depends_on": [{"ref": "transform"}, {"run": "`+before.Run.ID+`", "condition": "finished"}]}
	}}`)

	d := b.getDAG(t, out.Runs["extract"]) // the first entry by name
	require.Equal(t, out.Runs["extract"], d.ID)
	require.Equal(t, "default", d.Namespace)
	require.Equal(t, "running", d.Status)
	names := []string{}
	for _, en := range d.Entries {
		names = append(names, en.Name)
		require.Equal(t, out.Runs[en.Name], en.Run.ID)
	}
	require.Equal(t, []string{"extract", "load", "transform"}, names)
	require.Equal(t, "queued", d.Entries[0].Run.Status)
	require.Empty(t, d.Entries[0].DependsOn)
	require.ElementsMatch(t, []apitype.Dependency{{Ref: "transform", Condition: "succeeded"}, {Run: before.Run.ID, Condition: "finished"}},
		d.Entries[1].DependsOn)
	require.Equal(t, "waiting", d.Entries[2].Run.Status)
	require.Equal(t, "waiting for 1 upstream run", d.Entries[2].Run.PendingReason)
	require.Equal(t, []apitype.Dependency{{Ref: "extract", Condition: "succeeded"}}, d.Entries[2].DependsOn)

	// Any entry's run id names the same DAG; the jobs say where they belong.
	require.Equal(t, d, b.getDAG(t, out.Runs["load"]))
	r := b.do(t, "GET", "/v1/jobs/"+out.Jobs["transform"], nil)
	var job apitype.Job
	r.decode(t, &job)
	require.Equal(t, &apitype.DAGRef{ID: d.ID, Entry: "transform"}, job.DAG)

	// Cancelling the first entry skips the rest: the whole ends cancelled.
	require.Equal(t, http.StatusOK, b.do(t, "POST", "/v1/runs/"+out.Runs["extract"]+"/cancel", nil).status)
	d = b.getDAG(t, d.ID)
	require.Equal(t, "cancelled", d.Status)
	require.Equal(t, "skipped", d.Entries[2].Run.Status)

	// Not a DAG: a plain run, or nothing.
	for _, id := range []string{before.Run.ID, "nope"} {
		r := b.do(t, "GET", "/v1/dags/"+id, nil)
		require.Equal(t, http.StatusNotFound, r.status, id)
		require.Contains(t, r.problem(t).Detail, "no run of a DAG")
	}
}

// TestListDAGs: the list finds DAGs among other jobs, pages through them, and keeps to the
// caller's namespaces.
func TestListDAGs(t *testing.T) {
	t.Parallel()
	b := secureSetup(t)
	admin := b.as("static-admin-secret")
	admin.createJob(t, `{"command": ["true"]}`)
	var ids []string
	for _, ns := range []string{"default", "etl", "etl"} {
		out := admin.postDAG(t, `{"namespace": "`+ns+`", "runs": {"a": {"command": ["true"]}, "b": {"command": ["true"], "depends_on": [{"ref": "a"}]}}}`)
		ids = append(ids, out.Runs["a"])
	}
	list := func(bb *testBundle, query string) apitype.DAGList {
		t.Helper()
		r := bb.do(t, "GET", "/v1/dags"+query, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		var l apitype.DAGList
		r.decode(t, &l)
		return l
	}
	idsOf := func(l apitype.DAGList) []string {
		out := []string{}
		for _, d := range l.Items {
			require.Equal(t, 2, d.Entries)
			out = append(out, d.ID)
		}
		return out
	}
	require.ElementsMatch(t, ids, idsOf(list(admin, "")))
	require.ElementsMatch(t, ids[1:], idsOf(list(admin, "?namespace=etl")))

	first := list(admin, "?limit=2")
	require.Len(t, first.Items, 2)
	require.NotEmpty(t, first.NextCursor)
	rest := list(admin, "?limit=2&cursor="+first.NextCursor)
	require.ElementsMatch(t, ids, append(idsOf(first), idsOf(rest)...))

	viewer := b.as(b.mint(t, "etl-viewer", model.RoleViewer, []string{"etl"}, ""))
	require.ElementsMatch(t, ids[1:], idsOf(list(viewer, "")))
	require.Equal(t, http.StatusNotFound, viewer.do(t, "GET", "/v1/dags/"+ids[0], nil).status, "outside its namespaces")
	require.Equal(t, ids[1], viewer.getDAG(t, ids[1]).ID)

	r := admin.do(t, "GET", "/v1/dags?namespace=a/b&limit=0", nil)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.ElementsMatch(t, []string{"limit", "namespace"}, r.fields(t))
}

// TestWhoami: the caller's role, namespaces and token name.
func TestWhoami(t *testing.T) {
	t.Parallel()
	b := secureSetup(t)
	who := func(bb *testBundle) apitype.Whoami {
		t.Helper()
		r := bb.do(t, "GET", "/v1/whoami", nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		var w apitype.Whoami
		r.decode(t, &w)
		return w
	}
	require.Equal(t, apitype.Whoami{Name: "--api-token", Role: "admin"}, who(b.as("static-admin-secret")))
	w := who(b.as(b.mint(t, "etl-viewer", model.RoleViewer, []string{"etl"}, "")))
	require.NotEmpty(t, w.TokenID)
	w.TokenID = ""
	require.Equal(t, apitype.Whoami{Name: "etl-viewer", Role: "viewer", Namespaces: []string{"etl"}}, w)
	require.Equal(t, http.StatusUnauthorized, b.do(t, "GET", "/v1/whoami", nil).status)

	open := setup(t)
	require.Equal(t, apitype.Whoami{Name: "no authentication (stint dev)", Role: "admin", Open: true}, who(open))
}

// TestListRunsByNamespace: ?namespace= keeps the runs of one namespace, within the caller's.
func TestListRunsByNamespace(t *testing.T) {
	t.Parallel()
	b := secureSetup(t)
	admin := b.as("static-admin-secret")
	def := admin.createJob(t, `{"command": ["true"]}`)
	etl := admin.createJob(t, `{"namespace": "etl", "command": ["true"]}`)
	runs := func(bb *testBundle, query string) []string {
		t.Helper()
		r := bb.do(t, "GET", "/v1/runs"+query, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		var l apitype.RunList
		r.decode(t, &l)
		out := []string{}
		for _, run := range l.Items {
			out = append(out, run.ID)
		}
		return out
	}
	require.ElementsMatch(t, []string{def.Run.ID, etl.Run.ID}, runs(admin, ""))
	require.Equal(t, []string{etl.Run.ID}, runs(admin, "?namespace=etl"))
	require.Equal(t, []string{def.Run.ID}, runs(admin, "?namespace=default"))
	viewer := b.as(b.mint(t, "etl-viewer", model.RoleViewer, []string{"etl"}, ""))
	require.Equal(t, []string{etl.Run.ID}, runs(viewer, ""))
	require.Empty(t, runs(viewer, "?namespace=default"), "outside its namespaces")
}
