package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func newJobPauseCmd(cfg *config) *cobra.Command {
	return objectCmd(cfg, "pause JOB", "Pause a job's schedule (manual triggers still run it)",
		(*client.Client).PauseJob, showDone[*apitype.Job]("job %s paused"))
}

func newJobResumeCmd(cfg *config) *cobra.Command {
	return objectCmd(cfg, "resume JOB", "Resume a job's schedule: it fires again from now on",
		(*client.Client).ResumeJob, func(w io.Writer, job string, j *apitype.Job) error {
			next := "-"
			if len(j.NextFireTimes) > 0 {
				next = cfg.when(&j.NextFireTimes[0])
			}
			_, err := fmt.Fprintf(w, "job %s resumed; next fire %s\n", job, next)
			return err
		})
}

func newJobWebhookCmd(cfg *config) *cobra.Command {
	return objectCmd(cfg, "webhook JOB", "Create or rotate a job's webhook secret (shown once)",
		(*client.Client).RotateWebhookSecret, cfg.printWebhookSecret)
}

// printWebhookSecret shows a new webhook secret with how to sign a call.
func (cfg *config) printWebhookSecret(w io.Writer, _ string, s *apitype.WebhookSecret) error {
	t := newTable(w)
	t.row("Secret:", s.Secret+"   (shown this once; rotate to replace it)")
	t.row("URL:", cfg.server+s.Path)
	t.row("Signature:", s.Header+": sha256=<hex HMAC-SHA256 of the body, keyed with the secret>")
	t.row("Example:", fmt.Sprintf(`body='{"k":"v"}'; curl -X POST %s%s -H "%s: sha256=$(printf %%s "$body" | openssl dgst -sha256 -hmac '%s' -r | cut -d' ' -f1)" -d "$body"`,
		cfg.server, s.Path, s.Header, s.Secret))
	return t.flush()
}

// defaultBackfillChunk is how many missing instants one call of stint backfill --yes fills
// (config.backfillChunk).
const defaultBackfillChunk = 100

func newBackfillCmd(cfg *config) *cobra.Command {
	var (
		from, to timeFlag
		yes      bool
	)
	cmd := &cobra.Command{
		Use:   "backfill JOB --from T1 --to T2 [--yes]",
		Short: "Create a cron run for each instant of a range that has none (a dry run without --yes)",
		Long: `List the cron instants of a range and whether each has a run (POST /v1/jobs/{id}/backfill
with dry_run); with --yes, create a run for each one that has none, up to now.

With --yes the CLI lists the instants first, then creates the missing runs in calls of 100
instants each, showing a progress bar on a terminal. A backfill that is interrupted keeps
the runs it created: run it again to create the rest (an instant that has a run gets no
other).`,
		Example: "  stint backfill nightly --from 2026-11-01T00:00:00Z --to 2026-11-20T00:00:00Z\n" +
			"  stint backfill nightly --from 2026-11-01T00:00:00Z --to 2026-11-20T00:00:00Z --yes",
		Args: args("JOB"),
	}
	fl := cmd.Flags()
	fl.Var(&from, "from", "first instant of the range (RFC 3339)")
	fl.Var(&to, "to", "last instant of the range (RFC 3339); instants after now are left to the schedule")
	fl.BoolVar(&yes, "yes", false, "create the runs (without it, only list the instants)")
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		if from.t == nil || to.t == nil {
			return Usagef("--from and --to are required")
		}
		call := func(c *client.Client, ctx context.Context) (*apitype.BackfillResponse, error) {
			plan, err := c.Backfill(ctx, argv[0], &apitype.BackfillRequest{From: *from.t, To: *to.t, DryRun: true})
			if err != nil || !yes {
				return plan, err
			}
			return cfg.fillBackfill(cmd, out, c, argv[0], plan)
		}
		return callAndPrint(cmd, cfg, out, call, func(w io.Writer, out *apitype.BackfillResponse) error {
			t := newTable(w, "INSTANT (UTC)", "LOCAL", "STATE")
			missing := 0
			for _, in := range out.Instants {
				state := "has a run"
				switch {
				case in.Existed:
				case in.RunID != "":
					state = "created " + in.RunID
				default:
					state = "missing"
					missing++
				}
				t.row(in.At.UTC().Format(time.RFC3339), in.AtLocal.Format(time.RFC3339), state)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if out.DryRun {
				_, err := fmt.Fprintf(w, "dry run: %d of %d instants have no run; run again with --yes to create them\n", missing, len(out.Instants))
				return err
			}
			_, err := fmt.Fprintf(w, "created %d runs\n", out.Created)
			return err
		})
	}
	return cmd
}

// fillBackfill creates the runs of the instants a dry run (plan) found missing, in calls
// of config.backfillChunk instants each (the range from a chunk's first instant to its
// last), advancing a progress bar, and returns the plan with what the calls did: each
// instant's run, and the runs created in all.
func (cfg *config) fillBackfill(cmd *cobra.Command, o *output, c *client.Client, job string,
	plan *apitype.BackfillResponse) (*apitype.BackfillResponse, error) {
	var missing []time.Time
	for _, in := range plan.Instants {
		if !in.Existed {
			missing = append(missing, in.At)
		}
	}
	chunk := cfg.backfillChunk
	if chunk <= 0 {
		chunk = defaultBackfillChunk
	}
	out := &apitype.BackfillResponse{Instants: plan.Instants}
	at := make(map[time.Time]int, len(out.Instants))
	for i, in := range out.Instants {
		at[in.At.UTC()] = i
	}
	bar := cfg.progressBar(cmd, o, "backfill", len(missing))
	defer bar.Finish()
	for len(missing) > 0 {
		part := missing[:min(chunk, len(missing))]
		missing = missing[len(part):]
		resp, err := c.Backfill(cmd.Context(), job, &apitype.BackfillRequest{From: part[0], To: part[len(part)-1]})
		if err != nil {
			bar.Finish()
			fmt.Fprintf(cmd.ErrOrStderr(), "backfill stopped at %s with %d runs created: run it again to create the rest\n",
				part[0].UTC().Format(time.RFC3339), out.Created)
			return nil, err
		}
		for _, in := range resp.Instants {
			if i, ok := at[in.At.UTC()]; ok {
				out.Instants[i] = in
			} else { // not in the plan: the schedule's grid moved meanwhile
				at[in.At.UTC()] = len(out.Instants)
				out.Instants = append(out.Instants, in)
			}
		}
		out.Created += resp.Created
		bar.Add(len(part))
	}
	slices.SortFunc(out.Instants, func(a, b apitype.BackfillInstant) int { return a.At.Compare(b.At) })
	return out, nil
}

// jobFile is what `stint apply -f` reads: the jobs and pipelines of one namespace.
type jobFile struct {
	Namespace string                 `json:"namespace,omitempty"`
	Jobs      []apitype.JobSpec      `json:"jobs"`
	Pipelines []apitype.PipelineSpec `json:"pipelines,omitempty"`
}

// readJobFile parses a YAML (or JSON) job file. Unknown fields are errors naming the field;
// every job and every pipeline needs a name, once.
func readJobFile(b []byte) (*jobFile, error) {
	var f jobFile
	if err := decodeFile(b, "job file", &f); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for i, j := range f.Jobs {
		switch {
		case j.Name == "":
			return nil, fmt.Errorf("jobs[%d].name: every job of a file needs a name", i)
		case j.Namespace != "" && j.Namespace != f.Namespace:
			return nil, fmt.Errorf("jobs[%d].namespace: set the file's namespace instead (jobs of a file share it)", i)
		}
		if k, dup := seen[j.Name]; dup {
			return nil, fmt.Errorf("jobs[%d].name: %q is also jobs[%d]", i, j.Name, k)
		}
		seen[j.Name] = i
	}
	seen = map[string]int{}
	for i, p := range f.Pipelines {
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("pipelines[%d].name: every pipeline of a file needs a name", i)
		case p.Namespace != "" && p.Namespace != f.Namespace:
			return nil, fmt.Errorf("pipelines[%d].namespace: set the file's namespace instead (pipelines of a file share it)", i)
		}
		if k, dup := seen[p.Name]; dup {
			return nil, fmt.Errorf("pipelines[%d].name: %q is also pipelines[%d]", i, p.Name, k)
		}
		seen[p.Name] = i
	}
	return &f, nil
}

func newApplyCmd(cfg *config) *cobra.Command {
	var (
		file          string
		prune, dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "apply -f FILE [--prune] [--dry-run]",
		Short: "Create or update the jobs and pipelines of a file by name, and print what changed",
		Long: `Make the server's jobs and pipelines match a file (YAML or JSON):

    namespace: reports        # optional; default "default"
    jobs:
      - name: nightly
        command: [python3, report.py]
        schedule: {cron: "0 2 * * *", timezone: Europe/Berlin}
    pipelines:                # optional: see stint pipelines put --help
      - name: etl
        schedule: {cron: "0 3 * * *"}
        steps:
          extract: {command: [./extract.sh]}
          load:    {command: [./load.sh], depends_on: [{ref: extract}]}

Each job is created when missing and updated when it differs; the output says which
fields changed. Each pipeline is created or its definition replaced (PUT
/v1/pipelines/{name}). --prune deletes the jobs of the namespace that the file no longer
has (the jobs of pipelines' steps are kept; pipelines are never pruned).`,
		Args: args(),
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the job file (- for standard input)")
	cmd.Flags().BoolVar(&prune, "prune", false, "delete the namespace's jobs that the file does not list")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would change, change nothing")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		b, err := readFileFlag(cmd, file)
		if err != nil {
			return err
		}
		f, err := readJobFile(b)
		if err == nil {
			err = expandFileSecrets(f, cfg.getenv)
		}
		if err != nil {
			return Usagef("%s: %w", file, err)
		}
		c, err := cfg.client(cmd)
		if err != nil {
			return err
		}
		if f.Namespace == "" {
			f.Namespace = cfg.namespace // --namespace / STINT_NAMESPACE, when the file names none
		}
		bar := cfg.progressBar(cmd, nil, "apply", len(f.Jobs)+len(f.Pipelines))
		w := bar.Writer(cmd.OutOrStdout()) // the lines of what changed go above the bar
		suffix := ""
		if dryRun {
			suffix = " (dry run)"
		}
		var failed error
		for i := range f.Jobs {
			res, err := c.ApplyJob(cmd.Context(), f.Namespace, &f.Jobs[i], dryRun)
			bar.Add(1)
			if err != nil {
				fmt.Fprintf(w, "job/%s failed: %v\n", f.Jobs[i].Name, err)
				failed = errors.Join(failed, err)
				continue
			}
			line := fmt.Sprintf("job/%s %s", f.Jobs[i].Name, res.Action)
			if len(res.Changes) > 0 {
				line += fmt.Sprintf(" (%s)", strings.Join(res.Changes, ", "))
			}
			fmt.Fprintln(w, line+suffix)
		}
		for i := range f.Pipelines {
			p := &f.Pipelines[i]
			pl, created, err := c.ApplyPipeline(cmd.Context(), f.Namespace, p, dryRun)
			bar.Add(1)
			if err != nil {
				fmt.Fprintf(w, "pipeline/%s failed: %v\n", p.Name, err)
				failed = errors.Join(failed, err)
				continue
			}
			fmt.Fprintln(w, pipelineAction(p.Name, created, len(pl.Steps))+suffix)
		}
		bar.Finish()
		if prune && failed == nil {
			if err := pruneJobs(cmd, c, f, dryRun, suffix); err != nil {
				return err
			}
		}
		if failed != nil {
			return &exitError{code: 1}
		}
		return nil
	}
	return cmd
}

// pruneJobs deletes the jobs of the file's namespace that the file does not list.
func pruneJobs(cmd *cobra.Command, c *client.Client, f *jobFile, dryRun bool, suffix string) error {
	ns := f.Namespace
	if ns == "" {
		ns = "default"
	}
	keep := map[string]bool{}
	for _, j := range f.Jobs {
		keep[j.Name] = true
	}
	for _, p := range f.Pipelines { // the jobs of the file's pipelines' steps
		for step := range p.Steps {
			keep[p.Name+"."+step] = true
		}
	}
	var gone []*apitype.Job
	opts := client.ListJobsOptions{Namespace: ns, Limit: 1000}
	for {
		page, err := c.ListJobs(cmd.Context(), opts)
		if err != nil {
			return err
		}
		for _, j := range page.Items {
			if !keep[j.Name] {
				gone = append(gone, j)
			}
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	gone, err := withoutStepJobs(cmd.Context(), c, ns, gone)
	if err != nil {
		return err
	}
	slices.SortFunc(gone, func(a, b *apitype.Job) int { return strings.Compare(a.Name, b.Name) })
	for _, j := range gone {
		if !dryRun {
			if _, err := c.DeleteJob(cmd.Context(), j.ID); err != nil {
				return err
			}
		}
		fmt.Fprintf(cmd.OutOrStdout(), "job/%s deleted (pruned)%s\n", j.Name, suffix)
	}
	return nil
}

// withoutStepJobs drops from jobs those that run a step of a pipeline of namespace ns (a
// pipeline applied from another file, say): pruning them would break the pipeline. Step
// jobs are named pipeline.step, so the pipelines are only asked for when a job's name has a
// dot.
func withoutStepJobs(ctx context.Context, c *client.Client, ns string, jobs []*apitype.Job) ([]*apitype.Job, error) {
	if !slices.ContainsFunc(jobs, func(j *apitype.Job) bool { return strings.Contains(j.Name, ".") }) {
		return jobs, nil
	}
	pls, err := c.ListPipelinesIn(ctx, ns)
	if err != nil {
		return nil, err
	}
	steps := map[string]bool{}
	for _, p := range pls.Items {
		for _, s := range p.Steps {
			steps[s.JobID] = true
		}
	}
	return slices.DeleteFunc(jobs, func(j *apitype.Job) bool { return steps[j.ID] }), nil
}
