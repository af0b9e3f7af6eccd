package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func newJobsCmd(cfg *config) *cobra.Command {
	return group("jobs", "List, show, trigger, cancel, enable, disable, pause, resume and delete jobs",
		newJobListCmd(cfg),
		newJobGetCmd(cfg),
		newJobDeleteCmd(cfg),
		newJobTriggerCmd(cfg),
		newJobCancelCmd(cfg),
		newJobEnableCmd(cfg, "enable", true),
		newJobEnableCmd(cfg, "disable", false),
		newJobPauseCmd(cfg),
		newJobResumeCmd(cfg),
		newJobWebhookCmd(cfg),
	)
}

func newJobListCmd(cfg *config) *cobra.Command {
	var opts client.ListJobsOptions
	var enabled bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List jobs",
		Args:    args(),
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Queue, "queue", "", "only the jobs of this queue")
	fl.BoolVar(&enabled, "enabled", false, "only enabled jobs (--enabled=false: only disabled ones)")
	fl.IntVar(&opts.Limit, "limit", 0, "at most this many jobs (default: the server's page size)")
	fl.StringVar(&opts.Cursor, "cursor", "", "start after this cursor (the last page's next cursor)")
	out := addOutputFlags(cmd)
	addWatchFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if opts.Limit < 0 {
			return Usagef("--limit: must not be negative")
		}
		if cmd.Flags().Changed("enabled") {
			opts.Enabled = &enabled
		}
		cfg.fromEnv(cmd)
		opts.Namespace = cfg.namespace
		return callAndPrint(cmd, cfg, out, bind((*client.Client).ListJobs, opts), func(w io.Writer, list *apitype.JobList) error {
			t := newTable(w, "NAME", "ID", "+NAMESPACE", "QUEUE", "+PRIORITY", "SCHEDULE", "ENABLED", "LAST RUN", "+LAST RUN ID", "NEXT", "+TAGS")
			for _, j := range list.Items {
				last, lastID := "-", "-"
				if j.LastRun != nil {
					last = j.LastRun.Status + " " + cfg.ago(&j.LastRun.CreatedAt)
					lastID = j.LastRun.ID
				}
				next := "-"
				if len(j.NextFireTimes) > 0 {
					next = cfg.ago(&j.NextFireTimes[0])
				}
				t.row(jobLabel(j), j.ID, j.Namespace, j.Queue, fmt.Sprint(j.Priority), schedule(j.Schedule), yesNo(j.Enabled),
					last, lastID, next, orDash(strings.Join(j.Tags, ",")))
			}
			return flushPage(cmd, t, list.NextCursor)
		})
	}
	return cmd
}

func newJobGetCmd(cfg *config) *cobra.Command {
	return objectCmd(cfg, "get JOB", "Show a job (by name or id)", (*client.Client).GetJob, showWith(cfg.printJob))
}

func newJobDeleteCmd(cfg *config) *cobra.Command {
	cmd := objectCmd(cfg, "delete JOB", "Delete a job; its active runs are cancelled", (*client.Client).DeleteJob,
		func(w io.Writer, job string, resp *apitype.CancelResponse) error {
			fmt.Fprintf(w, "job %s deleted\n", job)
			printRunOutcomes(w, resp.Items)
			return nil
		})
	cmd.Aliases = []string{"rm"}
	return cmd
}

func newJobTriggerCmd(cfg *config) *cobra.Command {
	var runArgs kvFlag
	var req apitype.TriggerRequest
	trigger := func(c *client.Client, ctx context.Context, job string) (*apitype.Run, error) {
		a, err := runArgs.json()
		if err != nil {
			return nil, err
		}
		req.Args = a
		return c.TriggerJob(ctx, job, &req)
	}
	cmd := objectCmd(cfg, "trigger JOB", "Start a run of a job now", trigger, showRunAction("job %s triggered"))
	cmd.Flags().Var(&runArgs, "arg", "argument KEY=VALUE of the run, repeatable")
	cmd.Flags().StringVar(&req.IdempotencyKey, "idempotency-key", "", "triggering again with the same key starts nothing new")
	return cmd
}

func newJobCancelCmd(cfg *config) *cobra.Command {
	return objectCmd(cfg, "cancel JOB", "Cancel every active run of a job", (*client.Client).CancelJob,
		func(w io.Writer, job string, resp *apitype.CancelResponse) error {
			if len(resp.Items) == 0 {
				_, err := fmt.Fprintf(w, "job %s has no active runs\n", job)
				return err
			}
			printRunOutcomes(w, resp.Items)
			return nil
		})
}

func newJobEnableCmd(cfg *config, use string, enable bool) *cobra.Command {
	short := "Enable a job: its schedule fires again"
	if !enable {
		short = "Disable a job: its schedule stops firing"
	}
	update := func(c *client.Client, ctx context.Context, job string) (*apitype.Job, error) {
		return c.UpdateJob(ctx, job, &apitype.JobPatch{Enabled: &enable})
	}
	return objectCmd(cfg, use+" JOB", short, update, showDone[*apitype.Job]("job %s "+use+"d"))
}

// jobLabel names a job for a person: its name; for a job submitted without one (whose
// name is its id), the entry of its ad-hoc DAG, or what it runs, shortened.
func jobLabel(j *apitype.Job) string {
	if j.Name != j.ID {
		return j.Name
	}
	if j.DAG != nil && j.DAG.Entry != "" {
		return j.DAG.Entry + " (dag)"
	}
	what := j.Handler
	switch {
	case len(j.Command) > 0:
		what = strings.Join(j.Command, " ")
	case j.Shell != "":
		what = j.Shell
	}
	if what == "" {
		return j.ID
	}
	const width = 32
	if r := []rune(what); len(r) > width {
		what = string(r[:width-1]) + "…"
	}
	return "(" + what + ")"
}

// printJob shows one job.
func (cfg *config) printJob(w io.Writer, j *apitype.Job) error {
	t := newTable(w)
	t.row("Name:", j.Name)
	t.row("ID:", j.ID)
	if j.Namespace != "" {
		t.row("Namespace:", j.Namespace)
	}
	switch {
	case len(j.Command) > 0:
		t.row("Command:", strings.Join(j.Command, " "))
	case j.Shell != "":
		t.row("Shell:", j.Shell)
	case j.Handler != "":
		t.row("Handler:", j.Handler)
	}
	if len(j.Args) > 0 {
		t.row("Args:", string(j.Args))
	}
	if len(j.Env) > 0 {
		// Names only: values may be secrets; --json shows them.
		t.row("Env:", strings.Join(slices.Sorted(maps.Keys(j.Env)), ","))
	}
	if len(j.SecretEnv) > 0 { // the server shows names only (values "***")
		t.row("Secret env:", strings.Join(slices.Sorted(maps.Keys(j.SecretEnv)), ","))
	}
	if j.Dir != "" {
		t.row("Dir:", j.Dir)
	}
	t.row("Queue:", j.Queue)
	t.row("Priority:", fmt.Sprint(j.Priority))
	t.row("Requirements:", requirements(j.Requirements))
	if j.Timeout != nil {
		t.row("Timeout:", j.Timeout.Std().String())
	}
	t.row("Retry:", retry(j.Retry))
	scheduleRows(t, j.Schedule)
	for i := range j.NextFireTimes {
		label := ""
		if i == 0 {
			label = "Next fires:"
		}
		local := ""
		if i < len(j.NextFireTimesLocal) {
			local = j.NextFireTimesLocal[i].Format(time.RFC3339) + "  "
		}
		t.row(label, local+cfg.when(&j.NextFireTimes[i]))
	}
	if j.Concurrency.Policy != "" {
		c := j.Concurrency.Policy
		if j.Concurrency.Max > 0 {
			c += fmt.Sprintf(", max %d", j.Concurrency.Max)
		}
		t.row("Concurrency:", c)
	}
	if len(j.Tags) > 0 {
		t.row("Tags:", strings.Join(j.Tags, ","))
	}
	t.row("Enabled:", yesNo(j.Enabled))
	t.row("Created:", cfg.when(&j.CreatedAt))
	t.row("Updated:", cfg.when(&j.UpdatedAt))
	if r := j.LastRun; r != nil {
		t.row("Last run:", fmt.Sprintf("%s %s %s", r.ID, r.Status, cfg.ago(&r.CreatedAt)))
	}
	return t.flush()
}

func schedule(s *apitype.Schedule) string {
	if s == nil || s.Cron == "" {
		return "-"
	}
	out := s.Cron
	if s.Timezone != "" {
		out += " (" + s.Timezone + ")"
	}
	if s.Paused {
		out += " paused"
	}
	return out
}

func requirements(r apitype.Requirements) string {
	var parts []string
	if r.CPU > 0 {
		parts = append(parts, fmt.Sprintf("cpu %g", r.CPU))
	}
	if r.MemoryMB > 0 {
		parts = append(parts, fmt.Sprintf("memory %dMi", r.MemoryMB))
	}
	if r.GPU > 0 {
		parts = append(parts, fmt.Sprintf("gpu %d", r.GPU))
	}
	if len(r.Labels) > 0 {
		parts = append(parts, "labels "+pairs(r.Labels))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func retry(r apitype.RetryPolicy) string {
	if r.MaxAttempts == 0 {
		return "-"
	}
	s := fmt.Sprintf("max %d attempts", r.MaxAttempts)
	if r.MaxAttempts == 1 {
		s = "max 1 attempt"
	}
	if r.InitialDelay != nil {
		s += ", backoff " + r.InitialDelay.Std().String()
		if r.Multiplier > 0 {
			s += fmt.Sprintf(" x%g", r.Multiplier)
		}
		if r.MaxDelay != nil {
			s += " up to " + r.MaxDelay.Std().String()
		}
	}
	if r.MaxDisruptions != nil {
		s += fmt.Sprintf(", %d disruptions", *r.MaxDisruptions)
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// scheduleRows shows a schedule and, when there is one, its misfire policy.
func scheduleRows(t *table, s *apitype.Schedule) {
	t.row("Schedule:", schedule(s))
	if s != nil {
		misfire := s.Misfire
		if misfire == "" {
			misfire = "run_once"
		}
		t.row("Misfire:", misfire)
	}
}
