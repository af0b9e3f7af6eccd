package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// completeTimeout bounds the calls that shell completion makes to the server: a slow or
// absent server completes nothing rather than hanging the shell.
const completeTimeout = 2 * time.Second

// lister lists the candidates of a completion, each "value\tdescription".
type lister func(context.Context, *client.Client) ([]string, error)

// completers return the listers that complete the first argument of a command by the
// placeholder its Use names: candidates from the server, each with a description.
func completers() map[string]lister {
	return map[string]lister{
		"RUN_ID": func(ctx context.Context, c *client.Client) ([]string, error) {
			list, err := c.ListRuns(ctx, client.ListRunsOptions{Limit: 100})
			if err != nil {
				return nil, err
			}
			out := make([]string, 0, len(list.Items))
			for _, r := range list.Items {
				out = append(out, r.ID+"\t"+strings.TrimSpace(orDash(jobOf(r))+" "+r.Status))
			}
			return out, nil
		},
		"JOB": func(ctx context.Context, c *client.Client) ([]string, error) {
			list, err := c.ListJobs(ctx, client.ListJobsOptions{Limit: 100})
			if err != nil {
				return nil, err
			}
			out := make([]string, 0, len(list.Items))
			for _, j := range list.Items {
				out = append(out, j.Name+"\t"+jobLabel(j)+" "+schedule(j.Schedule))
			}
			return out, nil
		},
		"QUEUE": func(ctx context.Context, c *client.Client) ([]string, error) {
			list, err := c.ListQueues(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]string, 0, len(list.Items))
			for _, q := range list.Items {
				out = append(out, fmt.Sprintf("%s\tqueued %d, running %d", q.Name, q.Depth["queued"], q.Depth["running"]))
			}
			return out, nil
		},
		"WORKER_ID": func(ctx context.Context, c *client.Client) ([]string, error) {
			list, err := c.ListWorkers(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]string, 0, len(list.Items))
			for _, w := range list.Items {
				out = append(out, fmt.Sprintf("%s\t%s, %d running", w.ID, w.State, w.Running))
			}
			return out, nil
		},
		"PIPELINE": func(ctx context.Context, c *client.Client) ([]string, error) {
			list, err := c.ListPipelines(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]string, 0, len(list.Items))
			for _, p := range list.Items {
				out = append(out, p.Name+"\t"+stepsOf(p))
			}
			return out, nil
		},
	}
}

func stepsOf(p *apitype.Pipeline) string {
	if len(p.Steps) == 1 {
		return "1 step"
	}
	return fmt.Sprintf("%d steps", len(p.Steps))
}

// addCompletion gives each command under cmd whose first argument is a RUN_ID, JOB, QUEUE,
// WORKER_ID or PIPELINE a completion of it from the server.
func addCompletion(cfg *config, cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		addCompletion(cfg, sub)
	}
	fields := strings.Fields(cmd.Use)
	if cmd.ValidArgsFunction != nil || len(fields) < 2 {
		return
	}
	list, ok := completers()[fields[1]]
	if !ok {
		return
	}
	cmd.ValidArgsFunction = func(cmd *cobra.Command, argv []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(argv) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := cfg.client(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
		defer cancel()
		out, err := list(ctx, c)
		if err != nil {
			cobra.CompDebugln(fmt.Sprintf("complete %s: %v", fields[1], err), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
