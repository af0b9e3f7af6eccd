package cli

import (
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
	return group("dags", "Submit runs with dependencies between them", newDAGSubmitCmd(cfg))
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
refused with the field named (runs.load.depends_on[0].ref), and nothing is created.`,
		Example: "  stint dags submit -f etl.yaml\n" +
			"  stint dags submit -f etl.json --json",
		Args: args(),
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the DAG, YAML or JSON (- for standard input)")
	asJSON := addJSONFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
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
		return callAndPrint(cmd, cfg, *asJSON, bind((*client.Client).SubmitDAG, req), printDAG)
	}
	return cmd
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
