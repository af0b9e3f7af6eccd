package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/client"
)

func newLogsCmd(cfg *config) *cobra.Command {
	var opts client.LogsOptions
	cmd := &cobra.Command{
		Use:   "logs RUN_ID",
		Short: "Print a run's output (stdout and stderr)",
		Long:  "Print a run's output: its latest attempt's, or --attempt N's. With -f, keep printing until the attempt ends.",
		Args:  args("RUN_ID"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if opts.Attempt < 0 {
				return Usagef("--attempt: must be 1 or more")
			}
			if opts.Stream != "" && opts.Stream != "stdout" && opts.Stream != "stderr" {
				return Usagef("--stream: must be stdout or stderr")
			}
			c, err := cfg.client(cmd)
			if err != nil {
				return err
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
	return cmd
}
