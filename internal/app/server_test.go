package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
	"github.com/stint-dev/stint/internal/api"
	"github.com/stint-dev/stint/internal/model"
)

// startServer runs a server on SQLite in a temporary directory until the test ends.
func startServer(t *testing.T, cfg ServerConfig) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", filepath.Join(t.TempDir(), "data")
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Ready = func(addr string) { ready <- addr }
	go func() { done <- RunServer(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	scheme := "http://"
	if cfg.TLS.Cert != "" {
		scheme = "https://"
	}
	select {
	case addr := <-ready:
		return scheme + addr
	case err := <-done:
		t.Fatalf("server ended: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("server not ready after a minute")
	}
	return ""
}

// TestServerLimits: the limits of a ServerConfig reach the API (a spec over them is a 400,
// submissions over the rate a 429) and the store (output past the per-attempt cap is
// dropped).
func TestServerLimits(t *testing.T) {
	t.Parallel()
	const admin = "server-limits-test-admin-secret"
	url := startServer(t, ServerConfig{
		UserToken:  admin,
		Limits:     api.Limits{MaxShellBytes: 10, MaxLogBytes: 8},
		SubmitRate: &model.RateLimit{Rate: 2, Per: time.Hour},
	})
	c, err := client.New(url, client.WithToken(admin))
	require.NoError(t, err)
	ctx := t.Context()

	_, _, err = c.CreateJob(ctx, &apitype.JobSpec{Shell: strings.Repeat("x", 11)})
	var p *apitype.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusBadRequest, p.Status)
	require.Equal(t, "shell", p.Errors[0].Field)

	created, _, err := c.CreateJob(ctx, &apitype.JobSpec{Shell: "echo"})
	require.NoError(t, err)
	_, _, err = c.CreateJob(ctx, &apitype.JobSpec{Shell: "echo"})
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusTooManyRequests, p.Status, "the third submission of the hour (a 400 counts too)")

	_, err = c.Register(ctx, &apitype.RegisterRequest{ID: "w1", Capacity: apitype.Capacity{CPU: 1, Slots: 1}, Commands: true})
	require.NoError(t, err)
	leases, err := c.Lease(ctx, "w1", &apitype.LeaseRequest{Max: 1, Wait: durationPtr(0)})
	require.NoError(t, err)
	require.Len(t, leases.Leases, 1)
	l := leases.Leases[0]
	require.Equal(t, created.Run.ID, l.RunID)
	chunk := func(seq int64, data string) apitype.LogChunk {
		return apitype.LogChunk{RunID: l.RunID, Attempt: l.Attempt, Seq: seq, Stream: "stdout", Data: data, Token: l.Token}
	}
	require.NoError(t, c.AppendLogs(ctx, &apitype.LogChunksRequest{Chunks: []apitype.LogChunk{chunk(1, "12345"), chunk(2, "678")}}))
	require.NoError(t, c.AppendLogs(ctx, &apitype.LogChunksRequest{Chunks: []apitype.LogChunk{chunk(3, "9")}}))
	rc, err := c.Logs(ctx, l.RunID, client.LogsOptions{})
	require.NoError(t, err)
	defer rc.Close()
	out, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.Equal(t, "12345678", string(out), "output past 8 bytes was dropped")
}

func durationPtr(d time.Duration) *apitype.Duration {
	v := apitype.Duration(d)
	return &v
}
