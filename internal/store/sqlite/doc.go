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
// one row and one insert. The dispatch queries each walk a partial index (see
// migrations/0001_init.sql); sqlite_test.go checks their plans with EXPLAIN QUERY PLAN.
//
// Migrations are the embedded files migrations/NNNN_name.sql, applied in order at Open in
// one transaction and recorded in schema_migrations.
package sqlite
