package api

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// promtool returns promtool's path; without it the test is skipped, or fails when
// STINT_REQUIRE_PROMTOOL is set (as CI sets it after installing promtool).
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		require.Empty(t, os.Getenv("STINT_REQUIRE_PROMTOOL"), "promtool is required but not on the PATH")
		t.Skip("promtool is not installed")
	}
	return path
}

// checkWithPromtool lints a scrape with `promtool check metrics`.
func checkWithPromtool(t *testing.T, scrape string) {
	t.Helper()
	cmd := exec.Command(promtool(t), "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)
}

// TestDashboardQueriesParse checks every query of the Grafana dashboard with promtool:
// they become recording rules of a rules file that `promtool check rules` parses (the
// dashboard's variables replaced by what they may hold).
func TestDashboardQueriesParse(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	raw, err := os.ReadFile("../../deploy/grafana/stint.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	vars := strings.NewReplacer("$__rate_interval", "5m", "$queue", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				continue
			}
			expr, err := json.Marshal(vars.Replace(tg.Expr)) // a JSON string is a YAML string
			require.NoError(t, err)
			rules.WriteString("      - record: dashboard:query\n        expr: " + string(expr) + "\n")
			n++
		}
	}
	require.Greater(t, n, 10, "the dashboard's queries")
	file := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	require.NoError(t, os.WriteFile(file, []byte(rules.String()), 0o600))
	out, err := exec.Command(bin, "check", "rules", file).CombinedOutput()
	require.NoError(t, err, "promtool check rules (the dashboard's queries):\n%s", out)
}
