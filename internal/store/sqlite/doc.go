// Package sqlite is stint's embedded store engine: store.Store on one SQLite file in WAL
// mode, through modernc.org/sqlite (pure Go, no cgo).
//
// Connections: one writer (a *sql.DB capped at one connection, every transaction BEGIN
// IMMEDIATE) carries all writes, so writers never fight over the lock and a method's
// transaction is never refused with SQLITE_BUSY halfway; a pool of query-only readers serves
// reads concurrently with it (WAL lets readers see the last committed state while a write is
// under way). Every method that changes state runs in one writer transaction and with
// synchronous=FULL (the default) is durable when it returns.
//
// Storage: times are INTEGER microseconds since the epoch in UTC; job specs are JSON. The
// running attempt of a run lives on the run row (worker, lease token, lease expiry, start);
// an attempts row is written only when an attempt ends, so leasing and completing touch
// one row (and completing one insert). Every run's queue has a row in queues (creating a
// run creates its queue's row when missing), which leasing and lease rescue rely on to
// walk the queues.
//
// Indexes: each dispatch query walks a partial index (see migrations/0001_init.sql) and
// names it with INDEXED BY, so that the plan does not depend on statistics and a query the
// index cannot serve fails at prepare time; plan_test.go checks the plans with EXPLAIN
// QUERY PLAN. A run's ordinary life (queued, running, succeeded) maintains as few indexes
// as possible: the hot paths are bounded by SQLite's b-tree work, not by Go.
//
// Partial indexes whose WHERE lists several states spell it as a chain of ORs, not an IN
// list: SQLite evaluates that WHERE for every row written, and an IN list of more than two
// values by building an ephemeral table each time (migrations/0002_rare_status_or.sql).
//
// Batches: CreateJobs, CreateRuns and CompleteAttempts use multi-row statements (a VALUES
// list, padded to a power of two so that few statements are prepared). A column with one
// value across a chunk is bound once rather than once per row (multiInsert): in a typical
// batch only the ids differ, and binding is as costly as SQLite's own work per value.
// CreateJobs and CreateRuns fall back to entry-by-entry work inside the same transaction
// when a key is taken, so each entry sees the ones before it.
//
// Lease tokens are a random 128-bit prefix drawn once per LeaseRuns call followed by the
// run's rowid: unguessable and unique per lease, without a randomblob() per row.
//
// Migrations are the embedded files migrations/NNNN_name.sql, applied in order at Open in
// one transaction and recorded in schema_migrations.
//
// A database that records a version this binary does not know (a newer stint migrated it) is
// refused: Open fails with a *store.SchemaNewerError naming both versions ("database schema
// is at 0012, this stint knows up to 0009: upgrade stint") and changes nothing. The loading
// and that check are shared with the other engine (store.LoadMigrations,
// store.PendingMigrations). Migrations come in pairs with the PostgreSQL engine's, where
// servers of two releases run side by side during a rolling upgrade, so a migration must be
// one the previous release still works with: additive only (new tables, new columns with
// defaults or nullable, new indexes); a drop or rename waits for a later release, once no
// server of the old one is left (docs/operations.md).
//
// Files: both engines name their files by area alike — store.go (the Store type, Open,
// transactions), migrate.go, bulk.go (multi-row inserts), jobs.go, runs.go, graph.go
// (CreateGraph), deps.go, slots.go, cron.go, pipelines.go, dispatch.go, logs.go, queues.go,
// workers.go and scan.go. Specific to this engine: stmts.go, the prepared statements of the
// writer and the readers; lock_unix.go (lock_other.go elsewhere), the lock below.
//
// One process per database: Open takes flock(LOCK_EX|LOCK_NB) on Path + ".lock" (in the data
// directory, stint.db.lock), writes its pid there and holds it until Close; a second Open,
// in this process or another, gets ErrLocked naming the directory and the holder's pid. The
// kernel drops the lock with its process, so a crash leaves nothing to clean up.
package sqlite
