package cli

import (
	"context"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func newPipelinesCmd(cfg *config) *cobra.Command {
	cmd := group("pipelines", "Define, trigger and follow pipelines: named DAGs of jobs with an optional schedule",
		newPipelineListCmd(cfg),
		newPipelineGetCmd(cfg),
		newPipelinePutCmd(cfg),
		newPipelineDeleteCmd(cfg),
		newPipelineTriggerCmd(cfg),
		newPipelineRunsCmd(cfg),
		newPipelineRunCmd(cfg),
		newPipelineCancelCmd(cfg),
		newPipelineRetryCmd(cfg),
		objectCmd(cfg, "webhook PIPELINE", "Create or rotate a pipeline's webhook secret (shown once): signed calls start a run",
			(*client.Client).RotatePipelineWebhookSecret, cfg.printWebhookSecret),
	)
	cmd.Aliases = []string{"pipeline"}
	return cmd
}

func newPipelineListCmd(cfg *config) *cobra.Command {
	return listCmd(cfg, "List pipelines", (*client.Client).ListPipelines, func(w io.Writer, list *apitype.PipelineList) error {
		t := newTable(w, "NAME", "ID", "STEPS", "SCHEDULE", "ENABLED", "NEXT")
		for _, p := range list.Items {
			t.row(p.Name, p.ID, fmt.Sprint(len(p.Steps)), schedule(p.Schedule), yesNo(p.Enabled), cfg.ago(p.NextFireAt))
		}
		return t.flush()
	})
}

func newPipelineGetCmd(cfg *config) *cobra.Command {
	return objectCmd(cfg, "get PIPELINE", "Show a pipeline and its steps", (*client.Client).GetPipeline, showWith(cfg.printPipeline))
}

func newPipelinePutCmd(cfg *config) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "put -f FILE",
		Short: "Create a pipeline or replace its definition, from a file",
		Long: `Create a pipeline, or replace its definition, from a file (YAML or JSON, - for standard
input); PUT /v1/pipelines/{name}. Each step is a job spec as stint submit makes it (the
fields of POST /v1/jobs, without name, schedule or concurrency limit); its depends_on names
other steps with ref and a condition (succeeded, the default; failed; finished):

    name: etl
    schedule: {cron: "0 2 * * *", timezone: Europe/Berlin}
    args: {source: s3://bucket/raw}
    steps:
      extract:   {command: [./extract.sh]}
      transform: {command: [./transform.sh], depends_on: [{ref: extract}]}
      load:      {command: [./load.sh], depends_on: [{ref: transform}]}
      alert:     {shell: ./page-oncall.sh, depends_on: [{ref: transform, condition: failed}]}

Each step runs as a job named PIPELINE.STEP, created or updated here. stint apply takes
pipelines too, in a pipelines: list next to jobs:.`,
		Args: args(),
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the pipeline, YAML or JSON (- for standard input)")
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(); err != nil {
			return err
		}
		b, err := readFileFlag(cmd, file)
		if err != nil {
			return err
		}
		spec, err := readPipelineFile(b)
		if err == nil {
			err = expandStepSecrets(spec, "", cfg.getenv)
		}
		if err != nil {
			return Usagef("%s: %w", file, err)
		}
		c, err := cfg.client(cmd)
		if err != nil {
			return err
		}
		pl, created, err := c.ApplyPipeline(cmd.Context(), spec.Namespace, spec, false)
		if err != nil {
			return err
		}
		return out.print(cmd.OutOrStdout(), pl, func(w io.Writer) error {
			_, err := fmt.Fprintln(w, pipelineAction(pl.Name, created, len(pl.Steps)))
			return err
		})
	}
	return cmd
}

// readPipelineFile parses one pipeline from YAML or JSON. Unknown fields are errors naming
// the field; the rest is for the server to check.
func readPipelineFile(b []byte) (*apitype.PipelineSpec, error) {
	var spec apitype.PipelineSpec
	if err := decodeFile(b, "pipeline file", &spec); err != nil {
		return nil, err
	}
	switch {
	case spec.Name == "":
		return nil, fmt.Errorf("name: the file names no pipeline")
	case len(spec.Steps) == 0:
		return nil, fmt.Errorf("steps: the file lists no step")
	}
	return &spec, nil
}

// pipelineAction says what a put did: "pipeline/etl created (4 steps)".
func pipelineAction(name string, created bool, steps int) string {
	action := "updated"
	if created {
		action = "created"
	}
	unit := "steps"
	if steps == 1 {
		unit = "step"
	}
	return fmt.Sprintf("pipeline/%s %s (%d %s)", name, action, steps, unit)
}

func newPipelineDeleteCmd(cfg *config) *cobra.Command {
	del := func(c *client.Client, ctx context.Context, name string) (*struct{}, error) {
		return nil, c.DeletePipeline(ctx, name)
	}
	cmd := objectCmd(cfg, "delete PIPELINE", "Delete a pipeline and its steps' jobs (active runs are cancelled; runs stay)",
		del, showDone[*struct{}]("pipeline %s deleted"))
	cmd.Aliases = []string{"rm"}
	return cmd
}

func newPipelineTriggerCmd(cfg *config) *cobra.Command {
	var (
		runArgs kvFlag
		wait    bool
	)
	cmd := &cobra.Command{
		Use:   "trigger PIPELINE [--arg KEY=VALUE ...] [--wait]",
		Short: "Start a run of a pipeline now",
		Long: "Start a run of a pipeline now: a run per step, each waiting for the steps it depends on.\n" +
			"--arg values are laid over the pipeline's args and reach every step (commands get\n" +
			"STINT_ARGS). With --wait it waits for the whole to end (on a terminal, a progress bar\n" +
			"counts the steps that ended), prints it, and exits 0 only when it succeeded.",
		Example: "  stint pipelines trigger etl --arg day=2026-11-22\n" +
			"  stint pipelines trigger etl --wait",
		Args: args("PIPELINE"),
	}
	cmd.Flags().Var(&runArgs, "arg", "argument KEY=VALUE of every step's run, repeatable")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the pipeline run to end; exit 0 only if it succeeded")
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		if err := out.check(); err != nil {
			return err
		}
		a, err := runArgs.json()
		if err != nil {
			return err
		}
		c, err := cfg.client(cmd)
		if err != nil {
			return err
		}
		pr, err := c.TriggerPipeline(cmd.Context(), argv[0], &apitype.PipelineTrigger{Args: a})
		if err != nil {
			return err
		}
		if wait {
			bar := cfg.progressBar(cmd, out, "pipeline "+argv[0], len(pr.Steps))
			pr, err = c.WaitPipelineRun(cmd.Context(), argv[0], pr.ID, func(pr *apitype.PipelineRun) bool {
				bar.Set(countFinished(maps.Values(pr.Steps)))
				return client.PipelineFinished(pr)
			})
			bar.Finish()
			if err != nil {
				return err
			}
		}
		err = out.print(cmd.OutOrStdout(), pr, func(w io.Writer) error { return cfg.printPipelineRun(w, pr) })
		if err != nil {
			return err
		}
		if wait && pr.Status != "succeeded" {
			return errRunFailed
		}
		return nil
	}
	return cmd
}

func newPipelineRunsCmd(cfg *config) *cobra.Command {
	var (
		limit  int
		cursor string
	)
	cmd := &cobra.Command{Use: "runs PIPELINE", Short: "List a pipeline's runs, newest first", Args: args("PIPELINE")}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many runs (default: the server's page size)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "start after this cursor (the last page's next cursor)")
	out := addOutputFlags(cmd)
	addWatchFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		if limit < 0 {
			return Usagef("--limit: must not be negative")
		}
		call := func(c *client.Client, ctx context.Context) (*apitype.PipelineRunList, error) {
			return c.ListPipelineRuns(ctx, argv[0], limit, cursor)
		}
		return callAndPrint(cmd, cfg, out, call, func(w io.Writer, list *apitype.PipelineRunList) error {
			t := newTable(w, "ID", "STATUS", "TRIGGER", "STEPS", "CREATED")
			for _, pr := range list.Items {
				t.row(pr.ID, pr.Status, pr.Trigger, stepCounts(pr), cfg.ago(&pr.CreatedAt))
			}
			return flushPage(cmd, t, list.NextCursor)
		})
	}
	return cmd
}

// pipelineRunCmd returns a command on one run of a pipeline (use is "run PIPELINE
// RUN_ID"), printing the run it answers with.
func pipelineRunCmd(cfg *config, use, short string,
	call func(c *client.Client, ctx context.Context, name, id string) (*apitype.PipelineRun, error),
) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: args("PIPELINE", "RUN_ID")}
	out := addOutputFlags(cmd)
	if strings.HasPrefix(use, "run ") { // a read: it can be watched
		addWatchFlag(cmd)
	}
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		bound := func(c *client.Client, ctx context.Context) (*apitype.PipelineRun, error) {
			return call(c, ctx, argv[0], argv[1])
		}
		return callAndPrint(cmd, cfg, out, bound, cfg.printPipelineRun)
	}
	return cmd
}

func newPipelineRunCmd(cfg *config) *cobra.Command {
	return pipelineRunCmd(cfg, "run PIPELINE RUN_ID", "Show a pipeline run: the state of the whole and of each step",
		(*client.Client).GetPipelineRun)
}

func newPipelineCancelCmd(cfg *config) *cobra.Command {
	return pipelineRunCmd(cfg, "cancel PIPELINE RUN_ID", "Cancel the steps of a pipeline run that have not ended",
		(*client.Client).CancelPipelineRun)
}

func newPipelineRetryCmd(cfg *config) *cobra.Command {
	var from string
	retry := func(c *client.Client, ctx context.Context, name, id string) (*apitype.PipelineRun, error) {
		return c.RetryPipelineRun(ctx, name, id, from)
	}
	cmd := pipelineRunCmd(cfg, "retry PIPELINE RUN_ID [--from-step STEP]",
		"Run an ended pipeline run's failed or cancelled steps again (or --from-step a step), with what is downstream", retry)
	cmd.Flags().StringVar(&from, "from-step", "", "run this step again, with every step downstream of it")
	// --from was this flag's first spelling; elsewhere --from is a time (backfill, cron explain).
	cmd.Flags().StringVar(&from, "from", "", "")
	_ = cmd.Flags().MarkDeprecated("from", "use --from-step")
	return cmd
}

// printPipeline shows one pipeline and its steps, upstream first.
func (cfg *config) printPipeline(w io.Writer, p *apitype.Pipeline) error {
	t := newTable(w)
	t.row("Name:", p.Name)
	t.row("ID:", p.ID)
	t.row("Namespace:", p.Namespace)
	scheduleRows(t, p.Schedule)
	for i := range p.NextFireTimes {
		label := ""
		if i == 0 {
			label = "Next fires:"
		}
		t.row(label, cfg.when(&p.NextFireTimes[i]))
	}
	if len(p.Args) > 0 {
		t.row("Args:", string(p.Args))
	}
	t.row("Enabled:", yesNo(p.Enabled))
	t.row("Created:", cfg.when(&p.CreatedAt))
	t.row("Updated:", cfg.when(&p.UpdatedAt))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nSteps:")
	t = newTable(w, "  STEP", "JOB", "DEPENDS ON")
	for _, s := range p.Steps {
		deps := make([]string, len(s.DependsOn))
		for i, d := range s.DependsOn {
			deps[i] = d.Ref
			if d.Condition != "" && d.Condition != "succeeded" {
				deps[i] += ":" + d.Condition
			}
		}
		t.row("  "+s.Name, s.JobName, orDash(strings.Join(deps, ",")))
	}
	return t.flush()
}

// printPipelineRun shows a pipeline run: the whole, then a table of its steps, upstream
// first.
func (cfg *config) printPipelineRun(w io.Writer, pr *apitype.PipelineRun) error {
	t := newTable(w)
	t.row("Pipeline run:", pr.ID)
	t.row("Pipeline:", pr.PipelineName)
	t.row("Status:", pr.Status)
	t.row("Trigger:", pr.Trigger)
	if len(pr.Args) > 0 {
		t.row("Args:", string(pr.Args))
	}
	t.row("Scheduled for:", cfg.when(&pr.ScheduledFor))
	t.row("Created:", cfg.when(&pr.CreatedAt))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "STEP", "RUN", "STATUS", "ATTEMPT", "STARTED", "DURATION", "ERROR")
	for _, name := range stepOrder(pr.Steps) {
		r := pr.Steps[name]
		t.row(name, r.ID, runStatus(r), attemptOf(r), cfg.ago(r.StartedAt), cfg.elapsed(r.StartedAt, r.FinishedAt), orDash(r.Error))
	}
	return t.flush()
}

// stepOrder lists a pipeline run's steps upstream first: by their depth in the graph (the
// longest chain of runs above them), then by name.
func stepOrder(steps map[string]*apitype.Run) []string {
	byRun := make(map[string]string, len(steps))
	for name, r := range steps {
		byRun[r.ID] = name
	}
	depth := make(map[string]int, len(steps))
	var depthOf func(name string, seen int) int
	depthOf = func(name string, seen int) int {
		if d, ok := depth[name]; ok {
			return d
		}
		d := 0
		if seen <= len(steps) { // a cycle cannot happen; bound the walk anyway
			for _, dep := range steps[name].DependsOn {
				if up, ok := byRun[dep.Run]; ok {
					d = max(d, depthOf(up, seen+1)+1)
				}
			}
		}
		depth[name] = d
		return d
	}
	names := make([]string, 0, len(steps))
	for name := range steps {
		depthOf(name, 0)
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if depth[a] != depth[b] {
			return depth[a] - depth[b]
		}
		return strings.Compare(a, b)
	})
	return names
}

// countFinished counts the runs that are final.
func countFinished(runs iter.Seq[*apitype.Run]) int {
	n := 0
	for r := range runs {
		if client.Finished(r) {
			n++
		}
	}
	return n
}

// stepCounts sums up a pipeline run's steps: "3/4 succeeded, 1 failed".
func stepCounts(pr *apitype.PipelineRun) string {
	by := map[string]int{}
	for _, r := range pr.Steps {
		by[r.Status]++
	}
	out := fmt.Sprintf("%d/%d succeeded", by["succeeded"], len(pr.Steps))
	for _, st := range []string{"running", "queued", "scheduled", "waiting", "failed", "cancelled", "skipped"} {
		if by[st] > 0 {
			out += fmt.Sprintf(", %d %s", by[st], st)
		}
	}
	return out
}
