package cli

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

func newAlertsCmd(cfg *config) *cobra.Command {
	var opts client.ListAlertsOptions
	cmd := &cobra.Command{
		Use:   "alerts",
		Short: "List alerts, newest first: those firing and the resolved ones",
		Long: "List the server's alerts, newest first. Rules: job_failing (a job's runs failed N times in\n" +
			"a row), cron_late (a cron instant did not start within its grace), queue_backlog, worker_lost,\n" +
			"run_too_long. See docs/alerts.md for the thresholds and the notification channels.",
		Example: "  stint alerts --state firing\n  stint alerts --json",
		Args:    args(),
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.State, "state", "", "only alerts in this state: firing or resolved")
	fl.StringVar(&opts.Before, "before", "", "only alerts older than this alert id (paging)")
	fl.IntVar(&opts.Limit, "limit", 0, "at most this many alerts (default: the server's page size)")
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		switch {
		case opts.State != "" && opts.State != "firing" && opts.State != "resolved":
			return Usagef("--state: must be firing or resolved")
		case opts.Limit < 0:
			return Usagef("--limit: must not be negative")
		}
		return callAndPrint(cmd, cfg, out, bind((*client.Client).ListAlerts, opts), func(w io.Writer, list *apitype.AlertList) error {
			t := newTable(w, "ID", "STATE", "RULE", "SUBJECT", "STARTED", "RESOLVED", "SUMMARY")
			for _, a := range list.Alerts {
				t.row(a.ID, strings.ToUpper(a.State), a.Rule, a.Subject, cfg.ago(&a.StartedAt), cfg.ago(a.ResolvedAt), a.Summary)
			}
			return t.flush()
		})
	}
	return cmd
}

func newAuditCmd(cfg *config) *cobra.Command {
	var opts client.ListAuditOptions
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit log: every change made through the API, newest first",
		Long: "Read the audit log: who changed what and when, newest first. --json shows each entry's\n" +
			"before and after (the object as the API shows it, secret values masked).",
		Example: "  stint audit\n  stint audit --target job:01J0ABC... --json\n  stint audit --actor 'ci (01J0XYZ...)'",
		Args:    args(),
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Target, "target", "", "only entries of this target (job:<id>, run:<id>, queue:<name>, token:<id>, ...)")
	fl.StringVar(&opts.Actor, "actor", "", "only entries of this actor, as the log names it")
	fl.StringVar(&opts.Before, "before", "", "only entries older than this entry id (paging)")
	fl.IntVar(&opts.Limit, "limit", 0, "at most this many entries (default: the server's page size)")
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if opts.Limit < 0 {
			return Usagef("--limit: must not be negative")
		}
		return callAndPrint(cmd, cfg, out, bind((*client.Client).ListAudit, opts), func(w io.Writer, list *apitype.AuditList) error {
			t := newTable(w, "ID", "WHEN", "ACTOR", "ROLE", "ACTION", "TARGET")
			for _, e := range list.Entries {
				t.row(e.ID, cfg.ago(&e.At), e.Actor, orDash(e.Role), e.Action, e.Target)
			}
			return t.flush()
		})
	}
	return cmd
}
