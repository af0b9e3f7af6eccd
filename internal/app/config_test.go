package app

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/capacity"
	"github.com/stint-dev/stint/internal/cli"
)

// runStint runs the stint binary's commands with args and returns the exit code and the
// output (stdout and stderr together).
func runStint(t *testing.T, args ...string) (int, string) {
	t.Helper()
	root := cli.NewRoot(serverCommand(), newDevCommand(capacity.Host{}, nil), newWorkerCommand((&fakeHost{}).host(), nil))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	return cli.Execute(t.Context(), root), out.String()
}

// printed parses --print-config's table into key -> [value, source].
func printed(t *testing.T, out string) map[string][2]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Regexp(t, `^KEY\s+VALUE\s+SOURCE$`, lines[0], out)
	got := map[string][2]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		require.GreaterOrEqual(t, len(f), 3, l)
		got[f[0]] = [2]string{f[1], strings.Join(f[2:], " ")}
	}
	return got
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stint.yaml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// TestSettingsPrecedence: a flag wins over the environment, which wins over the file, which
// wins over the default; --print-config says which gave each value and starts nothing.
// (Not parallel: it sets the environment.)
func TestSettingsPrecedence(t *testing.T) {
	file := writeConfig(t, "# settings\naddr: 127.0.0.1:1\nmax-body: 2MiB\nmax-conns: 7\nlease-ttl: 20s\n"+
		"api-token: file-secret\nstore: postgres://stint:hunter2@db:5432/stint\n")
	t.Setenv("STINT_MAX_CONNS", "8")
	t.Setenv("STINT_LEASE_TTL", "30s")
	t.Setenv("STINT_READ_TIMEOUT", "") // empty: not set
	code, out := runStint(t, "server", "--config", file, "--print-config", "--lease-ttl", "40s")
	require.Equal(t, 0, code, out)
	got := printed(t, out)
	require.Equal(t, [2]string{"127.0.0.1:1", "file " + file + ":2"}, got["addr"])
	require.Equal(t, [2]string{"2MiB", "file " + file + ":3"}, got["max-body"])
	require.Equal(t, [2]string{"8", "env STINT_MAX_CONNS"}, got["max-conns"], "env over file")
	require.Equal(t, [2]string{"40s", "flag"}, got["lease-ttl"], "flag over env and file")
	require.Equal(t, [2]string{"1m0s", "default"}, got["read-timeout"])
	require.Equal(t, [2]string{file, "flag"}, got["config"])
	require.Equal(t, [2]string{"********", "file " + file + ":6"}, got["api-token"], "a secret is masked")
	require.Equal(t, "postgres://stint:xxxxx@db:5432/stint", got["store"][0], "a URL's password is masked")
	require.NotContains(t, out, "file-secret")
	require.NotContains(t, out, "hunter2")
	require.NotContains(t, got, "namespace", "the CLI's flags are no settings of the server")

	t.Setenv("STINT_CONFIG", file)
	code, out = runStint(t, "dev", "--print-config")
	require.Equal(t, 0, code, out)
	got = printed(t, out)
	require.Equal(t, [2]string{file, "env STINT_CONFIG"}, got["config"])
	require.Equal(t, "file "+file+":3", got["max-body"][1])
	require.Contains(t, got, "cpu", "stint dev's local worker")
}

// TestSettingsEnv: every environment variable stint took before the config file existed
// still sets its flag. (Not parallel: it sets the environment.)
func TestSettingsEnv(t *testing.T) {
	for _, tc := range []struct{ command, env, key, value string }{
		{"server", "STINT_ADDR", "addr", "127.0.0.1:9"},
		{"server", "STINT_DATA", "data", "/tmp/d"},
		{"server", "STINT_STORE", "store", "sqlite:///tmp/x.db"},
		{"server", "STINT_SERVER_ID", "id", "s7"},
		{"server", "STINT_ADVERTISE_ADDR", "advertise-addr", "10.0.0.1:80"},
		{"server", "STINT_API_TOKEN", "api-token", "********"},
		{"server", "STINT_WORKER_TOKEN", "worker-token", "********"},
		{"server", "STINT_BOOTSTRAP_TOKEN", "bootstrap-token", "********"},
		{"server", "STINT_TLS_CERT", "tls-cert", "/c.pem"},
		{"server", "STINT_TLS_KEY", "tls-key", "/k.pem"},
		{"server", "STINT_CLIENT_CA", "client-ca", "/ca.pem"},
		{"server", "STINT_LOG_LEVEL", "log-level", "warn"},
		{"server", "STINT_LOG_FORMAT", "log-format", "json"},
		{"server", "STINT_SECRET_KEY", "secret-key", "********"},
		{"server", "STINT_SECRET_KEY_FILE", "secret-key-file", "/key"},
		{"server", "STINT_MAX_BODY", "max-body", "3MiB"},
		{"server", "STINT_SUBMIT_RATE", "submit-rate", "5/1s"},
		{"worker", "STINT_WORKER_ID", "id", "w9"},
		{"worker", "STINT_WORKER_CERT", "cert", "/c.pem"},
		{"worker", "STINT_WORKER_KEY", "key", "/k.pem"},
		{"worker", "STINT_SERVER", "server", "http://s:1"},
		{"worker", "STINT_TOKEN", "token", "********"},
		{"worker", "STINT_CA", "ca", "/ca.pem"},
		{"worker", "STINT_LOG_LEVEL", "log-level", "debug"},
		{"worker", "STINT_WORKER_MEMORY", "memory", "512"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			v := tc.value
			if v == "********" {
				v = "some-secret-value"
			}
			t.Setenv(tc.env, v)
			code, out := runStint(t, tc.command, "--print-config")
			require.Equal(t, 0, code, out)
			require.Equal(t, [2]string{tc.value, "env " + tc.env}, printed(t, out)[tc.key], out)
		})
	}
}

// TestSettingsErrors: a key that is no setting, a bad value, a list for a flag of one value
// and a secret on the command line are usage errors naming the file, line and key.
func TestSettingsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, command, file string
		args                []string
		want                []string
	}{
		{name: "unknown key", command: "server", file: "addr: x\nmax_body: 1\n",
			want: []string{":2: unknown key \"max_body\": not a setting of stint server", `did you mean "max-body"?`}},
		{name: "a worker's key in the server's file", command: "server", file: "gpus: 1\n",
			want: []string{":1: unknown key \"gpus\""}},
		{name: "the CLI's key", command: "server", file: "namespace: x\n", want: []string{`unknown key "namespace"`}},
		{name: "bad value", command: "server", file: "\nmax-body: lots\n", want: []string{":2: max-body:", `"lots" is not a size`}},
		{name: "bad duration", command: "worker", file: "drain-timeout: soon\n", want: []string{":1: drain-timeout:"}},
		{name: "a list for one value", command: "server", file: "addr: [a, b]\n", want: []string{":1: addr: takes one value, not a list"}},
		{name: "not a mapping", command: "server", file: "- addr\n", want: []string{"want a mapping"}},
		{name: "twice", command: "server", file: "addr: a\naddr: b\n", want: []string{"addr"}},
		{name: "a secret on the command line", command: "server", args: []string{"--bootstrap-token", "x"},
			want: []string{"--bootstrap-token: not taken on the command line", "STINT_BOOTSTRAP_TOKEN"}},
		{name: "no file", command: "server", args: []string{"--config", "/nonexistent/stint.yaml"}, want: []string{"--config:", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{tc.command, "--print-config"}, tc.args...)
			if tc.file != "" {
				args = append(args, "--config", writeConfig(t, tc.file))
			}
			code, out := runStint(t, args...)
			require.Equal(t, 2, code, out)
			for _, w := range tc.want {
				require.Contains(t, out, w)
			}
		})
	}
}

// TestSettingsFileLists: a list in the file sets a flag of many values, commas and all.
func TestSettingsFileLists(t *testing.T) {
	t.Parallel()
	var f workerFlags
	cmd := &cobra.Command{Use: "worker"}
	f.commands.register(cmd.Flags())
	registerConfig(cmd, workerEnv)
	require.NoError(t, cmd.ParseFlags([]string{"--config", writeConfig(t, "pass-env: [LC_*, 'A,B']\nallow-commands: /bin/sh\n")}))
	_, err := loadSettings(cmd, workerEnv)
	require.NoError(t, err)
	require.Equal(t, []string{"LC_*", "A,B"}, f.commands.passEnv)
	require.Equal(t, []string{"/bin/sh"}, f.commands.allow)
	require.True(t, cmd.Flags().Changed("pass-env"), "a value from the file counts as given")
}

// TestREADMEConfigTable: the README's table of settings lists exactly the settings of stint
// server, dev and worker, each with its environment variable.
func TestREADMEConfigTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(b)
	start := strings.Index(text, "\n## Configuration\n")
	require.NotEqual(t, -1, start, "README has a Configuration section")
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end != -1 {
		section = section[:end+3]
	}
	row := regexp.MustCompile("^\\| `([a-z0-9-]+)` \\| `([A-Z0-9_]+)` \\| ([a-z, ]+) \\|")
	documented := map[string]bool{} // command key env
	for l := range strings.SplitSeq(section, "\n") {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for c := range strings.SplitSeq(m[3], ",") {
			documented[strings.TrimSpace(c)+" "+m[1]+" "+m[2]] = true
		}
	}
	require.NotEmpty(t, documented)
	root := cli.NewRoot(Commands()...)
	for _, tc := range []struct {
		name string
		spec envSpec
	}{{"server", serverEnv}, {"dev", serverEnv}, {"worker", workerEnv}} {
		cmd, _, err := root.Find([]string{tc.name})
		require.NoError(t, err)
		require.NoError(t, cmd.ParseFlags(nil)) // merges the root's flags in
		set, err := loadSettings(cmd, tc.spec)
		require.NoError(t, err)
		for _, f := range set.flags {
			k := tc.name + " " + f.Name + " " + tc.spec.envVar(f.Name)
			require.True(t, documented[k], "README's Configuration table lacks a row `%s` | `%s` | ... %s", f.Name, tc.spec.envVar(f.Name), tc.name)
			delete(documented, k)
		}
	}
	require.Empty(t, documented, "rows of settings no command has")
}

// TestSecretSetting: what --print-config masks.
func TestSecretSetting(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{"api-token": true, "worker-token": true, "token": true, "bootstrap-token": true,
		"secret-key": true, "secret-key-file": false, "key": false, "tls-key": false, "store": false, "db-password": true} {
		require.Equal(t, want, secretSetting(name), name)
	}
	fl := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fl.String("store", "postgres://u:p@h/db", "")
	require.Equal(t, "postgres://u:xxxxx@h/db", shownValue(fl.Lookup("store")))
}
