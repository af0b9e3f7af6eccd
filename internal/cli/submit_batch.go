package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// batchFlagUsage is the help of stint submit --batch.
const batchFlagUsage = "submit the job specs of FILE, one JSON object per line (NDJSON; - for stdin), streamed to the server; " +
	"prints the rejected lines and a summary, and exits non-zero if any line was rejected"

// runSubmitBatch is stint submit --batch FILE: it streams FILE to POST /v1/jobs/stream and
// asks for the minimal answer, so what comes back is the rejected lines (printed to stderr
// as they come, "line 3: command: must not be empty") and the summary (stdout). With
// -o json (or --json) stdout gets the answer's lines as JSON instead; quiet leaves the
// summary out. The
// exit code is that of the first rejected line's error (2 for an invalid spec, 6 for a
// name already taken...), or of the error that stopped the stream early; 0 when every line
// was accepted.
func runSubmitBatch(cmd *cobra.Command, cfg *config, file string, o *output, quiet bool, argv []string) error {
	if len(argv) > 0 {
		return Usagef("--batch takes the jobs from %s: give no command", file)
	}
	var spec []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "batch", "json", "output", "quiet":
		default:
			if cmd.LocalFlags().Lookup(f.Name) != nil {
				spec = append(spec, "--"+f.Name)
			}
		}
	})
	if len(spec) > 0 {
		return Usagef("--batch takes the jobs as they are in %s: %s cannot go with it", file, strings.Join(spec, ", "))
	}
	if err := o.check(); err != nil {
		return err
	}
	asJSON := o.json || o.format == "json"
	switch {
	case o.format == "yaml" || o.format == "wide":
		return Usagef("--batch prints a summary, or its answer's lines with -o json: -o %s is not offered", o.format)
	case asJSON && quiet:
		return Usagef("%s and --quiet: give one", o.flag())
	}
	in, name := cmd.InOrStdin(), "stdin"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return Usagef("--batch: %v", err)
		}
		defer f.Close()
		in, name = f, file
	}
	c, err := cfg.client(cmd)
	if err != nil {
		return err
	}
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var first *apitype.Problem // of the first rejected line
	sum, err := c.StreamJobs(cmd.Context(), in, client.StreamOptions{Minimal: true, OnLine: func(l apitype.JobStreamLine) {
		if l.Error == nil {
			return
		}
		if first == nil {
			first = l.Error
		}
		if asJSON {
			_ = json.NewEncoder(out).Encode(l)
		}
		fmt.Fprintf(errOut, "%s:%d: %s\n", name, l.Line, lineProblem(l.Error))
	}})
	if sum == nil {
		return err // nothing was answered: the error says why
	}
	switch {
	case asJSON:
		if jerr := json.NewEncoder(out).Encode(apitype.JobStreamLine{Summary: sum}); jerr != nil {
			return fmt.Errorf("print summary: %w", jerr)
		}
	case !quiet:
		fmt.Fprintf(out, "accepted %d (%d existing), rejected %d, of %d lines\n", sum.Accepted, sum.Existing, sum.Rejected, sum.LastLine)
	}
	if err != nil { // stopped early: the lines after LastLine were not committed
		fmt.Fprintf(errOut, "the stream stopped after line %d; the lines after it were not submitted\n", sum.LastLine)
		return err
	}
	if first != nil {
		return &exitError{code: exitCode(first)}
	}
	return nil
}

// lineProblem says in one line why a line was rejected: its fields and what is wrong with
// each, or the problem's detail.
func lineProblem(p *apitype.Problem) string {
	if len(p.Errors) == 0 {
		if p.Detail != "" {
			return p.Detail
		}
		return p.Title
	}
	parts := make([]string, len(p.Errors))
	for i, fe := range p.Errors {
		parts[i] = fe.Field + ": " + fe.Message
	}
	return strings.Join(parts, "; ")
}
