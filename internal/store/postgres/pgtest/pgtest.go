// Package pgtest gives tests a PostgreSQL schema of their own: the store's tests and the
// engine's PostgreSQL tests call it. The database is STINT_TEST_DATABASE_URL's; a test
// skips, visibly, when it is not set.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// URL returns the database URL of the tests, skipping when none is set.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("STINT_TEST_DATABASE_URL")
	if u == "" {
		sayOnce.Do(saySkipped)
		t.Skip("STINT_TEST_DATABASE_URL not set: skipping PostgreSQL tests")
	}
	return u
}

// sayOnce makes a test binary say at most once that it skipped its PostgreSQL tests.
var sayOnce sync.Once

// saySkipped tells the developer at the terminal that this package's PostgreSQL tests are
// skipped. A plain `go test ./...` prints only "ok" for a package that passes and keeps the
// rest of its output, t.Skip's message included, so the line goes to the terminal itself;
// without one (CI, which sets the URL) there is nothing to tell.
func saySkipped() {
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer tty.Close()
	fmt.Fprintf(tty, "%s: PostgreSQL tests skipped: STINT_TEST_DATABASE_URL not set\n", strings.TrimSuffix(filepath.Base(os.Args[0]), ".test"))
}

// NewSchema creates an empty schema for one test, dropped (CASCADE) when the test ends, and
// returns a URL whose connections use it as their search_path (pgx passes the parameters it
// does not know to the server as run-time parameters).
func NewSchema(t testing.TB) string {
	t.Helper()
	base := URL(t)
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
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
