package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/storetest"
)

func TestMigrations(t *testing.T) {
	t.Parallel()
	ms, err := migrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	for i, m := range ms[1:] {
		require.Equal(t, ms[i].Version+1, m.Version, "versions run 1, 2, 3... without gaps")
	}
	require.Equal(t, 1, ms[0].Version)

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
	require.Equal(t, ms[len(ms)-1].Version, newest)

	var mode string
	require.NoError(t, s.w.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode))
	require.Equal(t, "wal", mode)

	// The read pool cannot write.
	_, err = s.r.ExecContext(t.Context(), `INSERT INTO queues (name, created_at, updated_at) VALUES ('x', 0, 0)`)
	require.Error(t, err)

}

// TestMigrateRefusesNewerSchema opens a database that a newer stint has migrated (it records
// a version this binary does not know): Open fails naming both versions and changes nothing,
// not even the migrations this binary would otherwise apply.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ms, err := migrations()
	require.NoError(t, err)
	known := ms[len(ms)-1].Version
	const future = 9999

	tests := []struct {
		name    string
		prepare func(t *testing.T, db *sql.DB) // leaves a database at a future version
	}{
		{
			name: "migrated database with a future migration",
			prepare: func(t *testing.T, db *sql.DB) {
				// The newest known migration is unrecorded too: it must not be applied.
				_, err := db.Exec(`DELETE FROM schema_migrations WHERE version = ?`, known)
				require.NoError(t, err)
				_, err = db.Exec(`INSERT INTO schema_migrations (version, name) VALUES (?, 'future')`, future)
				require.NoError(t, err)
			},
		},
		{
			name: "empty database marked by a newer stint",
			prepare: func(t *testing.T, db *sql.DB) {
				rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' AND name <> 'schema_migrations'`)
				require.NoError(t, err)
				var tables []string
				for rows.Next() {
					var n string
					require.NoError(t, rows.Scan(&n))
					tables = append(tables, n)
				}
				require.NoError(t, rows.Err())
				for _, n := range tables {
					_, err := db.Exec(`DROP TABLE ` + n)
					require.NoError(t, err)
				}
				_, err = db.Exec(`DELETE FROM schema_migrations`)
				require.NoError(t, err)
				_, err = db.Exec(`INSERT INTO schema_migrations (version, name) VALUES (?, 'future')`, future)
				require.NoError(t, err)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "m.db")
			s, err := Open(t.Context(), Config{Path: path, Synchronous: "OFF"})
			require.NoError(t, err)
			require.NoError(t, s.Close())
			db, err := sql.Open("sqlite", path)
			require.NoError(t, err)
			defer db.Close()
			tt.prepare(t, db)
			before := schemaOf(t, db)

			_, err = Open(t.Context(), Config{Path: path, Synchronous: "OFF"})
			var newer *store.SchemaNewerError
			require.ErrorAs(t, err, &newer)
			require.Equal(t, store.SchemaNewerError{Database: future, Known: known}, *newer)
			require.ErrorContains(t, err, fmt.Sprintf("database schema is at %04d, this stint knows up to %04d: upgrade stint", future, known))
			require.Equal(t, before, schemaOf(t, db), "a refused Open changes nothing")
		})
	}
}

// schemaOf returns what a refused migration could change: the schema objects and the
// recorded versions.
func schemaOf(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master
		UNION ALL SELECT 'version ' || version || ' ' || name FROM schema_migrations ORDER BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestMigrateCronInstant applies migration 0011 (cron_instant) to a database holding cron
// runs: they keep their scheduled_for as their instant (storetest.RunInstantMigration). The
// database is taken back to its schema without 0011, which must match the one every other
// migration makes.
func TestMigrateCronInstant(t *testing.T) {
	t.Parallel()
	ms, err := migrations()
	require.NoError(t, err)
	i := slices.IndexFunc(ms, func(m store.Migration) bool { return strings.HasSuffix(m.Name, "_cron_instant") })
	require.GreaterOrEqual(t, i, 0)
	version := ms[i].Version

	// The schema without 0011, made by the other migrations.
	prior := filepath.Join(t.TempDir(), "prior.db")
	db, err := sql.Open("sqlite", prior)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL)`)
	require.NoError(t, err)
	for _, m := range slices.Delete(slices.Clone(ms), i, i+1) {
		_, err = db.Exec(m.SQL)
		require.NoError(t, err, m.Name)
		_, err = db.Exec(`INSERT INTO schema_migrations (version, name) VALUES (?, ?)`, m.Version, m.Name)
		require.NoError(t, err)
	}
	// Everything but the text of schema_migrations, which Open creates.
	withoutMigrationsTable := func(schema []string) []string {
		return slices.DeleteFunc(schema, func(s string) bool { return strings.HasPrefix(s, "table schema_migrations ") })
	}
	want := withoutMigrationsTable(schemaOf(t, db))

	path := filepath.Join(t.TempDir(), "m.db")
	s, err := Open(t.Context(), Config{Path: path, Synchronous: "OFF"})
	require.NoError(t, err)
	storetest.RunInstantMigration(t, s, func(t *testing.T) store.Store {
		require.NoError(t, s.Close())
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		defer db.Close()
		_, err = db.Exec(`DELETE FROM schema_migrations WHERE version = ?;
			DROP INDEX runs_cron_instant;
			ALTER TABLE runs DROP COLUMN instant;
			CREATE UNIQUE INDEX runs_cron_instant ON runs (job_id, scheduled_for) WHERE trigger_kind = 'cron';`, version)
		require.NoError(t, err)
		require.Equal(t, want, withoutMigrationsTable(schemaOf(t, db)), "the schema without 0011")
		require.NoError(t, db.Close())
		s, err = Open(t.Context(), Config{Path: path, Synchronous: "OFF"})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	}, nil)
}
