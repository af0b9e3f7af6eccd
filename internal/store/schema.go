package store

import "context"

// SchemaReporter is a Store that can tell the newest schema version its database records
// and the newest this binary embeds; they differ once a newer stint migrated the database
// under a running server. `stint doctor` (GET /v1/doctor) reports it. Both engines
// implement it.
type SchemaReporter interface {
	Schema(ctx context.Context) (database, known int, err error)
}
