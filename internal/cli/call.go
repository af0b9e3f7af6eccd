package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// callAndPrint is what every command that asks the server one thing does: it calls the
// server, then prints the answer, as indented JSON when asJSON (--json) is set, else as show
// says. An error (a bad --server, an API problem, a transport error) is returned as it is, for
// Execute to report with its exit code, and nothing is printed. call may be a method
// expression such as (*client.Client).ListQueues.
func callAndPrint[T any](cmd *cobra.Command, cfg *config, asJSON bool,
	call func(*client.Client, context.Context) (T, error), show func(io.Writer, T) error,
) error {
	c, err := cfg.client(cmd)
	if err != nil {
		return err
	}
	v, err := call(c, cmd.Context())
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(cmd.OutOrStdout(), v)
	}
	return show(cmd.OutOrStdout(), v)
}

// listCmd returns "list" (alias "ls"), a command with no argument that calls the server and
// prints the answer with show, or as JSON with --json.
func listCmd[T any](cfg *config, short string,
	call func(*client.Client, context.Context) (T, error), show func(io.Writer, T) error,
) *cobra.Command {
	cmd := &cobra.Command{Use: "list", Aliases: []string{"ls"}, Short: short, Args: args()}
	asJSON := addJSONFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return callAndPrint(cmd, cfg, *asJSON, call, show) }
	return cmd
}

// objectCmd returns a command on one object, named by its only argument (use is "get
// RUN_ID"): it calls the server on the argument, and prints the answer with show, which
// gets the argument too, or as JSON with --json. call may be a method expression such as
// (*client.Client).GetRun.
func objectCmd[T any](cfg *config, use, short string,
	call func(*client.Client, context.Context, string) (T, error), show func(w io.Writer, arg string, v T) error,
) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: args(strings.Fields(use)[1:]...)}
	asJSON := addJSONFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		return callAndPrint(cmd, cfg, *asJSON, bind(call, argv[0]), func(w io.Writer, v T) error { return show(w, argv[0], v) })
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
