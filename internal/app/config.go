package app

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/stint-dev/stint/internal/cli"
)

// Configuration: every flag of stint server, dev and worker can also be set by an
// environment variable and by a key of a YAML file (--config). For each flag not given on
// the command line, the environment variable wins if set (an empty one is not set), else
// the file's key, else the flag's default. The file's keys are the flags' names
// (`max-body: 2MiB`); the environment variable is the command's prefix and the flag in
// capitals (`STINT_MAX_BODY`), but for the exceptions of envSpec.

// envSpec names the environment variables of one command's settings.
type envSpec struct {
	// prefix starts the variable of a flag: STINT_ for the server's, STINT_WORKER_ for the
	// worker's (so that none is also a variable a job gets, such as STINT_WORK_DIR).
	prefix string
	// env are the exceptions to prefix + FLAG.
	env map[string]string
	// inherited are the flags of the root command the command reads (stint worker's
	// connection flags); the root's others are no setting of the command.
	inherited []string
}

var (
	serverEnv = envSpec{prefix: "STINT_", env: map[string]string{"id": "STINT_SERVER_ID"}}
	workerEnv = envSpec{prefix: "STINT_WORKER_", env: map[string]string{
		// Shared with the CLI (--server, --token, --ca) and the server (logs).
		"server": "STINT_SERVER", "token": "STINT_TOKEN", "ca": "STINT_CA",
		"log-level": "STINT_LOG_LEVEL", "log-format": "STINT_LOG_FORMAT",
	}, inherited: []string{"server", "token", "ca"}}
)

// noCommandLine marks a setting that takes its value from the environment or the config
// file only: a secret the process list must not show (see hideFromCommandLine).
const noCommandLine = "stint-no-command-line"

// hideFromCommandLine makes the flag name of fl a setting of the environment and the config
// file only: hidden from --help, and refused on the command line.
func hideFromCommandLine(fl *pflag.FlagSet, name string) {
	_ = fl.SetAnnotation(name, noCommandLine, []string{"true"})
	_ = fl.MarkHidden(name)
}

// The flags of the configuration layer itself.
const (
	configFlag      = "config"
	printConfigFlag = "print-config"
)

// envVar is the environment variable of flag.
func (s envSpec) envVar(flag string) string {
	if v, ok := s.env[flag]; ok {
		return v
	}
	return s.prefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// registerConfig adds --config and --print-config to cmd and names each flag's environment
// variable in its help. Call it once every other flag of cmd is registered.
func registerConfig(cmd *cobra.Command, spec envSpec) {
	fl := cmd.Flags()
	fl.VisitAll(func(f *pflag.Flag) {
		f.Usage += " [env " + spec.envVar(f.Name) + "]"
	})
	fl.String(configFlag, "", "read settings from this YAML file (keys are the flags' names); flags and env win over it [env "+spec.envVar(configFlag)+"]")
	fl.Bool(printConfigFlag, false, "print every setting's effective value and where it came from (flag, env, file, default), then exit")
}

// settingSource says where a setting's value came from.
type settingSource struct {
	kind  string // "flag", "env", "file" or "default"
	where string // the variable, or FILE:LINE
}

func (s settingSource) String() string {
	if s.where == "" {
		return s.kind
	}
	return s.kind + " " + s.where
}

// settings are a command's flags once the environment and the file filled them.
type settings struct {
	flags   []*pflag.Flag // by name
	sources map[string]settingSource
	print   bool // --print-config
}

// loadSettings sets each flag of cmd that the command line did not give from its
// environment variable or the config file, and records where each value came from. A key of
// the file that is no setting of cmd, or a value a flag refuses, is a usage error naming it.
func loadSettings(cmd *cobra.Command, spec envSpec) (*settings, error) {
	fl := cmd.Flags()
	s := &settings{sources: map[string]settingSource{}}
	fl.VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Name == printConfigFlag || (cmd.LocalFlags().Lookup(f.Name) == nil && !slices.Contains(spec.inherited, f.Name)) {
			return
		}
		s.flags = append(s.flags, f)
	})
	s.print, _ = fl.GetBool(printConfigFlag)

	path, pathSrc := fl.Lookup(configFlag).Value.String(), settingSource{kind: "flag"}
	if !fl.Changed(configFlag) {
		path, pathSrc = os.Getenv(spec.envVar(configFlag)), settingSource{kind: "env", where: spec.envVar(configFlag)}
		if path != "" {
			if err := fl.Set(configFlag, path); err != nil {
				return nil, cli.Usagef("%s: %w", spec.envVar(configFlag), err)
			}
		}
	}
	var file map[string]fileValue
	if path != "" {
		var err error
		if file, err = readConfigFile(path, s.flags, cmd.CommandPath()); err != nil {
			return nil, err
		}
	}
	for _, f := range s.flags {
		switch env := spec.envVar(f.Name); {
		case f.Name == configFlag:
			if path == "" {
				s.sources[f.Name] = settingSource{kind: "default"}
			} else {
				s.sources[f.Name] = pathSrc
			}
		case f.Changed && f.Annotations[noCommandLine] != nil:
			return nil, cli.Usagef("--%s: not taken on the command line, where the process list shows it: set %s or the config file's %q",
				f.Name, env, f.Name)
		case f.Changed:
			s.sources[f.Name] = settingSource{kind: "flag"}
		case os.Getenv(env) != "":
			if err := fl.Set(f.Name, os.Getenv(env)); err != nil {
				return nil, cli.Usagef("%s: %w", env, errors.Unwrap(err))
			}
			s.sources[f.Name] = settingSource{kind: "env", where: env}
		case file[f.Name].set:
			v := file[f.Name]
			where := fmt.Sprintf("%s:%d", path, v.line)
			if err := fl.Set(f.Name, v.value); err != nil {
				return nil, cli.Usagef("%s: %s: %w", where, f.Name, errors.Unwrap(err))
			}
			s.sources[f.Name] = settingSource{kind: "file", where: where}
		default:
			s.sources[f.Name] = settingSource{kind: "default"}
		}
	}
	return s, nil
}

// fileValue is a key's value in a config file, as a flag's text, and its line.
type fileValue struct {
	value string
	line  int
	set   bool
}

// readConfigFile reads the YAML mapping at path: each key must name one of flags; a list is
// taken by a flag of many values only.
func readConfigFile(path string, flags []*pflag.Flag, command string) (map[string]fileValue, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, cli.Usagef("--config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, cli.Usagef("--config %s: %w", path, err)
	}
	out := map[string]fileValue{}
	if len(doc.Content) == 0 { // an empty file
		return out, nil
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, cli.Usagef("--config %s:%d: want a mapping of settings (key: value)", path, m.Line)
	}
	known := map[string]*pflag.Flag{}
	for _, f := range flags {
		if f.Name != configFlag {
			known[f.Name] = f
		}
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		where := fmt.Sprintf("%s:%d", path, k.Line)
		f, ok := known[k.Value]
		if !ok {
			msg := fmt.Sprintf("%s: unknown key %q: not a setting of %s", where, k.Value, command)
			if alt := strings.ReplaceAll(k.Value, "_", "-"); known[alt] != nil {
				msg += fmt.Sprintf(" (did you mean %q?)", alt)
			}
			return nil, cli.Usagef("%s; %s --print-config lists them", msg, command)
		}
		if _, dup := out[k.Value]; dup {
			return nil, cli.Usagef("%s: key %q given twice", where, k.Value)
		}
		text, err := flagText(v, f)
		if err != nil {
			return nil, cli.Usagef("%s: %s: %w", where, k.Value, err)
		}
		out[k.Value] = fileValue{value: text, line: k.Line, set: true}
	}
	return out, nil
}

// flagText is the command-line text of a YAML value for f: a scalar as written; a list,
// for a flag of many values, as comma-separated values.
func flagText(v *yaml.Node, f *pflag.Flag) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return "", nil
		}
		return v.Value, nil
	case yaml.SequenceNode:
		if _, ok := f.Value.(pflag.SliceValue); !ok {
			return "", errors.New("takes one value, not a list")
		}
		items := make([]string, len(v.Content))
		for i, it := range v.Content {
			if it.Kind != yaml.ScalarNode {
				return "", errors.New("want a list of plain values")
			}
			items[i] = it.Value
		}
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		if err := w.Write(items); err != nil {
			return "", err
		}
		w.Flush()
		return strings.TrimSuffix(b.String(), "\n"), nil
	}
	return "", errors.New("want a value or a list of values")
}

// secretSetting reports whether a flag's value is a secret that --print-config masks:
// tokens, keys and passwords themselves (not the files that hold them).
func secretSetting(name string) bool {
	if strings.HasSuffix(name, "-file") {
		return false
	}
	for _, w := range []string{"token", "secret", "password"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// shownValue is a flag's value as --print-config shows it: secrets masked, and the password
// of a URL (a PostgreSQL store's) too.
func shownValue(f *pflag.Flag) string {
	v := f.Value.String()
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		v = strings.Join(sv.GetSlice(), ",")
	}
	if v == "" {
		return `""`
	}
	if secretSetting(f.Name) {
		return "********"
	}
	if u, err := url.Parse(v); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return v
}

// write prints every setting, its effective value and its source.
func (s *settings) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
	for _, f := range s.flags {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Name, shownValue(f), s.sources[f.Name])
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	return nil
}

// printSettings ends a command that loaded its settings: with err, or after printing them
// (--print-config).
func printSettings(cmd *cobra.Command, s *settings, err error) error {
	if err != nil {
		return err
	}
	return s.write(cmd.OutOrStdout())
}
