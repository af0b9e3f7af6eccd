// Package engine is the server's core. It sits between the API and the store and does three
// things the store cannot do alone:
//
//   - Group commit. Concurrent submissions, completions and log chunks are collected by
//     committers and written in one transaction per batch, so a burst of requests shares one
//     fsync instead of paying one each. A caller gets its answer only after its batch
//     committed (invariant 1).
//   - Wake-ups. Workers long-poll Lease; the engine parks them on a broadcast signal that is
//     fired the moment a run becomes queued (a submission, a promotion, a retry), so no
//     worker polls on an interval. Cancel requests for a worker's runs are pushed to its
//     outstanding long poll.
//   - Timers. The promoter sleeps until the earliest scheduled run is due and moves due runs
//     to queued; the rescuer sleeps until the earliest lease expires and ends expired
//     attempts as lost. Both are woken early when the earliest time changes. Time comes
//     from an injected clock.
//
// The engine speaks model and store types only: it imports neither apitype nor worker
// (internal/archtest checks it). Its worker methods (Register, Lease, Heartbeat, AppendLogs,
// Complete) take and return domain values and errors such as ErrUnknownWorker (a
// model.ErrNotFound); internal/api.Protocol translates them to and from the worker protocol,
// for the HTTP worker routes and for the server's own local worker alike. Every write of
// the API goes through an engine method, so this package alone decides which of its loops
// (workers' long polls, promoter, rescuer, cron loop) a change wakes.
package engine
