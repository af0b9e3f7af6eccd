package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func newRunsCmd(cfg *config) *cobra.Command {
	return group("runs", "Show, list, cancel and retry runs",
		newRunGetCmd(cfg),
		newRunListCmd(cfg),
		newRunCancelCmd(cfg, "cancel"),
		newRunRetryCmd(cfg, "retry"),
	)
}

func newRunGetCmd(cfg *config) *cobra.Command {
	return objectCmd(cfg, "get RUN_ID", "Show a run and its attempts", (*client.Client).GetRun, showWith(cfg.printRun))
}

func newRunListCmd(cfg *config) *cobra.Command {
	var opts client.ListRunsOptions
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List runs, newest first",
		Args:    args(),
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Job, "job", "", "only the runs of this job (name or id)")
	fl.StringVar(&opts.Status, "status", "", "only runs in this status (waiting, scheduled, queued, running, succeeded, failed, cancelled, skipped)")
	fl.StringVar(&opts.Queue, "queue", "", "only runs of this queue")
	fl.StringVar(&opts.Worker, "worker", "", "only runs on this worker")
	fl.IntVar(&opts.Limit, "limit", 0, "at most this many runs (default: the server's page size)")
	fl.StringVar(&opts.Cursor, "cursor", "", "start after this cursor (the last page's next cursor)")
	out := addOutputFlags(cmd)
	addWatchFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if opts.Limit < 0 {
			return Usagef("--limit: must not be negative")
		}
		return callAndPrint(cmd, cfg, out, bind((*client.Client).ListRuns, opts), func(w io.Writer, list *apitype.RunList) error {
			t := newTable(w, "ID", "JOB", "+JOB ID", "+NAMESPACE", "STATUS", "QUEUE", "ATTEMPT", "+WORKER", "TRIGGER", "CREATED", "DURATION")
			for _, r := range list.Items {
				t.row(r.ID, orDash(jobOf(r)), r.JobID, r.Namespace, runStatus(r), r.Queue, attemptOf(r), orDash(r.WorkerID), r.Trigger,
					cfg.ago(&r.CreatedAt), cfg.elapsed(r.StartedAt, r.FinishedAt))
			}
			return flushPage(cmd, t, list.NextCursor)
		})
	}
	return cmd
}

func newRunCancelCmd(cfg *config, use string) *cobra.Command {
	return objectCmd(cfg, use+" RUN_ID", "Cancel a run; a running attempt is stopped",
		(*client.Client).CancelRun, showRunAction("run %s cancelled"))
}

func newRunRetryCmd(cfg *config, use string) *cobra.Command {
	return objectCmd(cfg, use+" RUN_ID", "Retry a failed or cancelled run as a new attempt",
		(*client.Client).RetryRun, showRunAction("run %s retried"))
}

// printRun shows one run and its attempts.
func (cfg *config) printRun(w io.Writer, r *apitype.Run) error {
	t := newTable(w)
	t.row("ID:", r.ID)
	job := r.JobID
	if name := jobOf(r); name != "" && r.JobID != "" {
		job = name + " (" + r.JobID + ")"
	} else if name != "" {
		job = name
	}
	t.row("Job:", job)
	t.row("Status:", runStatus(r))
	if r.PendingReason != "" && !client.Finished(r) {
		t.row("Waiting:", r.PendingReason)
	}
	if r.Error != "" {
		t.row("Error:", r.Error)
	}
	t.row("Queue:", r.Queue)
	t.row("Priority:", fmt.Sprint(r.Priority))
	t.row("Trigger:", r.Trigger)
	if len(r.Args) > 0 {
		t.row("Args:", string(r.Args))
	}
	if r.IdempotencyKey != "" {
		t.row("Idempotency key:", r.IdempotencyKey)
	}
	for i, d := range r.DependsOn {
		label := ""
		if i == 0 {
			label = "Depends on:"
		}
		t.row(label, d.Run+" "+d.Condition)
	}
	t.row("Scheduled for:", cfg.when(&r.ScheduledFor))
	t.row("Created:", cfg.when(&r.CreatedAt))
	t.row("Started:", cfg.when(r.StartedAt))
	t.row("Finished:", cfg.when(r.FinishedAt))
	t.row("Duration:", cfg.elapsed(r.StartedAt, r.FinishedAt))
	t.row("Attempt:", attemptOf(r))
	if r.Disruptions > 0 {
		t.row("Disruptions:", fmt.Sprintf("%d (attempts lost to a dead worker or server, not counted)", r.Disruptions))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(r.Attempts) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nAttempts:")
	t = newTable(w, "  N", "WORKER", "STATUS", "EXIT", "STARTED", "DURATION", "ERROR")
	for _, a := range r.Attempts {
		exit := "-"
		if a.ExitCode != nil {
			exit = fmt.Sprint(*a.ExitCode)
		}
		t.row(fmt.Sprintf("  %d", a.N), orDash(a.WorkerID), a.Status, exit, cfg.ago(&a.StartedAt), cfg.elapsed(&a.StartedAt, a.FinishedAt), orDash(a.Error))
	}
	return t.flush()
}

// jobOf names a run's job: by name; a job submitted without one (its name is its id)
// is "-", its id being in the JOB ID column of -o wide and in runs get.
func jobOf(r *apitype.Run) string {
	if r.JobName == r.JobID {
		return ""
	}
	return r.JobName
}

// runStatus is the status word, with the pending code of a run that waits and a note on a
// run that is being cancelled.
func runStatus(r *apitype.Run) string {
	s := r.Status
	switch {
	case r.CancelRequested && !client.Finished(r):
		s += " (cancelling)"
	case r.PendingCode != "" && !client.Finished(r):
		s += " (" + r.PendingCode + ")"
	}
	return s
}

// flushPage ends a page of a list: it flushes the table, then tells, on the error output so
// that stdout stays a table, how to get the next page.
func flushPage(cmd *cobra.Command, t *table, cursor string) error {
	if err := t.flush(); err != nil {
		return err
	}
	if cursor != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "more: --cursor %s\n", cursor)
	}
	return nil
}
