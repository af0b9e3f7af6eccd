package main

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// synonyms are groups of flag names that would mean the same thing: the command tree may
// use one name of each group, not two (a deprecated alias, kept for old command lines, does
// not count). The first name is the one to use.
var synonyms = [][]string{
	{"timezone", "tz", "time-zone", "zone"},
	{"namespace", "ns"},
	{"max-attempts", "attempts"},
	{"max-concurrency", "max-concurrent"},
	{"retain-runs", "retention"},
	{"retain-pause", "retention-pause"},
	{"output", "format", "out"},
	{"quiet", "silent"},
	{"yes", "force", "confirm"},
	{"dry-run", "dryrun"},
	{"file", "filename"},
	{"cpuprofile", "cpu-profile"},
}

// sharedShorthands are the letters that stand for one flag in some commands and another in
// others, as kubectl's do: -f is --file where a command reads a file (apply, plan, dags
// submit, pipelines put) and --follow where it streams logs (logs, submit). No command has
// both.
var sharedShorthands = map[string][]string{"f": {"file", "follow"}}

// TestFlagSpellings walks the whole command tree of the stint binary: a flag name has one
// type and one shorthand everywhere, a shorthand letter stands for one flag, and no two
// names of a group of synonyms are both in use.
func TestFlagSpellings(t *testing.T) {
	t.Parallel()
	require.Empty(t, flagSpellingProblems(newRoot(), synonyms, sharedShorthands))
}

// TestFlagSpellingProblems: the check finds each kind of problem in a tree made for it.
func TestFlagSpellingProblems(t *testing.T) {
	t.Parallel()
	cmd := func(use string, flags func(*pflag.FlagSet)) *cobra.Command {
		c := &cobra.Command{Use: use, Run: func(*cobra.Command, []string) {}}
		flags(c.Flags())
		return c
	}
	root := &cobra.Command{Use: "x"}
	root.PersistentFlags().String("namespace", "", "")
	root.AddCommand(
		cmd("a", func(fl *pflag.FlagSet) {
			fl.Int("limit", 0, "")
			fl.BoolP("follow", "f", false, "")
			fl.String("timezone", "", "")
			fl.String("tz", "", "")
			_ = fl.MarkDeprecated("tz", "use --timezone") // an alias: fine
		}),
		cmd("b", func(fl *pflag.FlagSet) {
			fl.String("limit", "", "")           // another type
			fl.Bool("follow", false, "")         // no shorthand
			fl.StringArray("namespace", nil, "") // shadows the root's with another type
			fl.StringP("file", "f", "", "")      // a shared letter: fine
			fl.BoolP("wide", "w", false, "")     // -w is --watch elsewhere
			fl.String("from", "", "")            // an alias of a flag the command lacks
			_ = fl.MarkDeprecated("from", "use --since")
		}),
		cmd("c", func(fl *pflag.FlagSet) {
			fl.BoolP("watch", "w", false, "")
			fl.String("tz", "", "") // a synonym of --timezone, in use
			fl.BoolP("quiet", "f", false, "")
		}),
	)
	require.Equal(t, []string{
		`--follow: shorthand -f in x a, none in x b`,
		`--from (x b) is deprecated for --since, which x b does not have`,
		`--limit: type int in x a, string in x b`,
		`--namespace: type string in x, stringArray in x b`,
		`-f stands for --file, --follow and --quiet`,
		`-w stands for --watch and --wide`,
		`synonyms in use: --timezone (x a), --tz (x c)`,
	}, flagSpellingProblems(root, synonyms, sharedShorthands))
}

// flagSpellingProblems returns what breaks the rules of TestFlagSpellings in the tree under
// root, sorted. Deprecated flags are aliases kept for old command lines: they only have to
// name a replacement their command has.
func flagSpellingProblems(root *cobra.Command, synonyms [][]string, shared map[string][]string) []string {
	type use struct {
		cmd, typ, short string
	}
	uses := map[string][]use{}       // by flag name
	letters := map[string][]string{} // shorthand -> flag names
	var problems []string
	replacement := regexp.MustCompile(`--([a-z0-9-]+)`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			if f.Deprecated != "" {
				m := replacement.FindStringSubmatch(f.Deprecated)
				if m == nil || c.Flags().Lookup(m[1]) == nil || c.Flags().Lookup(m[1]).Deprecated != "" {
					what := "names no replacement"
					if m != nil {
						what = fmt.Sprintf("is deprecated for --%s, which %s does not have", m[1], c.CommandPath())
					}
					problems = append(problems, fmt.Sprintf("--%s (%s) %s", f.Name, c.CommandPath(), what))
				}
				return
			}
			uses[f.Name] = append(uses[f.Name], use{cmd: c.CommandPath(), typ: f.Value.Type(), short: f.Shorthand})
			if f.Shorthand != "" && !slices.Contains(letters[f.Shorthand], f.Name) {
				letters[f.Shorthand] = append(letters[f.Shorthand], f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	for name, us := range uses {
		for _, u := range us[1:] {
			if u.typ != us[0].typ {
				problems = append(problems, fmt.Sprintf("--%s: type %s in %s, %s in %s", name, us[0].typ, us[0].cmd, u.typ, u.cmd))
				break
			}
		}
		for _, u := range us[1:] {
			if u.short != us[0].short {
				problems = append(problems, fmt.Sprintf("--%s: shorthand %s in %s, %s in %s", name, shortText(us[0].short), us[0].cmd, shortText(u.short), u.cmd))
				break
			}
		}
	}
	for letter, names := range letters {
		sort.Strings(names)
		if len(names) > 1 && !slices.Equal(names, shared[letter]) {
			problems = append(problems, fmt.Sprintf("-%s stands for --%s", letter, joinAnd(names)))
		}
	}
	for _, group := range synonyms {
		var inUse []string
		for _, name := range group {
			if us := uses[name]; len(us) > 0 {
				inUse = append(inUse, fmt.Sprintf("--%s (%s)", name, us[0].cmd))
			}
		}
		if len(inUse) > 1 {
			problems = append(problems, "synonyms in use: "+strings.Join(inUse, ", "))
		}
	}
	sort.Strings(problems)
	return problems
}

func shortText(s string) string {
	if s == "" {
		return "none"
	}
	return "-" + s
}

// joinAnd joins flag names: "a", "a and --b", "a, --b and --c".
func joinAnd(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", --") + " and --" + names[len(names)-1]
}
