package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// TestPipelineJourney applies the example pipeline to a real `stint dev` and drives it with
// the real binary: a manual trigger with args runs every step on the local worker in
// dependency order (fan-out and fan-in), each step gets the args; a run whose transform
// fails is failed as a whole, and a retry from transform, once its input is there, makes
// it succeed.
func TestPipelineJourney(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "dev", "--data", t.TempDir())
	upstream := map[string][]string{
		"extract":   nil,
		"clean-a":   {"extract"},
		"clean-b":   {"extract"},
		"transform": {"clean-a", "clean-b"},
		"load":      {"transform"},
	}

	out, errOut, code := cli(t, srv, "apply", "-f", "../examples/pipelines/etl.yaml")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Equal(t, "pipeline/etl created (6 steps)\n", out)
	out, _, code = cli(t, srv, "apply", "-f", "../examples/pipelines/etl.yaml", "--dry-run")
	require.Equal(t, 0, code)
	require.Equal(t, "pipeline/etl updated (6 steps) (dry run)\n", out)
	out, _, code = cli(t, srv, "pipelines", "get", "etl")
	require.Equal(t, 0, code)
	require.Contains(t, out, "transform  etl.transform  clean-a,clean-b")

	// Every step succeeds, each after its upstream steps ended, and each got the args.
	out, errOut, code = cli(t, srv, "pipelines", "trigger", "etl", "--arg", "day=2026-11-22", "--wait", "--json")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	var pr apitype.PipelineRun
	require.NoError(t, json.Unmarshal([]byte(out), &pr))
	require.Equal(t, "succeeded", pr.Status)
	require.Equal(t, "skipped", pr.Steps["alert"].Status, "load did not fail")
	for step, ups := range upstream {
		r := pr.Steps[step]
		require.Equal(t, "succeeded", r.Status, step)
		require.NotNil(t, r.StartedAt, step)
		for _, up := range ups {
			require.False(t, r.StartedAt.Before(*pr.Steps[up].FinishedAt),
				"%s started %s, before %s finished %s", step, r.StartedAt, up, pr.Steps[up].FinishedAt)
		}
		logs, _, code := cli(t, srv, "logs", r.ID)
		require.Equal(t, 0, code)
		require.Equal(t, `etl.`+step+` {"day":"2026-11-22","source":"s3://example/raw"}`+"\n", logs, step)
	}
	out, _, code = cli(t, srv, "pipelines", "run", "etl", pr.ID)
	require.Equal(t, 0, code)
	require.Contains(t, out, "Status:         succeeded")
	require.Regexp(t, `(?s)extract .*clean-a .*clean-b .*transform .*load `, out, "steps upstream first")

	// transform fails while its ready file is missing: the whole fails, load is skipped.
	ready := filepath.Join(t.TempDir(), "ready")
	out, _, code = cli(t, srv, "pipelines", "trigger", "etl", "--arg", "day=2026-11-23", "--arg", "ready_file="+ready, "--wait", "--json")
	require.Equal(t, 1, code, "a failed pipeline run exits 1: %s", out)
	require.NoError(t, json.Unmarshal([]byte(out), &pr))
	require.Equal(t, "failed", pr.Status)
	require.Equal(t, "failed", pr.Steps["transform"].Status)
	require.Equal(t, "skipped", pr.Steps["load"].Status)
	require.Equal(t, "succeeded", pr.Steps["clean-b"].Status)
	cleanB := *pr.Steps["clean-b"].FinishedAt
	out, _, code = cli(t, srv, "pipelines", "runs", "etl")
	require.Equal(t, 0, code)
	require.Contains(t, out, pr.ID+"  failed")

	// Its input there, a retry from transform runs transform and load again, not the rest.
	require.NoError(t, os.WriteFile(ready, nil, 0o600))
	out, errOut, code = cli(t, srv, "pipelines", "retry", "etl", pr.ID, "--from-step", "transform")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, "Status:         running")
	var done apitype.PipelineRun
	waitFor(t, 20*time.Second, "the retried pipeline run to end", func() bool {
		js, _, code := cli(t, srv, "pipelines", "run", "etl", pr.ID, "--json")
		require.Equal(t, 0, code)
		require.NoError(t, json.Unmarshal([]byte(js), &done))
		return done.Status != "running"
	})
	require.Equal(t, "succeeded", done.Status)
	require.Equal(t, "succeeded", done.Steps["transform"].Status)
	require.Equal(t, 2, done.Steps["transform"].Attempt, "a new attempt of the same run")
	require.Equal(t, "succeeded", done.Steps["load"].Status)
	require.False(t, done.Steps["load"].StartedAt.Before(*done.Steps["transform"].FinishedAt))
	require.Equal(t, cleanB, *done.Steps["clean-b"].FinishedAt, "upstream of transform: not run again")
	logs, _, _ := cli(t, srv, "logs", done.Steps["load"].ID)
	require.True(t, strings.HasPrefix(logs, `etl.load {"day":"2026-11-23","ready_file":"`), logs)
}
