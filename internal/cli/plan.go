package cli

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func newPlanCmd(cfg *config) *cobra.Command {
	var file, name string
	cmd := &cobra.Command{
		Use:   "plan -f FILE [--job NAME]",
		Short: "Say where a job would run, when, and what would hold it back, creating nothing",
		Long: `Ask the server what a job spec would do if it were submitted now: the workers its
run fits (labels and free capacity, best fit first) or why it fits none, counted per
constraint; a schedule's next fire times, or when a run_at or delay run falls due; and
what would hold the run back now (a paused queue, a concurrency or rate limit, a run_at
ahead, no worker that fits). The spec is validated as on submission; nothing is created.

FILE (YAML or JSON, - for standard input) holds one job spec, with the fields of
POST /v1/jobs:

    name: train
    command: [python3, train.py]
    requirements: {gpu: 4, memory_mb: 32768, labels: {zone: eu}}

or a file for stint apply (namespace, jobs: [...]), of which --job picks one.`,
		Example: "  stint plan -f train.yaml\n" +
			"  stint plan -f jobs.yaml --job nightly --json\n" +
			"  echo '{\"shell\": \"make\", \"requirements\": {\"cpu\": 4}}' | stint plan -f -",
		Args: args(),
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the job spec, YAML or JSON (- for standard input)")
	cmd.Flags().StringVar(&name, "job", "", "the job to plan, by name, when FILE is a file for stint apply")
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		b, err := readFileFlag(cmd, file)
		if err != nil {
			return err
		}
		spec, err := readPlanSpec(b, name)
		if err != nil {
			return Usagef("%s: %w", file, err)
		}
		if spec.Namespace == "" {
			spec.Namespace = cfg.namespace // --namespace / STINT_NAMESPACE, when the file names none
		}
		return callAndPrint(cmd, cfg, out, bind((*client.Client).Plan, spec), cfg.printPlan)
	}
	return cmd
}

// readFileFlag reads the file a required -f flag names, or standard input for "-".
func readFileFlag(cmd *cobra.Command, file string) ([]byte, error) {
	if file == "" {
		return nil, Usagef("-f FILE is required")
	}
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(cmd.InOrStdin())
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, Usagef("-f: %w", err)
	}
	return b, nil
}

// readPlanSpec parses the job spec of a YAML or JSON file: one spec, or a file for stint
// apply (read by readJobFile), of which name picks the job (it may be empty when the file
// has one). Unknown fields are errors naming the field.
func readPlanSpec(b []byte, name string) (*apitype.JobSpec, error) {
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return nil, fmt.Errorf("want a job spec (an object): %w", err)
	}
	if _, ok := top["jobs"]; ok {
		f, err := readJobFile(b)
		if err != nil {
			return nil, err
		}
		return pickJob(f, name)
	}
	if name != "" {
		return nil, fmt.Errorf("--job %s: the file holds one job spec, not a list of jobs", name)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var spec apitype.JobSpec
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("bad job spec: %w", err)
	}
	return &spec, nil
}

// pickJob returns the job of an apply file named name, or its only job when name is empty,
// in the file's namespace.
func pickJob(f *jobFile, name string) (*apitype.JobSpec, error) {
	i := -1
	switch {
	case name != "":
		i = slices.IndexFunc(f.Jobs, func(j apitype.JobSpec) bool { return j.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("--job %s: no job of that name in the file", name)
		}
	case len(f.Jobs) == 1:
		i = 0
	case len(f.Jobs) == 0:
		return nil, fmt.Errorf("jobs: the file lists no job")
	default:
		names := make([]string, len(f.Jobs))
		for k, j := range f.Jobs {
			names[k] = j.Name
		}
		return nil, fmt.Errorf("the file lists %d jobs (%s): pick one with --job NAME", len(f.Jobs), strings.Join(names, ", "))
	}
	spec := f.Jobs[i]
	if spec.Namespace == "" {
		spec.Namespace = f.Namespace
	}
	return &spec, nil
}

// printPlan shows a plan: placement, when it runs, and what holds it back.
func (cfg *config) printPlan(w io.Writer, p *apitype.PlanResponse) error {
	t := newTable(w)
	pl := p.Placement
	switch {
	case pl.Code != "" && pl.Workers == 0:
		t.row("Placement:", pl.Reason)
	case pl.Code != "":
		t.row("Placement:", fmt.Sprintf("no worker fits now (%s)", countOf(pl.Workers, "active worker")))
		for _, line := range constraintCounts(pl.Never, "lack", "lacks") {
			t.row("", line)
		}
		for _, line := range constraintCounts(pl.Busy, "busy, short of", "busy, short of") {
			t.row("", line)
		}
	case !pl.Constrained:
		t.row("Placement:", fmt.Sprintf("any worker: no requirements, the first of %s to ask takes it", countOf(pl.Workers, "active worker")))
	default:
		verb := "fit"
		if len(pl.Fits) == 1 {
			verb = "fits"
		}
		t.row("Placement:", fmt.Sprintf("%s, the best fit (%d of %s %s: %s)",
			pl.Worker, len(pl.Fits), countOf(pl.Workers, "active worker"), verb, strings.Join(pl.Fits, ", ")))
	}
	switch {
	case !p.Enabled:
		t.row("Runs:", "none: the job is disabled")
	case p.DueAt != nil:
		t.row("Due:", cfg.when(p.DueAt))
	}
	for i := range p.NextFireTimes {
		label := ""
		if i == 0 {
			label = "Next fires:"
		}
		at := cfg.when(&p.NextFireTimes[i])
		if i < len(p.NextFireTimesLocal) {
			at += "  " + p.NextFireTimesLocal[i].Format(time.RFC3339)
		}
		t.row(label, at)
	}
	if len(p.HeldBy) == 0 {
		t.row("Held back by:", "nothing")
	}
	for i, h := range p.HeldBy {
		label := ""
		if i == 0 {
			label = "Held back by:"
		}
		t.row(label, h.Code+": "+h.Reason)
	}
	if p.ExistingJob != "" {
		t.row("Note:", fmt.Sprintf("a job of this name exists (%s): stint apply would update it, stint submit would be refused", p.ExistingJob))
	}
	return t.flush()
}

// countOf says "1 active worker" or "3 active workers".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// constraintCounts renders counts per constraint, most common first: "3 lack gpu >= 4".
func constraintCounts(m map[string]int, verb, verbOne string) []string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	out := make([]string, len(keys))
	for i, k := range keys {
		v := verb
		if m[k] == 1 {
			v = verbOne
		}
		out[i] = fmt.Sprintf("%d %s %s", m[k], v, k)
	}
	return out
}

// decodeFile decodes a YAML or JSON file (b) into v, refusing fields v does not have, with
// errors that name the field; what says what kind of file it is.
func decodeFile(b []byte, what string, v any) error {
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return fmt.Errorf("not YAML: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad %s: %w", what, err)
	}
	return nil
}
