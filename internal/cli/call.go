package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// callAndPrint is what every command that asks the server one thing does: it calls the
// server, then prints the answer as o says: show's table, or the API object as JSON or YAML.
// An error (a bad --server, an API problem, a transport error) is returned as it is, for
// Execute to report with its exit code, and nothing is printed. call may be a method
// expression such as (*client.Client).ListQueues. With --watch (see addWatchFlag) it asks
// again every watchInterval and prints the answer again each time it changed, until
// interrupted.
func callAndPrint[T any](cmd *cobra.Command, cfg *config, o *output,
	call func(*client.Client, context.Context) (T, error), show func(io.Writer, T) error,
) error {
	if err := o.check(); err != nil {
		return err
	}
	c, err := cfg.client(cmd)
	if err != nil {
		return err
	}
	render := func(ctx context.Context, w io.Writer) error {
		v, err := call(c, ctx)
		if err != nil {
			return err
		}
		return o.print(w, v, func(w io.Writer) error { return show(w, v) })
	}
	if watch, _ := cmd.Flags().GetBool("watch"); watch {
		return cfg.watch(cmd.Context(), cmd.OutOrStdout(), o.format == "yaml", render)
	}
	return render(cmd.Context(), cmd.OutOrStdout())
}

// watchInterval is how often --watch asks the server again.
const watchInterval = 2 * time.Second

// addWatchFlag adds --watch to a list or get command: callAndPrint then keeps printing.
func addWatchFlag(cmd *cobra.Command) {
	cmd.Flags().BoolP("watch", "w", false, "keep watching: print the answer again each time it changes (every 2s), until interrupted")
}

// watch renders, then renders again every watchInterval, printing each answer that differs
// from the one before (YAML documents separated by ---, tables by a blank line). It ends
// without error when ctx is cancelled (Ctrl-C), and with the error of a render that fails.
func (cfg *config) watch(ctx context.Context, w io.Writer, yamlDocs bool, render func(context.Context, io.Writer) error) error {
	var last []byte
	for {
		var buf bytes.Buffer
		if err := render(ctx, &buf); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !bytes.Equal(buf.Bytes(), last) {
			if last != nil {
				sep := "\n"
				if yamlDocs {
					sep = "---\n"
				}
				if _, err := io.WriteString(w, sep); err != nil {
					return err
				}
			}
			if _, err := w.Write(buf.Bytes()); err != nil {
				return err
			}
			last = buf.Bytes()
		}
		timer := cfg.clock.NewTimer(watchInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C():
		}
	}
}

// listCmd returns "list" (alias "ls"), a command with no argument that calls the server and
// prints the answer with show (-o, --json, --watch).
func listCmd[T any](cfg *config, short string,
	call func(*client.Client, context.Context) (T, error), show func(io.Writer, T) error,
) *cobra.Command {
	cmd := &cobra.Command{Use: "list", Aliases: []string{"ls"}, Short: short, Args: args()}
	o := addOutputFlags(cmd)
	addWatchFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return callAndPrint(cmd, cfg, o, call, show) }
	return cmd
}

// objectCmd returns a command on one object, named by its only argument (use is "get
// RUN_ID"): it calls the server on the argument, and prints the answer with show, which
// gets the argument too (-o, --json). A "get" command also takes --watch. call may be a
// method expression such as (*client.Client).GetRun.
func objectCmd[T any](cfg *config, use, short string,
	call func(*client.Client, context.Context, string) (T, error), show func(w io.Writer, arg string, v T) error,
) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: args(strings.Fields(use)[1:]...)}
	o := addOutputFlags(cmd)
	if strings.HasPrefix(use, "get ") {
		addWatchFlag(cmd)
	}
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		return callAndPrint(cmd, cfg, o, bind(call, argv[0]), func(w io.Writer, v T) error { return show(w, argv[0], v) })
	}
	return cmd
}

// bind returns call with its last argument set to arg: (*client.Client).GetRun with a run's
// id, or (*client.Client).ListRuns with the options.
func bind[A, T any](call func(*client.Client, context.Context, A) (T, error), arg A) func(*client.Client, context.Context) (T, error) {
	return func(c *client.Client, ctx context.Context) (T, error) { return call(c, ctx, arg) }
}

// showWith adapts a printer of an object to objectCmd's show, for a view that does not
// need the argument.
func showWith[T any](print func(io.Writer, T) error) func(io.Writer, string, T) error {
	return func(w io.Writer, _ string, v T) error { return print(w, v) }
}

// showDone returns a show that prints one line, format with the argument ("job %s enabled"),
// whatever the answer.
func showDone[T any](format string) func(io.Writer, string, T) error {
	return func(w io.Writer, arg string, _ T) error {
		_, err := fmt.Fprintf(w, format+"\n", arg)
		return err
	}
}

// showRunAction returns a show for the run an action answered with: its outcome, or done
// (a format with the argument: "run %s cancelled") when the server answered with no body.
func showRunAction(done string) func(io.Writer, string, *apitype.Run) error {
	return func(w io.Writer, arg string, run *apitype.Run) error {
		if run == nil {
			return showDone[*apitype.Run](done)(w, arg, run)
		}
		_, err := fmt.Fprintln(w, runOutcome(run))
		return err
	}
}

// printRunOutcomes prints a line for each run an action answered with.
func printRunOutcomes(w io.Writer, runs []*apitype.Run) {
	for _, r := range runs {
		fmt.Fprintln(w, runOutcome(r))
	}
}
