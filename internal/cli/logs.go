package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/client"
)

func newLogsCmd(cfg *config) *cobra.Command {
	var (
		opts client.LogsOptions
		tail int
	)
	cmd := &cobra.Command{
		Use:   "logs RUN_ID",
		Short: "Print a run's output (stdout and stderr)",
		Long: "Print a run's output: its latest attempt's, or --attempt N's. With -f, keep printing until the attempt ends.\n" +
			"--tail N starts with the last N lines of what the attempt wrote so far (then, with -f, what comes);\n" +
			"--timestamps leads each line with the time the server received it (RFC 3339, UTC, nine fraction digits).\n" +
			"An attempt the run never made is an error (exit code 3), unless -f waits for a retry to make it.",
		Example: "  stint logs 01jd3x5k8q9r2s4t6v8w0y2z4a --tail 20\n" +
			"  stint logs 01jd3x5k8q9r2s4t6v8w0y2z4a -f --tail 10 --timestamps\n" +
			"  stint logs 01jd3x5k8q9r2s4t6v8w0y2z4a -f --attempt 2",
		Args: args("RUN_ID"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			switch {
			case opts.Attempt < 0:
				return Usagef("--attempt: must be 1 or more")
			case opts.Stream != "" && opts.Stream != "stdout" && opts.Stream != "stderr":
				return Usagef("--stream: must be stdout or stderr")
			case tail < -1:
				return Usagef("--tail: must be 0 or more (-1: all)")
			}
			if tail >= 0 {
				opts.Tail = &tail
			}
			c, err := cfg.client(cmd)
			if err != nil {
				return err
			}
			if opts.Attempt > 0 {
				run, err := c.GetRun(cmd.Context(), argv[0])
				if err != nil {
					return err
				}
				// A later attempt may still come while the run is not final: -f waits for it.
				if opts.Attempt > run.Attempt && (client.Finished(run) || !opts.Follow) {
					return &notFoundError{fmt.Sprintf("run %s has no attempt %d: it made %d", run.ID, opts.Attempt, run.Attempt)}
				}
			}
			logs, err := c.Logs(cmd.Context(), argv[0], opts)
			if err != nil {
				return err
			}
			defer logs.Close()
			if _, err := io.Copy(cmd.OutOrStdout(), logs); err != nil {
				return fmt.Errorf("read logs: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "stream until the attempt ends")
	cmd.Flags().IntVar(&opts.Attempt, "attempt", 0, "attempt number (default: the latest)")
	cmd.Flags().StringVar(&opts.Stream, "stream", "", "only stdout or stderr (default: both)")
	cmd.Flags().IntVar(&tail, "tail", -1, "start with the last N lines of what is stored (0: none), then with -f what comes; -1: all")
	cmd.Flags().BoolVar(&opts.Timestamps, "timestamps", false, "lead each line with the time the server received it (RFC 3339, UTC)")
	return cmd
}
