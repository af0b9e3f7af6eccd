// Package store defines the Store interface, stint's one door to durable state, and the
// params structs its methods take: a method with arguments besides ctx takes exactly one
// *XxxParams named after it (GetRun takes *GetRunParams), whose field for the current
// time is Now. Two engines implement it — store/sqlite (the embedded default) and
// store/postgres — and store/storetest holds the conformance suite both run.
//
// The engines decide nothing about a run themselves: what an attempt's end makes of it
// (scheduler.Decide), whether a new run is admitted under a concurrency or rate limit
// (scheduler.Admit, Reserve), how dependencies start, release and skip runs
// (scheduler.PrepareDependencies, ConditionsAt) and every pending reason and error they
// write come from package scheduler; the engines read what a rule needs and persist its
// answer. Randomness (retry jitter) comes in the params as data (Rand). No reason is
// built in SQL: the words of a dependency wait follow the unmet count (deps_pending) and
// are derived from it when a row is read (scheduler.WaitingReason); the error of a skip is
// computed in Go per broken condition and passed to the statement. The conformance suite
// pins every transition's words (storetest, "Wording").
//
// Rules every engine keeps:
//   - Every method that changes state does so in one transaction: it happens whole or not at
//     all, and once it returns nil the change is durable (invariant 1).
//   - Times are stored in UTC with microsecond precision and returned in UTC.
//   - Driver errors are translated: no rows becomes model.ErrNotFound, a unique violation
//     model.ErrConflict, wrapped with what the method was doing.
//   - Methods that take a batch do the whole batch in one transaction (group commit).
//   - Params carry Now: the engine never reads the wall clock for anything it stores. The
//     one exception is the leader lease on PostgreSQL (see Leadership).
//   - Dispatch is by indexed queries; nothing scans all runs.
//
// # Leadership
//
// The servers of a cluster share one database and one leader lease row (TryLead,
// ResignLead, Leader; servers heartbeat their rows with HeartbeatServer). On PostgreSQL
// the lease's expiry is judged on the database's now(), so that the servers' clocks do not
// matter; SQLite, owned by one process, judges it on Now. The term grows by one each time
// the lease changes holder. Writes only the leader may make (the cron fires: FireJobs,
// SetPipelineNextFire, CreateGraph with FireNext) carry its Term and check it against the
// lease in their own transaction: model.ErrNotLeader, nothing written, when the lease has
// another term or has expired. Term zero is not checked.
//
// # Concurrency limits
//
// A run created with Concurrency set counts against its key's limit: at most Max runs of
// one Key hold a slot at once, from their admission until they reach a final state. The
// transaction that creates the run counts the key's holders and applies scheduler.Admit: a free slot
// admits the run as given; otherwise policy forbid creates it skipped, replace cancels the
// oldest holders (those not running end at once, freeing their slots; running ones get
// CancelRequested) and admits or holds it, and allow and queue hold it (waiting, PendingCode
// concurrency_limit). Every transaction that ends a run (completion, cancel, rescue, worker
// restart, job deletion) frees its slot and, in the same transaction, admits the oldest held
// runs of that key that now fit (scheduler.Release); those runs are reported with the change. A
// manual retry of a run takes a slot again, or waits for one. PostgreSQL serializes the
// transactions of one key with an advisory lock; it frees a completed run's slot in the
// statement that ends the run and admits in the next transaction (AdmitHeld, at start,
// repairs a crash in between).
//
// A key may also carry a rate limit (RunConcurrency.Rate): a run that gets a slot takes its
// turn under the limit (scheduler.Reserve, the generic cell rate algorithm over the key's row in
// rate_limits); a turn still ahead holds the run (waiting, PendingCode rate_limited) until
// ReleaseDue, which the engine calls at NextRelease.
package store
