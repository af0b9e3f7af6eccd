package cli

import (
	"time"

	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
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
	return listCmd(cfg, "List queues with their settings and how many runs wait in each", (*client.Client).ListQueues,
		func(w io.Writer, list *apitype.QueueList) error { return printQueues(w, list.Items...) })
}

func newQueueGetCmd(cfg *config) *cobra.Command {
	return objectCmd(cfg, "get QUEUE", "Show a queue's settings and how many runs wait in it", (*client.Client).GetQueue,
		showWith(func(w io.Writer, q *apitype.Queue) error { return printQueues(w, q) }))
}

// printQueues shows queues as a table.
func printQueues(w io.Writer, queues ...*apitype.Queue) error {
	t := newTable(w, "NAME", "PAUSED", "PRIORITY", "MAX CONCURRENCY", "RATE", "WAITING", "SCHEDULED", "QUEUED", "RUNNING")
	for _, q := range queues {
		limit := "-"
		if q.MaxConcurrency > 0 {
			limit = fmt.Sprint(q.MaxConcurrency)
		}
		t.row(q.Name, yesNo(q.Paused), fmt.Sprint(q.Priority), limit, rateOf(q.RateLimit),
			fmt.Sprint(q.Depth["waiting"]), fmt.Sprint(q.Depth["scheduled"]), fmt.Sprint(q.Depth["queued"]), fmt.Sprint(q.Depth["running"]))
	}
	return t.flush()
}

func newQueuePauseCmd(cfg *config, use string, pause bool) *cobra.Command {
	short, done := "Pause a queue: its runs wait until it is resumed", "queue %s paused"
	if !pause {
		short, done = "Resume a paused queue", "queue %s resumed"
	}
	update := func(c *client.Client, ctx context.Context, name string) (*apitype.Queue, error) {
		return c.UpdateQueue(ctx, name, &apitype.QueuePatch{Paused: &pause})
	}
	return objectCmd(cfg, use+" QUEUE", short, update, showDone[*apitype.Queue](done))
}

func newQueueSetCmd(cfg *config) *cobra.Command {
	var (
		maxConcurrency, priority int
		rate                     string
		create                   bool
		alerts                   apitype.QueueAlerts
		alertAge                 time.Duration
	)
	cmd := &cobra.Command{
		Use:   "set QUEUE",
		Short: "Change a queue's max concurrency, priority, rate limit or alert thresholds",
		Example: "  stint queues set reports --max-concurrency 4 --priority 10\n  stint queues set mail --rate 100/1m --create\n" +
			"  stint queues set gpu --alert-max-backlog 100 --alert-max-age 30m",
		Args: args("QUEUE"),
	}
	cmd.Flags().BoolVar(&create, "create", false, "create the queue if it does not exist yet (a queue exists once a job uses it)")
	cmd.Flags().IntVar(&maxConcurrency, "max-concurrency", 0, "max runs of the queue at once (0: no limit)")
	cmd.Flags().IntVar(&priority, "priority", 0, "queue priority; higher queues are served first")
	cmd.Flags().StringVar(&rate, "rate", "", `at most N runs start per DURATION: "N/DURATION" such as 100/1m ("0" removes the limit)`)
	cmd.Flags().IntVar(&alerts.MaxBacklog, "alert-max-backlog", 0, "queued runs above which queue_backlog fires (0: the server's default)")
	cmd.Flags().DurationVar(&alertAge, "alert-max-age", 0, "oldest queued run's age above which queue_backlog fires (0: the server's default)")
	cmd.Flags().BoolVar(&alerts.Off, "alerts-off", false, "no queue_backlog alert for this queue")
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		var patch apitype.QueuePatch
		if fl := cmd.Flags(); fl.Changed("alert-max-backlog") || fl.Changed("alert-max-age") || fl.Changed("alerts-off") {
			// The three together replace the queue's thresholds.
			if alertAge != 0 {
				d := apitype.Duration(alertAge)
				alerts.MaxAge = &d
			}
			patch.Alerts = &alerts
		}
		if cmd.Flags().Changed("max-concurrency") {
			if maxConcurrency < 0 {
				return Usagef("--max-concurrency: must not be negative")
			}
			patch.MaxConcurrency = &maxConcurrency
		}
		if cmd.Flags().Changed("priority") {
			patch.Priority = &priority
		}
		if rate != "" {
			r, err := parseRate(rate)
			if err != nil {
				return err
			}
			patch.RateLimit = r
		}
		if patch.MaxConcurrency == nil && patch.Priority == nil && patch.RateLimit == nil && patch.Alerts == nil {
			return Usagef("nothing to set: give --max-concurrency, --priority, --rate or an --alert flag")
		}
		update := func(c *client.Client, ctx context.Context) (*apitype.Queue, error) {
			if create {
				return c.CreateQueue(ctx, argv[0], &patch)
			}
			return c.UpdateQueue(ctx, argv[0], &patch)
		}
		return callAndPrint(cmd, cfg, out, update, func(w io.Writer, _ *apitype.Queue) error {
			return showDone[*apitype.Queue]("queue %s updated")(w, argv[0], nil)
		})
	}
	return cmd
}

// rateOf shows a rate limit as --rate takes it, "100/1m0s", or "-" for none.
func rateOf(r *apitype.RateLimit) string {
	if r == nil || r.Rate == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%s", r.Rate, r.Per.Std())
}
