// Package postgres is the PostgreSQL engine of store.Store, on pgx and pgxpool. Several stint
// servers on one database form one cluster; everything here is safe with many servers
// calling at once.
//
// Schema: versioned migrations embedded from migrations/*.sql (the same logical schema as
// the SQLite engine), applied by Open in one transaction under a transaction-scoped advisory
// lock keyed by the current schema, so that servers starting together take turns; applied
// versions are recorded in schema_migrations. A URL parameter such as search_path=myschema
// places the tables in another schema (the tests give each test its own).
//
// A database that records a version this binary does not know (a newer stint migrated it) is
// refused: Open fails with a *store.SchemaNewerError naming both versions ("database schema
// is at 0012, this stint knows up to 0009: upgrade stint") and changes nothing. The loading
// and that check are shared with the other engine (store.LoadMigrations,
// store.PendingMigrations). Servers of two releases run side by side during a rolling
// upgrade, so a migration must be one the previous release still works with: additive only
// (new tables, new columns with defaults or nullable, new indexes); a drop or rename waits
// for a later release, once no server of the old one is left (docs/operations.md).
//
// How the hot paths are built:
//   - The running attempt lives on the run row; an attempts row is written only when an
//     attempt ends.
//   - CreateJobs writes a batch with two binary COPYs in one transaction. When COPY meets a
//     unique violation (a name taken, a key used meanwhile), the batch goes again through
//     one INSERT ... SELECT FROM unnest ... ON CONFLICT DO NOTHING statement, which skips
//     the entries that clash. CreateRuns, CompleteAttempts, Heartbeat and AppendLogs are one
//     statement each over unnest'ed arrays: one round trip and one commit per batch.
//   - LeaseRuns takes each queue's next runs with FOR UPDATE SKIP LOCKED, so servers leasing
//     at once never hand out one run twice nor wait for each other. A queue with a
//     MaxConcurrency has its row locked (FOR UPDATE) while its running runs are counted and
//     its runs leased.
//   - CompleteAttempts writes the outcome scheduler.Decide gives each end. Succeeded and
//     cancelled ends need no run row (scheduler.NeedsRun), so a batch of them is one
//     statement; only a batch with failures reads (and locks) its runs first, with the
//     retry policy of the failed ones' jobs.
//   - Batches that wait for run locks take them in run id order, so they cannot deadlock
//     each other; a transaction that still fails on a deadlock or a serialization failure
//     is run again whole.
//   - Connections use generic plans (plan_cache_mode=force_generic_plan, unless the URL sets
//     it): every statement has a fixed shape meant for index access, and a generic plan
//     keeps it there whatever the batch size and however stale the statistics. Statuses in
//     SQL are literals, so that the planner can match the partial indexes. Lease
//     transactions also disable sorts (leasePlannerSQL): a plan made while the table was
//     small could otherwise sort the whole backlog on every lease. plan_test.go checks each
//     dispatch and list statement's plan with EXPLAIN.
//
// Wake-ups between servers: NewNotifier returns a Notifier (notify.go) that carries the
// engine's wake-up topics with LISTEN/NOTIFY on a channel named after the schema, coalescing
// what is published into at most one pg_notify per topic per window, outside the store's
// transactions, and listening on a dedicated connection that reconnects with backoff and
// then reports every topic as fired.
//
// Times are stored as timestamptz, in UTC with microsecond precision, and returned in UTC.
// Lease tokens are random UUIDs (gen_random_uuid), opaque to callers.
//
// Files: both engines name their files by area alike — store.go (the Store type, Open,
// transactions), migrate.go, bulk.go (binary COPY), jobs.go, runs.go, graph.go
// (CreateGraph), deps.go, slots.go, cron.go, pipelines.go, dispatch.go, logs.go, queues.go,
// workers.go and scan.go. Specific to this engine: runinput.go, new runs as column arrays
// for one INSERT ... SELECT FROM unnest; notify.go, the Notifier. pgtest gives tests (these
// and the engine's) a schema of their own.
package postgres
