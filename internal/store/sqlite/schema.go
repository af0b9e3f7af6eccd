package sqlite

import (
	"context"
	"fmt"
)

// Schema returns the newest migration the database records and the newest this binary
// embeds (store.SchemaReporter).
func (s *Store) Schema(ctx context.Context) (database, known int, err error) {
	ms, err := migrations()
	if err != nil {
		return 0, 0, err
	}
	if err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&database); err != nil {
		return 0, 0, fmt.Errorf("read schema version: %w", classify(err))
	}
	return database, ms[len(ms)-1].Version, nil
}
