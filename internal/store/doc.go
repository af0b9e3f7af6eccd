// Package store defines the Store interface, stint's one door to durable state, and the
// params structs its methods take. Two engines implement it — store/sqlite (the embedded
// default) and store/postgres — and store/storetest holds the conformance suite both run.
//
// Rules every engine keeps:
//   - Every method that changes state does so in one transaction: it happens whole or not at
//     all, and once it returns nil the change is durable (invariant 1).
//   - Times are stored in UTC with microsecond precision and returned in UTC.
//   - Driver errors are translated: no rows becomes model.ErrNotFound, a unique violation
//     model.ErrConflict, wrapped with what the method was doing.
//   - Methods that take a batch do the whole batch in one transaction (group commit).
//   - Params carry Now: the engine never reads the wall clock for anything it stores.
//   - Dispatch is by indexed queries; nothing scans all runs.
package store
