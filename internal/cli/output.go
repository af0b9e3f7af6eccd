package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// output is how a command prints what the server answered, read or write: -o/--output
// table, wide, json or yaml; --json is -o json.
type output struct {
	format string
	json   bool
}

// addOutputFlags adds -o and --json to a command that prints an API object.
func addOutputFlags(cmd *cobra.Command) *output {
	o := &output{}
	cmd.Flags().StringVarP(&o.format, "output", "o", "table", "output format: table, wide (more columns), json or yaml")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the API object as indented JSON (-o json)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return o
}

// check refuses an unknown format, and --json with another -o.
func (o *output) check() error {
	switch o.format {
	case "table", "wide", "json", "yaml":
	default:
		return Usagef("--output: want table, wide, json or yaml, got %q", o.format)
	}
	if o.json && o.format != "table" && o.format != "json" {
		return Usagef("--json and -o %s: give one", o.format)
	}
	return nil
}

// structured reports whether o asks for the API object (JSON or YAML), for programs,
// rather than a table for people.
func (o *output) structured() bool {
	return o.json || o.format == "json" || o.format == "yaml"
}

// flag names the output flag the command line gave, for messages: "--json" or "-o yaml".
func (o *output) flag() string {
	if o.json {
		return "--json"
	}
	return "-o " + o.format
}

// print writes v as the format says: the API object as JSON or YAML, else show's table (with
// its wide columns for -o wide). show may be nil when o is structured.
func (o *output) print(w io.Writer, v any, show func(io.Writer) error) error {
	switch {
	case o.json || o.format == "json":
		return printJSON(w, v)
	case o.format == "yaml":
		return printYAML(w, v)
	case o.format == "wide":
		return show(wideWriter{w})
	default:
		return show(w)
	}
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printYAML writes v as YAML, with the field names of its JSON form.
func printYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	_, err = w.Write(b)
	return err
}

// wideWriter marks the output of -o wide: tables written to it show their wide columns.
type wideWriter struct{ io.Writer }

// table writes aligned columns: tab-separated cells, one row per call. A header cell that
// starts with "+" names a wide column: it and its cells show only with -o wide.
type table struct {
	tw     *tabwriter.Writer
	hidden map[int]bool // wide columns left out
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	_, wide := w.(wideWriter)
	cells := make([]string, len(header))
	for i, h := range header {
		name, isWide := strings.CutPrefix(h, "+")
		if isWide && !wide {
			if t.hidden == nil {
				t.hidden = map[int]bool{}
			}
			t.hidden[i] = true
		}
		cells[i] = name
	}
	if len(header) > 0 {
		t.row(cells...)
	}
	return t
}

func (t *table) row(cells ...string) {
	if len(t.hidden) > 0 {
		shown := make([]string, 0, len(cells))
		for i, c := range cells {
			if !t.hidden[i] {
				shown = append(shown, c)
			}
		}
		cells = shown
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// when shows a time in the configured zone with its distance from now: "2030-01-02 15:04:05
// (3m ago)". The zero time and nil are "-".
func (cfg *config) when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.In(cfg.loc).Format("2006-01-02 15:04:05") + " (" + cfg.ago(t) + ")"
}

// ago shows how far a time is from now: "3m ago", "in 2h", "just now".
func (cfg *config) ago(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	d := cfg.clock.Now().Sub(*t)
	switch {
	case d >= time.Second:
		return shortDuration(d) + " ago"
	case d <= -time.Second:
		return "in " + shortDuration(-d)
	default:
		return "just now"
	}
}

// shortDuration rounds d to its largest unit: 45s, 3m, 5h, 2d.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// elapsed shows how long something took (or has taken so far, when end is nil): 350ms, 2.3s,
// 3m25s. No start is "-".
func (cfg *config) elapsed(start, end *time.Time) string {
	if start == nil || start.IsZero() {
		return "-"
	}
	stop := cfg.clock.Now()
	if end != nil && !end.IsZero() {
		stop = *end
	}
	d := max(stop.Sub(*start), 0)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// pairs shows a map as sorted "k=v" pairs joined by commas, or "-".
func pairs(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return strings.Join(out, ",")
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
