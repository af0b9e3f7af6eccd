package cli

import (
	"bufio"
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
			"An attempt the run never made is an error (exit code 3), unless -f waits for a retry to make it.",
		Example: "  stint logs 01jd3x5k8q9r2s4t6v8w0y2z4a --tail 20\n  stint logs 01jd3x5k8q9r2s4t6v8w0y2z4a -f --attempt 2",
		Args:    args("RUN_ID"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			switch {
			case opts.Attempt < 0:
				return Usagef("--attempt: must be 1 or more")
			case opts.Stream != "" && opts.Stream != "stdout" && opts.Stream != "stderr":
				return Usagef("--stream: must be stdout or stderr")
			case tail < 0:
				return Usagef("--tail: must not be negative")
			case tail > 0 && opts.Follow:
				return Usagef("--tail with --follow: not supported yet; give one")
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
			if tail > 0 {
				err = copyTail(cmd.OutOrStdout(), logs, tail)
			} else {
				_, err = io.Copy(cmd.OutOrStdout(), logs)
			}
			if err != nil {
				return fmt.Errorf("read logs: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "stream until the attempt ends")
	cmd.Flags().IntVar(&opts.Attempt, "attempt", 0, "attempt number (default: the latest)")
	cmd.Flags().StringVar(&opts.Stream, "stream", "", "only stdout or stderr (default: both)")
	cmd.Flags().IntVar(&tail, "tail", 0, "print only the last N lines (default: all)")
	return cmd
}

// copyTail copies the last n lines of r to w.
func copyTail(w io.Writer, r io.Reader, n int) error {
	ring := make([]string, 0, n)
	next := 0
	sc := bufio.NewReader(r)
	for {
		line, err := sc.ReadString('\n')
		if line != "" {
			if len(ring) < n {
				ring = append(ring, line)
			} else {
				ring[next] = line
				next = (next + 1) % n
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	for i := range ring {
		if _, err := io.WriteString(w, ring[(next+i)%len(ring)]); err != nil {
			return err
		}
	}
	return nil
}
