// Package postgres is the PostgreSQL engine of store.Store, built on pgx and pgxpool. Several
// stint servers share one database and form one cluster.
//
// Schema: versioned migrations embedded from migrations/*.sql, applied by Open in one
// transaction under a transaction-scoped advisory lock (keyed by the current schema), so
// servers starting at once do not race; applied versions are kept in schema_migrations.
//
// Design for throughput:
//   - The running attempt lives on the run row; an attempts row is written only when an
//     attempt ends.
//   - Batches go in one statement over unnest'ed arrays (CreateJobs, CreateRuns,
//     CompleteAttempts, AppendLogs), so a batch costs one round trip and one commit.
//   - Leasing takes a queue's next runs with FOR UPDATE SKIP LOCKED: servers leasing at once
//     never hand out the same run, nor wait for each other. A queue with a MaxConcurrency is
//     locked (its queues row, FOR UPDATE) while its running runs are counted and leased.
//   - Every dispatch query has a partial index (see migrations/0001_init.sql).
//
// Times are stored as timestamptz, in UTC with microsecond precision, and returned in UTC.
package postgres
