package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/progress"
)

const defaultServer = "http://127.0.0.1:8080"

// config is what every command shares: the connection flags and the environment, which
// tests replace.
type config struct {
	server    string
	token     string
	namespace string
	ca        string // CA bundle of https servers; "": the system's roots

	getenv     func(string) string
	clock      clock.Clock
	loc        *time.Location  // times are shown in this zone
	clientOpts []client.Option // added to the client's options (tests: a short poll interval)
	// terminal tells whether a person reads w at a terminal, where progress bars are drawn
	// (nil: nowhere).
	terminal func(w io.Writer) bool
	// backfillChunk is how many instants one call of stint backfill --yes fills (0:
	// defaultBackfillChunk).
	backfillChunk int
}

// NewRoot builds the stint command with the client-side commands and the given extra ones
// (server, worker, dev, ...).
func NewRoot(extra ...*cobra.Command) *cobra.Command {
	return newRoot(&config{getenv: os.Getenv, clock: clock.Real{}, loc: time.Local,
		terminal: func(w io.Writer) bool { return progress.Shown(w, os.Getenv) }}, extra...)
}

func newRoot(cfg *config, extra ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   "stint",
		Short: "stint runs your jobs on a fleet of workers",
		Long: "stint is a distributed job scheduler. These commands talk to a stint server\n" +
			"(--server, or STINT_SERVER) over its REST API.",
		Args: noSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		// The environment fills --server and --token before any command runs, so the
		// commands given to NewRoot read them with cmd.Flags().GetString too.
		PersistentPreRun: func(cmd *cobra.Command, _ []string) { cfg.fromEnv(cmd) },
		SilenceErrors:    true,
		SilenceUsage:     true,
	}
	root.Version = localVersion().Version // --version prints the whole build, as `stint version` does
	root.SetVersionTemplate(versionTemplate())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	pf := root.PersistentFlags()
	pf.StringVar(&cfg.server, "server", defaultServer,
		"server URL, or a comma-separated list of the servers of one cluster (env STINT_SERVER)")
	pf.StringVar(&cfg.token, "token", "", "API token, sent as a bearer token (env STINT_TOKEN)")
	pf.StringVar(&cfg.namespace, "namespace", "", `namespace of the jobs named by name (env STINT_NAMESPACE; default "default")`)
	pf.StringVar(&cfg.ca, "ca", "", "CA bundle (PEM) that an https server's certificate must chain to (default: the system's roots; env STINT_CA)")

	root.AddCommand(
		newSubmitCmd(cfg),
		newRunsCmd(cfg),
		newRunCancelCmd(cfg, "cancel"),
		newRunRetryCmd(cfg, "retry"),
		newLogsCmd(cfg),
		newJobsCmd(cfg),
		newQueuesCmd(cfg),
		newWorkersCmd(cfg),
		newClusterCmd(cfg),
		newDoctorCmd(cfg),
		newCronCmd(cfg),
		newJobTriggerCmd(cfg),
		newBackfillCmd(cfg),
		newApplyCmd(cfg),
		newPlanCmd(cfg),
		newDAGsCmd(cfg),
		newPipelinesCmd(cfg),
		newTokensCmd(cfg),
		newVersionCmd(cfg),
		newAlertsCmd(cfg),
		newAuditCmd(cfg),
	)
	addCompletion(cfg, root)
	root.AddCommand(extra...)
	return root
}

// Execute runs root (on os.Args[1:], unless root.SetArgs says otherwise) and returns the
// process's exit code, after printing the error, if any, to root's error output.
func Execute(ctx context.Context, root *cobra.Command) int {
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	return report(root.ErrOrStderr(), cmd, err)
}

// report prints err and returns its exit code (see exitCode).
func report(w io.Writer, cmd *cobra.Command, err error) int {
	code := exitCode(err)
	var exit *exitError
	var usage *usageError
	var p *apitype.Problem
	switch {
	case errors.As(err, &exit):
	case code == ExitInterrupted:
		fmt.Fprintln(w, "stint: interrupted")
	case errors.As(err, &usage):
		fmt.Fprintf(w, "stint: %v\nRun '%s --help' for usage.\n", usage.err, cmd.CommandPath())
	case errors.As(err, &p):
		line := p.Title
		if p.Detail != "" {
			line += ": " + p.Detail
		}
		fmt.Fprintf(w, "stint: %s\n", line)
		for _, fe := range p.Errors {
			fmt.Fprintf(w, "  %s: %s\n", fe.Field, fe.Message)
		}
	default:
		fmt.Fprintf(w, "stint: %v\n", err)
		var unknownCA x509.UnknownAuthorityError
		if errors.As(err, &unknownCA) {
			fmt.Fprintln(w, "  the server's certificate is not signed by a CA this machine trusts: give the CA bundle that signed it with --ca (env STINT_CA)")
		}
	}
	return code
}

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// Usagef returns an error that Execute reports as bad usage (exit code 2), for the commands
// given to NewRoot.
func Usagef(format string, a ...any) error {
	return &usageError{err: fmt.Errorf(format, a...)}
}

// exitError ends the command with a code and no message: what it had to say is printed.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// noSubcommand refuses positional arguments of a command that only groups others: they are
// a misspelt subcommand.
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return Usagef("%s", msg)
}

// group returns a command that holds subcommands and prints its help when called alone.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  noSubcommand,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(subs...)
	return cmd
}

// args returns a validator for exactly the named positional arguments.
func args(names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, got []string) error {
		if len(got) < len(names) {
			return Usagef("missing %s", strings.Join(names[len(got):], " "))
		}
		if len(got) > len(names) {
			return Usagef("unexpected argument %q", got[len(names)])
		}
		return nil
	}
}

// fromEnv takes --server from STINT_SERVER, --token from STINT_TOKEN, --namespace from
// STINT_NAMESPACE and --ca from STINT_CA when they were not given. (The token is not the
// flag's default, which --help would show.)
func (cfg *config) fromEnv(cmd *cobra.Command) {
	if f := cmd.Flag("server"); f == nil || !f.Changed {
		if v := cfg.getenv("STINT_SERVER"); v != "" {
			cfg.server = v
		}
	}
	if cfg.token == "" {
		cfg.token = cfg.getenv("STINT_TOKEN")
	}
	if cfg.namespace == "" {
		cfg.namespace = cfg.getenv("STINT_NAMESPACE")
	}
	if cfg.ca == "" {
		cfg.ca = cfg.getenv("STINT_CA")
	}
}

// client returns an API client for the server that the flags or the environment name.
func (cfg *config) client(cmd *cobra.Command) (*client.Client, error) {
	cfg.fromEnv(cmd)
	opts := []client.Option{client.WithToken(cfg.token), client.WithUserAgent("stint-cli"), client.WithNamespace(cfg.namespace)}
	if cfg.ca != "" {
		pool, err := client.LoadCA(cfg.ca)
		if err != nil {
			return nil, Usagef("--ca: %w", err)
		}
		opts = append(opts, client.WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	opts = append(opts, cfg.clientOpts...)
	c, err := client.New(cfg.server, opts...)
	if err != nil {
		return nil, Usagef("--server: %w", err)
	}
	return c, nil
}
