package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS // read-only: the schema, embedded at build time

// loadMigrations lists the embedded migrations by version. Files are named NNNN_name.sql.
func loadMigrations() ([]store.Migration, error) {
	return store.LoadMigrations(migrationFS, "migrations")
}

// migrate applies the missing migrations in one transaction. The advisory lock is keyed by
// the current schema, so servers sharing a schema take turns and separate schemas (tests,
// several clusters on one database) do not wait for each other. A database that records a
// version this binary does not know (a newer server migrated it) is refused before anything
// is applied (store.PendingMigrations), and the transaction is rolled back.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('stint.migrate.' || current_schema())::bigint)`); err != nil {
			return fmt.Errorf("lock migrations: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		pending, err := store.PendingMigrations(ms, applied)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		for _, m := range pending {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return fmt.Errorf("record migration %s: %w", m.Name, err)
			}
			s.log.Info("applied migration", "version", m.Version, "name", m.Name)
		}
		return nil
	})
}
