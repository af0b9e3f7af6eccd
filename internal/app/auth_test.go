package app

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/auth"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func TestLoopbackAddr(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true,
		"127.9.9.9:1":    true,
		"[::1]:8080":     true,
		"localhost:8080": true,
		":8080":          false,
		"0.0.0.0:8080":   false,
		"[::]:8080":      false,
		"10.0.0.5:8080":  false,
		"example.com:80": false,
		"127.0.0.1":      false, // no port: not an address net.Listen takes
	} {
		require.Equal(t, want, loopbackAddr(addr), addr)
	}
}

// stint dev without a token is open, and so may not listen where others reach it.
func TestOpenServerRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		err := RunServer(context.Background(), ServerConfig{Addr: addr, DataDir: t.TempDir(), OpenAuth: true,
			Logger: slog.New(slog.DiscardHandler)})
		require.ErrorContains(t, err, "authentication is off, so stint dev listens on a loopback address only", addr)
	}
}

// testEngine starts an engine on a fresh SQLite store.
func testEngine(t *testing.T) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	st, _, err := OpenStore(ctx, "", filepath.Join(t.TempDir(), "data"), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	e := engine.New(engine.Config{Store: st, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, e.Start(ctx))
	t.Cleanup(e.Stop)
	return e
}

func tokens(t *testing.T, e *engine.Engine) []*model.Token {
	t.Helper()
	tks, err := e.Store().ListTokens(context.Background())
	require.NoError(t, err)
	return tks
}

var printedToken = regexp.MustCompile(`(?m)^\s+(stint_[a-z2-7]+)\s*$`)

func TestBootstrapFirstToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	e := testEngine(t)

	var out bytes.Buffer
	require.NoError(t, bootstrapToken(ctx, e, "", "", &out, log))
	m := printedToken.FindStringSubmatch(out.String())
	require.NotNil(t, m, "the first admin token is printed: %s", out.String())
	require.Contains(t, out.String(), "shown only this once")
	require.Contains(t, out.String(), "export STINT_TOKEN=")
	tks := tokens(t, e)
	require.Len(t, tks, 1)
	require.Equal(t, model.RoleAdmin, tks[0].Role)
	require.Equal(t, auth.Hash(m[1]), tks[0].Hash, "the store keeps the printed secret's hash")
	require.NotContains(t, tks[0].Hash, m[1])

	// The next start finds a token and prints nothing.
	out.Reset()
	require.NoError(t, bootstrapToken(ctx, e, "", "", &out, log))
	require.Empty(t, out.String())
	require.Len(t, tokens(t, e), 1)

	// A static admin token needs no first token.
	e2 := testEngine(t)
	require.NoError(t, bootstrapToken(ctx, e2, "", "static-admin", &out, log))
	require.Empty(t, out.String())
	require.Empty(t, tokens(t, e2))
}

func TestBootstrapFromEnv(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	e := testEngine(t)
	var out bytes.Buffer
	secret := strings.Repeat("ab", 20)

	err := bootstrapToken(ctx, e, "short", "", &out, log)
	require.ErrorContains(t, err, "STINT_BOOTSTRAP_TOKEN: must be at least 32 characters")
	require.Empty(t, tokens(t, e))

	for range 2 { // every start makes sure it exists; none makes a second
		require.NoError(t, bootstrapToken(ctx, e, secret, "", &out, log))
	}
	require.Empty(t, out.String(), "an operator's own secret is not printed")
	tks := tokens(t, e)
	require.Len(t, tks, 1)
	require.Equal(t, auth.Hash(secret), tks[0].Hash)
	require.Equal(t, model.RoleAdmin, tks[0].Role)

	// Revoked, it stays revoked: a restart does not undo a revocation.
	_, err = e.RevokeToken(ctx, tks[0].ID)
	require.NoError(t, err)
	require.NoError(t, bootstrapToken(ctx, e, secret, "", &out, log))
	got, err := e.Store().FindToken(ctx, &store.FindTokenParams{Hash: auth.Hash(secret)})
	require.NoError(t, err)
	require.NotNil(t, got.RevokedAt)
	require.Contains(t, logs.String(), "STINT_BOOTSTRAP_TOKEN names a revoked token")
	require.Len(t, tokens(t, e), 1)
}
