package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
)

func newQueuesCmd(cfg *config) *cobra.Command {
	return group("queues", "List queues, pause and resume them, change their settings",
		newQueueListCmd(cfg),
		newQueueGetCmd(cfg),
		newQueuePauseCmd(cfg, "pause", true),
		newQueuePauseCmd(cfg, "resume", false),
		newQueueSetCmd(cfg),
	)
}

func newQueueListCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List queues with their settings and how many runs wait in each",
		Args:    args(),
	}
	asJSON := addJSONFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := cfg.client(cmd)
		if err != nil {
			return err
		}
		list, err := c.ListQueues(cmd.Context())
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), list)
		}
		return printQueues(cmd.OutOrStdout(), list.Items...)
	}
	return cmd
}

func newQueueGetCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get QUEUE",
		Short: "Show a queue's settings and how many runs wait in it",
		Args:  args("QUEUE"),
	}
	asJSON := addJSONFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		c, err := cfg.client(cmd)
		if err != nil {
			return err
		}
		q, err := c.GetQueue(cmd.Context(), argv[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), q)
		}
		return printQueues(cmd.OutOrStdout(), q)
	}
	return cmd
}

// printQueues shows queues as a table.
func printQueues(w io.Writer, queues ...*apitype.Queue) error {
	t := newTable(w, "NAME", "PAUSED", "PRIORITY", "MAX CONCURRENCY", "WAITING", "SCHEDULED", "QUEUED", "RUNNING")
	for _, q := range queues {
		limit := "-"
		if q.MaxConcurrency > 0 {
			limit = fmt.Sprint(q.MaxConcurrency)
		}
		t.row(q.Name, yesNo(q.Paused), fmt.Sprint(q.Priority), limit,
			fmt.Sprint(q.Depth["waiting"]), fmt.Sprint(q.Depth["scheduled"]), fmt.Sprint(q.Depth["queued"]), fmt.Sprint(q.Depth["running"]))
	}
	return t.flush()
}

func newQueuePauseCmd(cfg *config, use string, pause bool) *cobra.Command {
	short := "Pause a queue: its runs wait until it is resumed"
	if !pause {
		short = "Resume a paused queue"
	}
	cmd := &cobra.Command{
		Use:   use + " QUEUE",
		Short: short,
		Args:  args("QUEUE"),
	}
	asJSON := addJSONFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		done := "paused"
		if !pause {
			done = "resumed"
		}
		return updateQueue(cmd, cfg, *asJSON, argv[0], &apitype.QueuePatch{Paused: &pause}, "queue "+argv[0]+" "+done)
	}
	return cmd
}

func newQueueSetCmd(cfg *config) *cobra.Command {
	var maxConcurrency, priority int
	cmd := &cobra.Command{
		Use:     "set QUEUE",
		Short:   "Change a queue's max concurrency or priority",
		Example: "  stint queues set reports --max-concurrency 4 --priority 10",
		Args:    args("QUEUE"),
	}
	cmd.Flags().IntVar(&maxConcurrency, "max-concurrency", 0, "max runs of the queue at once (0: no limit)")
	cmd.Flags().IntVar(&priority, "priority", 0, "queue priority; higher queues are served first")
	asJSON := addJSONFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		var patch apitype.QueuePatch
		if cmd.Flags().Changed("max-concurrency") {
			if maxConcurrency < 0 {
				return Usagef("--max-concurrency: must not be negative")
			}
			patch.MaxConcurrency = &maxConcurrency
		}
		if cmd.Flags().Changed("priority") {
			patch.Priority = &priority
		}
		if patch.MaxConcurrency == nil && patch.Priority == nil {
			return Usagef("nothing to set: give --max-concurrency or --priority")
		}
		return updateQueue(cmd, cfg, *asJSON, argv[0], &patch, "queue "+argv[0]+" updated")
	}
	return cmd
}

func updateQueue(cmd *cobra.Command, cfg *config, asJSON bool, name string, patch *apitype.QueuePatch, done string) error {
	c, err := cfg.client(cmd)
	if err != nil {
		return err
	}
	q, err := c.UpdateQueue(cmd.Context(), name, patch)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(cmd.OutOrStdout(), q)
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), done)
	return err
}
