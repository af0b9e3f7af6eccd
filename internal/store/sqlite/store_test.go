package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
	"github.com/stint-dev/stint/internal/store/storetest"
)

func openTest(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "stint.db"), Synchronous: "OFF"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t testing.TB) store.Store { return openTest(t) })
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
