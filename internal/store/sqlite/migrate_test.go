package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMigrations(t *testing.T) {
	t.Parallel()
	ms, err := migrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	for i, m := range ms[1:] {
		// Gaps are allowed: branches reserve their numbers (issue 11 took 0007 to 0009).
		require.Greater(t, m.version, ms[i].version, "versions ascend")
	}

	path := filepath.Join(t.TempDir(), "m.db")
	s, err := Open(t.Context(), Config{Path: path, Synchronous: "OFF"})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = Open(t.Context(), Config{Path: path, Synchronous: "OFF"})
	require.NoError(t, err)
	defer s.Close()
	var n, newest int
	require.NoError(t, s.r.QueryRowContext(t.Context(), `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &newest))
	require.Equal(t, len(ms), n)
	require.Equal(t, ms[len(ms)-1].version, newest)

	var mode string
	require.NoError(t, s.w.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode))
	require.Equal(t, "wal", mode)

	// The read pool cannot write.
	_, err = s.r.ExecContext(t.Context(), `INSERT INTO queues (name, created_at, updated_at) VALUES ('x', 0, 0)`)
	require.Error(t, err)

	// A database from a newer binary is refused.
	_, err = s.w.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, name) VALUES (999, 'future')`)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = Open(t.Context(), Config{Path: path})
	require.ErrorContains(t, err, "newer")
}
