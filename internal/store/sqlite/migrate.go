package sqlite

import (
	"context"
	"embed"
	"fmt"

	"github.com/stint-dev/stint/internal/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS // read-only: the schema, embedded at build time

// migrations lists the embedded migrations by version. Files are named NNNN_name.sql.
func migrations() ([]store.Migration, error) {
	return store.LoadMigrations(migrationFS, "migrations")
}

// migrate applies every migration the database lacks, all in one writer transaction. A
// database that records a version this binary does not know is refused before anything is
// applied (store.PendingMigrations), and the transaction is rolled back.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER NOT NULL PRIMARY KEY,
		name    TEXT    NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	var applied []int
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("migrate: read versions: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			_ = rows.Close()
			return fmt.Errorf("migrate: read versions: %w", err)
		}
		applied = append(applied, v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate: read versions: %w", err)
	}
	_ = rows.Close()
	pending, err := store.PendingMigrations(ms, applied)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range pending {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("migrate: record %s: %w", m.Name, err)
		}
		s.log.InfoContext(ctx, "applied migration", "version", m.Version, "name", m.Name)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}
