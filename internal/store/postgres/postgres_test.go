package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/postgres"
	"github.com/stint-dev/stint/internal/store/storetest"
)

// testURL returns the database URL of the tests, skipping when none is set.
func testURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("STINT_TEST_DATABASE_URL")
	if u == "" {
		t.Skip("STINT_TEST_DATABASE_URL not set: skipping PostgreSQL store tests")
	}
	return u
}

// newSchema creates an empty schema for one test, dropped (CASCADE) when the test ends, and
// returns a URL whose connections use it as their search_path.
func newSchema(t testing.TB) string {
	t.Helper()
	base := testURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("STINT_TEST_DATABASE_URL is set but the database is unreachable: %v", err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "stint_t_" + hex.EncodeToString(b[:])
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema) // pgx passes unknown parameters as RuntimeParams
	u.RawQuery = q.Encode()
	return u.String()
}

// open opens a store in a fresh schema, closed when the test ends (before the schema is
// dropped).
func open(t testing.TB) *postgres.Store {
	t.Helper()
	return openURL(t, newSchema(t))
}

func openURL(t testing.TB, u string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), postgres.Config{URL: u, MaxConns: 8})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	testURL(t)
	storetest.Run(t, func(t testing.TB) store.Store { return open(t) })
}
