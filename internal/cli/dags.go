package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func newDAGsCmd(cfg *config) *cobra.Command {
	return group("dags", "Submit runs with dependencies between them, and follow them as a whole",
		newDAGSubmitCmd(cfg), newDAGGetCmd(cfg), newDAGListCmd(cfg))
}

func newDAGGetCmd(cfg *config) *cobra.Command {
	cmd := objectCmd(cfg, "get ID", "Show a DAG: the state of the whole and each entry's run and edges, upstream first",
		(*client.Client).GetDAG, showWith(cfg.printDAGState))
	cmd.Long = `Show a DAG submitted with stint dags submit (GET /v1/dags/{id}): the state of the whole
(running while an entry has not ended; then failed, cancelled or succeeded), and each entry
with its run, state and the entries (or outside runs) it depends on. ID is the DAG's id, the
run id of its first entry by name, or the run id of any of its entries.`
	return cmd
}

func newDAGListCmd(cfg *config) *cobra.Command {
	var (
		limit  int
		cursor string
	)
	cmd := &cobra.Command{Use: "list", Aliases: []string{"ls"}, Short: "List DAGs (of --namespace, else every namespace): id, entries, created", Args: args()}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many DAGs (default: the server's page size)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "start after this cursor (the last page's next cursor)")
	out := addOutputFlags(cmd)
	addWatchFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if limit < 0 {
			return Usagef("--limit: must not be negative")
		}
		call := func(c *client.Client, ctx context.Context) (*apitype.DAGList, error) {
			return c.ListDAGs(ctx, cfg.namespace, limit, cursor)
		}
		return callAndPrint(cmd, cfg, out, call, func(w io.Writer, list *apitype.DAGList) error {
			t := newTable(w, "ID", "NAMESPACE", "ENTRIES", "CREATED")
			for _, d := range list.Items {
				t.row(d.ID, d.Namespace, fmt.Sprint(d.Entries), cfg.ago(&d.CreatedAt))
			}
			return flushPage(cmd, t, list.NextCursor)
		})
	}
	return cmd
}

// printDAGState shows a DAG as a whole, then a table of its entries, upstream first.
func (cfg *config) printDAGState(w io.Writer, d *apitype.DAG) error {
	t := newTable(w)
	t.row("DAG:", d.ID)
	t.row("Namespace:", d.Namespace)
	t.row("Status:", d.Status)
	t.row("Created:", cfg.when(&d.CreatedAt))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	runs := make(map[string]*apitype.Run, len(d.Entries))
	entries := make(map[string]apitype.DAGEntry, len(d.Entries))
	for _, en := range d.Entries {
		runs[en.Name], entries[en.Name] = en.Run, en
	}
	t = newTable(w, "ENTRY", "RUN", "STATUS", "DEPENDS ON", "STARTED", "DURATION", "ERROR")
	for _, name := range stepOrder(runs) {
		en, r := entries[name], runs[name]
		deps := make([]string, len(en.DependsOn))
		for i, dep := range en.DependsOn {
			deps[i] = dep.Ref
			if dep.Ref == "" {
				deps[i] = "run " + dep.Run
			}
			if dep.Condition != "" && dep.Condition != "succeeded" {
				deps[i] += ":" + dep.Condition
			}
		}
		t.row(name, r.ID, runStatus(r), orDash(strings.Join(deps, ",")), cfg.ago(r.StartedAt), cfg.elapsed(r.StartedAt, r.FinishedAt), orDash(r.Error))
	}
	return t.flush()
}

func newDAGSubmitCmd(cfg *config) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "submit -f FILE",
		Short: "Create the runs of a file and the dependencies between them, all or nothing",
		Long: `Create a run for each entry of a file (YAML or JSON, - for standard input), with the
dependencies between them, in one transaction (POST /v1/dags): either every run exists
afterwards or none does. Each entry is a job spec as stint submit makes it (the fields of
POST /v1/jobs, without a schedule); its depends_on names other entries with ref, or runs
that exist already with run, and a condition (succeeded, the default; failed; finished):

    namespace: etl                # optional; default "default"
    runs:
      extract:
        command: [./extract.sh]
      transform:
        command: [./transform.sh]
        depends_on: [{ref: extract}]
      load:
        command: [./load.sh]
        depends_on: [{ref: transform}]
      alert:
        shell: ./page-oncall.sh
        depends_on: [{ref: transform, condition: failed}]

Prints the run created for each entry. A ref to a missing entry, a cycle or a bad field is
refused with the field named (runs.load.depends_on[0].ref), and nothing is created.

With --wait it then waits for every run of the DAG to end (on a terminal, a progress bar
counts those that did), prints the DAG as stint dags get does (with -o json or yaml, only
that), and exits 0 only when it succeeded as a whole.`,
		Example: "  stint dags submit -f etl.yaml\n" +
			"  stint dags submit -f etl.yaml --wait\n" +
			"  stint dags submit -f etl.json --json",
		Args: args(),
	}
	var wait bool
	cmd.Flags().StringVarP(&file, "file", "f", "", "the DAG, YAML or JSON (- for standard input)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for every run of the DAG to end, then print it; exit 0 only if it succeeded")
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(); err != nil {
			return err
		}
		b, err := readFileFlag(cmd, file)
		if err != nil {
			return err
		}
		req, err := readDAGFile(b)
		if err != nil {
			return Usagef("%s: %w", file, err)
		}
		if req.Namespace == "" {
			req.Namespace = cfg.namespace // --namespace / STINT_NAMESPACE, when the file names none
		}
		if !wait {
			return callAndPrint(cmd, cfg, out, bind((*client.Client).SubmitDAG, req), printDAG)
		}
		return cfg.submitDAGAndWait(cmd, out, req)
	}
	return cmd
}

// submitDAGAndWait submits a DAG, prints its runs (as a table only), waits for them all to
// end, advancing a progress bar, and prints the DAG as it ended; errRunFailed unless it
// succeeded.
func (cfg *config) submitDAGAndWait(cmd *cobra.Command, o *output, req *apitype.DAGRequest) error {
	c, err := cfg.client(cmd)
	if err != nil {
		return err
	}
	resp, err := c.SubmitDAG(cmd.Context(), req)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if !o.structured() {
		if err := printDAG(w, resp); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if len(resp.Runs) == 0 {
		return fmt.Errorf("the server created no run for the DAG: nothing to wait for")
	}
	first := slices.Min(slices.Collect(maps.Keys(resp.Runs))) // any entry's run names the DAG
	bar := cfg.progressBar(cmd, o, "dag", len(resp.Runs))
	d, err := c.WaitDAG(cmd.Context(), resp.Runs[first], func(d *apitype.DAG) bool {
		bar.Set(countFinished(func(yield func(*apitype.Run) bool) {
			for _, en := range d.Entries {
				if !yield(en.Run) {
					return
				}
			}
		}))
		return client.DAGFinished(d)
	})
	bar.Finish()
	if err != nil {
		return err
	}
	if err := o.print(w, d, func(w io.Writer) error { return cfg.printDAGState(w, d) }); err != nil {
		return err
	}
	if d.Status != "succeeded" {
		return errRunFailed
	}
	return nil
}

// readDAGFile parses a DAG request from YAML or JSON. Unknown fields are errors naming the
// field; the rest is for the server to check.
func readDAGFile(b []byte) (*apitype.DAGRequest, error) {
	var req apitype.DAGRequest
	if err := decodeFile(b, "DAG file", &req); err != nil {
		return nil, err
	}
	if len(req.Runs) == 0 {
		return nil, fmt.Errorf("runs: the file lists no run")
	}
	return &req, nil
}

// printDAG shows the run and job created for each entry, by entry name.
func printDAG(w io.Writer, resp *apitype.DAGResponse) error {
	t := newTable(w, "ENTRY", "RUN", "JOB")
	for _, name := range slices.Sorted(maps.Keys(resp.Runs)) {
		t.row(name, resp.Runs[name], resp.Jobs[name])
	}
	return t.flush()
}

// afterFlag is stint submit's repeatable --after RUN_ID[:CONDITION]: the runs the job's run
// waits for.
type afterFlag struct{ deps []apitype.Dependency }

func (f *afterFlag) String() string {
	parts := make([]string, len(f.deps))
	for i, d := range f.deps {
		parts[i] = d.Run + ":" + d.Condition
	}
	return strings.Join(parts, ",")
}

func (f *afterFlag) Set(s string) error {
	run, cond, hasCond := strings.Cut(s, ":")
	switch {
	case strings.TrimSpace(run) == "":
		return fmt.Errorf("want RUN_ID or RUN_ID:CONDITION")
	case !hasCond:
		cond = "succeeded"
	case cond != "succeeded" && cond != "failed" && cond != "finished":
		return fmt.Errorf("condition %q: want succeeded, failed or finished", cond)
	}
	f.deps = append(f.deps, apitype.Dependency{Run: run, Condition: cond})
	return nil
}

func (f *afterFlag) Type() string { return "run[:condition]" }
