// Package engine is the server's core. It sits between the API and the store and does three
// things the store cannot do alone:
//
//   - Group commit. Concurrent submissions, completions, log chunks and heartbeats are
//     collected by committers and written in one transaction per batch, so a burst of
//     requests shares one fsync instead of paying one each (and thousands of workers'
//     heartbeats one statement per HeartbeatLinger). A caller gets its answer only after its batch
//     committed (invariant 1).
//   - Wake-ups. Workers long-poll Lease; the engine parks them on a broadcast signal that is
//     fired the moment a run becomes queued (a submission, a promotion, a retry), so no
//     worker polls on an interval. Cancel requests for a worker's runs are pushed to its
//     outstanding long poll. With a Notifier (PostgreSQL's LISTEN/NOTIFY), the servers
//     sharing a store tell each other: each broadcast is a topic whose Notify also
//     publishes, a notification from another server fires it locally only, and cancels
//     and lost attempts of workers attached elsewhere reach them through their server.
//   - Services. The background loops are internal/service's services, which the engine
//     builds over its store, clock and broadcasts. Every server runs the promoter
//     (scheduled runs become queued when due) and the releaser (rate-limited runs and
//     queues get their turns): their writes are set-based and idempotent, and each is woken
//     by its own server's changes. The leader alone runs the cron firer (jobs' and
//     pipelines' schedules: an instant must fire once, and its fires carry the leader's
//     term, which the store checks) and the rescuer (expired leases end as lost: one clock
//     judges expiry, and one pass, not N racing ones, ends them). Each sleeps until its
//     next instant on the injected clock and is woken early by the broadcast of a change
//     that may bring it earlier; what it finds comes back through callbacks (wake workers,
//     push lost attempts and cancels, count CronStats).
//   - Leadership. The engine's service.Elector heartbeats this server's row and asks the
//     store for the leader lease every quarter of LeaderTTL. On winning (becomeLeader) the
//     engine repairs what a crash may have left half done (AdmitHeld, ResolvePending) and
//     starts new leader services for the term; on losing, or when its renewals fail for
//     3/4 of the TTL, it stops them (loseLeadership) before the lease can expire. A stopped
//     service cannot start again, so each term builds its own. Every server, leader or
//     not, serves the API and the worker protocol. Stop resigns the lease, so a follower
//     takes over at its next try.
//   - Stepped (Config.Stepped): for the deterministic simulation (internal/sim), the engine
//     starts no service; the caller runs their rounds with Step, on its own goroutine, as
//     it moves its fake clock, and Config.NewID makes the ids of what the engine creates.
//
// The engine speaks model and store types only: it imports neither apitype nor worker
// (internal/archtest checks it). Its worker methods (Register, Lease, Heartbeat, AppendLogs,
// Complete) take and return domain values and errors such as ErrUnknownWorker (a
// model.ErrNotFound); internal/api.Protocol translates them to and from the worker protocol,
// for the HTTP worker routes and for the server's own local worker alike. Every write of
// the API goes through an engine method, so this package alone decides what a change wakes
// (workers' long polls, promoter, rescuer, releaser, cron firer).
package engine
