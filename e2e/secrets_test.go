package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// newSecretKey returns the hex of 32 random bytes: a value for STINT_SECRET_KEY.
func newSecretKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// TestSecretEnv submits a job with a secret through the CLI to a real server (with a key)
// and worker: the process gets the value (it writes it to a file, not to its log), while
// the API, `stint jobs get` and the logs of the server and the worker show it nowhere. A
// server with another key fails the job's next run saying why; a server without a key
// refuses the submission, naming the field and how to set a key.
func TestSecretEnv(t *testing.T) {
	t.Parallel()
	const value = "s3cr3t-e2e-value"
	data := t.TempDir()
	env := []string{"STINT_BOOTSTRAP_TOKEN=" + adminToken, "STINT_SECRET_KEY=" + newSecretKey(t)}
	srv := startServerEnv(t, "server", adminToken, env, "--data", data)
	w := runWorker(t, srv, workerToken(t, srv.url(), "w1"), "--id", "w1", "--slots", "1")

	file := filepath.Join(t.TempDir(), "seen")
	out, errOut, code := cli(t, srv, "submit", "--wait", "--name", "migrate", "--secret-env", "DB_PASSWORD="+value,
		"--env", "OUT="+file, "--shell", `printf %s "$DB_PASSWORD" > "$OUT"`)
	require.Zero(t, code, "stdout %s stderr %s", out, errOut)
	submitted := errOut // the run's states (--wait)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, value, string(b), "the process got the secret")

	job, err := srv.client(t).GetJob(context.Background(), "migrate")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"DB_PASSWORD": apitype.SecretMask}, job.SecretEnv)
	human, errOut, code := cli(t, srv, "jobs", "get", "migrate")
	require.Zero(t, code, errOut)
	require.Contains(t, human, "DB_PASSWORD")
	asJSON, errOut, code := cli(t, srv, "jobs", "get", "migrate", "--json")
	require.Zero(t, code, errOut)
	require.Contains(t, asJSON, `"DB_PASSWORD": "***"`)
	logs, _, _ := cli(t, srv, "logs", runIDFrom(t, submitted))
	for what, text := range map[string]string{"stdout": out, "stderr": submitted, "jobs get": human, "jobs get --json": asJSON, "run log": logs,
		"server log": srv.stderr.String(), "worker log": w.out.String()} {
		require.NotContains(t, text, value, what)
	}
	files, err := filepath.Glob(filepath.Join(data, "stint.db*")) // the database, its WAL
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NotContains(t, string(raw), value, "%s holds no clear value", f)
	}

	// The same data under another key: the run fails, saying it cannot decrypt.
	srv.kill()
	env[1] = "STINT_SECRET_KEY=" + newSecretKey(t)
	other := startServerEnv(t, "server", adminToken, env, "--data", data)
	runWorker(t, other, workerToken(t, other.url(), "w2"), "--id", "w2", "--slots", "1")
	run, err := other.client(t).TriggerJob(context.Background(), "migrate", nil)
	require.NoError(t, err)
	done := waitRun(t, other.client(t), run.ID, 30*time.Second)
	require.Equal(t, "failed", done.Status)
	require.Contains(t, done.Error, "cannot decrypt the job's secret env: secret_env.DB_PASSWORD: sealed with key")

	// No key: a warning at start, and a submission with a secret is refused.
	bare := startServer(t, "server", "--data", t.TempDir())
	require.Contains(t, bare.stderr.String(), "no secret key")
	_, errOut, code = cli(t, bare, "submit", "--secret-env", "DB_PASSWORD="+value, "--shell", "true")
	require.Equal(t, 2, code, errOut) // a refused field
	require.Contains(t, errOut, "secret_env")
	require.Contains(t, errOut, "STINT_SECRET_KEY")
}

// A server given a malformed key does not start, and says what is wrong.
func TestSecretKeyMalformed(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(stintBin, "server", "--addr", "127.0.0.1:0", "--data", t.TempDir())
	cmd.Env = stintEnv("STINT_SECRET_KEY=too-short", "STINT_BOOTSTRAP_TOKEN="+adminToken)
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.True(t, strings.Contains(string(out), "STINT_SECRET_KEY: key 1"), "%s", out)
}
