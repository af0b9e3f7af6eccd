package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
	"github.com/stint-dev/stint/internal/store/storetest"
)

func openTest(t testing.TB) *sqlite.Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "stint.db"))
}

func openAt(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path, Synchronous: "OFF"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t testing.TB) store.Store {
		path := filepath.Join(t.TempDir(), "stint.db")
		return rawStore{Store: openAt(t, path), path: path}
	})
}

// rawStore reads the stored bytes for the conformance suite (storetest.RawReader), through
// a connection of its own to the database file.
type rawStore struct {
	*sqlite.Store
	path string
}

func (s rawStore) raw(ctx context.Context, query, arg string) ([]byte, error) {
	db, err := sql.Open("sqlite", s.path+"?_pragma=query_only(1)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var b []byte
	err = db.QueryRowContext(ctx, query, arg).Scan(&b)
	return b, err
}

func (s rawStore) RawJobSpec(ctx context.Context, jobID string) ([]byte, error) {
	return s.raw(ctx, `SELECT spec FROM jobs WHERE id = ?`, jobID)
}

func (s rawStore) RawWebhookSecret(ctx context.Context, ownerID string) ([]byte, error) {
	return s.raw(ctx, `SELECT secret FROM job_secrets WHERE job_id = ?`, ownerID)
}

func TestConcurrency(t *testing.T) {
	t.Parallel()
	storetest.RunConcurrency(t, func(t testing.TB) store.Store { return openTest(t) })
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url     string
		want    sqlite.Config
		wantErr bool
	}{
		{url: "sqlite:///var/lib/stint/stint.db", want: sqlite.Config{Path: "/var/lib/stint/stint.db"}},
		{url: "sqlite://stint.db", want: sqlite.Config{Path: "stint.db"}},
		{url: "sqlite://data/stint.db?synchronous=normal", want: sqlite.Config{Path: "data/stint.db", Synchronous: "NORMAL"}},
		{url: "sqlite:rel.db", want: sqlite.Config{Path: "rel.db"}},
		{url: "sqlite:///x.db?synchronous=FULL", want: sqlite.Config{Path: "/x.db", Synchronous: "FULL"}},
		{url: "sqlite:///x.db?synchronous=sometimes", wantErr: true},
		{url: "sqlite:///x.db?cache=big", wantErr: true},
		{url: "postgres://localhost/db", wantErr: true},
		{url: "sqlite://", wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			t.Parallel()
			got, err := sqlite.ParseURL(c.url)
			if c.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stint.db")
	ctx := t.Context()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	require.NoError(t, err)
	_, err = s.UpdateQueue(ctx, &store.UpdateQueueParams{Name: "q", Priority: intp(3)})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// Opening again applies no migration twice and finds the data.
	s, err = sqlite.Open(ctx, sqlite.Config{Path: path, Synchronous: "normal"})
	require.NoError(t, err)
	defer s.Close()
	q, err := s.GetQueue(ctx, &store.GetQueueParams{Name: "q"})
	require.NoError(t, err)
	require.Equal(t, 3, q.Priority)
	require.NoError(t, s.Ping(ctx))

	_, err = sqlite.Open(ctx, sqlite.Config{Path: path, Synchronous: "maybe"})
	require.Error(t, err)
	_, err = sqlite.Open(ctx, sqlite.Config{})
	require.Error(t, err)
}

func intp(i int) *int { return &i }
