package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/version"
)

// localVersion is this binary's build.
func localVersion() apitype.Version { return version.Get().Wire(store.SchemaVersion) }

func newVersionCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version, commit, build date, Go version and store schema",
		Long: "Print this binary's release, commit, build date, Go version and the newest store\n" +
			"schema version it knows. --remote also asks the server (GET /v1/version).",
		Args: args(),
	}
	out := addOutputFlags(cmd) // JSON and YAML: {"version", "commit", "date", "go_version", "schema"}, with --remote {"client", "server"}
	remote := cmd.Flags().Bool("remote", false, "also print the build of the server --server names")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(); err != nil {
			return err
		}
		local := localVersion()
		w := cmd.OutOrStdout()
		if !*remote {
			return out.print(w, local, func(w io.Writer) error { return printVersion(w, "stint", local) })
		}
		c, err := cfg.client(cmd)
		if err != nil {
			return err
		}
		srv, err := c.ServerVersion(cmd.Context())
		if err != nil {
			return fmt.Errorf("server version: %w", err)
		}
		return out.print(w, map[string]apitype.Version{"client": local, "server": *srv}, func(w io.Writer) error {
			if err := printVersion(w, "client", local); err != nil {
				return err
			}
			return printVersion(w, "server "+cfg.server, *srv)
		})
	}
	return cmd
}

// printVersion writes a build: a title line with the release, then a line per detail.
func printVersion(w io.Writer, title string, v apitype.Version) error {
	date := v.Date
	if date == "" {
		date = "unknown"
	}
	_, err := fmt.Fprintf(w, "%s %s\n  commit: %s\n  built:  %s\n  go:     %s\n  schema: %d\n",
		title, v.Version, v.Commit, date, v.GoVersion, v.Schema)
	return err
}

// versionTemplate is what --version prints: the text of `stint version`. (Cobra runs it as
// a template; a build's strings hold no braces.)
func versionTemplate() string {
	var b strings.Builder
	_ = printVersion(&b, "stint", localVersion()) // a strings.Builder does not fail
	return b.String()
}
