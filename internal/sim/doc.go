// Package sim is a deterministic simulation of stint's decision core and store: one seed
// (math/rand/v2's PCG) drives clients, workers, the network between them and a server
// process that crashes between store writes, and the invariants of the design are read
// back from the store after every step. A seed is the whole run: the same seed writes the
// same trace, so a failure is replayed exactly.
//
// # What runs
//
// The server is an engine.Engine in Stepped mode over the real store (SQLite in the tests;
// Config.Open could open any store.Store), behind crashStore, on a clock.Fake that only the
// simulation moves. Nothing runs between two steps: the engine's services (elector,
// promoter, releaser, rescuer, cron firer) run their rounds only in Engine.Step, which the
// simulation calls before it moves the clock past the instant a round is due (and at once
// after a step that woke one), sometimes a little late (up to 30 s, inside the misfire
// grace), as a busy process runs them. The group committers keep their goroutines, but get
// one request at a time. Ids come from one counter (engine Config.NewID for the cron runs),
// so that they sort by creation as real ids do and order runs the same way every time.
//
// Everything else is an event on one queue, by instant then by order of scheduling:
//
//   - Clients (client.go) send requests seconds apart, with quiet spells of minutes to an hour
//     that move the clock past many leases: one-off jobs, delayed or not, with retry
//     policies (backoff, jitter, final and retried exit codes, disruption budgets),
//     idempotency keys (sent again, the same or changed), concurrency limits of every policy
//     (per job, or per key over the run's args), requirements, timeouts and dependencies on
//     earlier runs; two to four cron jobs first (and more later) on schedules from every 5
//     minutes to daily, most in the zone the run starts in; manual triggers of one to four
//     runs; cancels of a run or of a job's runs; manual retries; pauses, resumptions and
//     limits of a queue; deletions. A request that gets no answer may be sent again.
//   - Workers (worker.go) are modelled on the agent in package worker: they register, keep
//     one lease poll outstanding while they have free slots (parked on Engine.Work as the
//     long poll is), start every lease as an attempt whose outcome and length are drawn
//     (success, failure with an exit code, a hang until cancelled or timed out), heartbeat
//     every interval while they hold leases, report ends until the server answers, stop a
//     cancelled attempt after a grace, kill an attempt whose lease they could not renew for
//     a whole TTL, and register again with their session and leases when the server does not
//     know them. Now and then one dies (and starts again as a new process), is cut off from
//     the network for up to two minutes, or re-attaches as to another server.
//   - The network delivers each request after a delay (milliseconds mostly, seconds
//     sometimes, up to two minutes now and then: past lease expiries), in whatever order the
//     delays give, sometimes twice; answers are sometimes lost. A worker reads the first
//     answer to a request only.
//   - The server crashes at a write drawn for each process: crashStore counts the writes
//     (every method that runs a write transaction) and at that one the process dies, the
//     write committed or not (both are drawn); that call and every later one fail. The
//     engine and all it held are dropped, the store is closed, and after a downtime (seconds
//     to minutes mostly, up to three hours: cron instants missed) a new process opens the store again and takes up: the
//     engine's first step wins the lead and repairs (AdmitHeld, ResolvePending), workers
//     carry on with their sessions, clients send again.
//
// After the requests, the run quiesces: no more crashes, lost or duplicated messages or
// deaths; the server and every worker up, queues resumed, every attempt succeeding; the
// clock runs on until every run that was active is final (a simulated day at most).
//
// # What is checked
//
// After every step that wrote to the store and changed a run (the engine's Changes fired;
// a client's request is checked always), from the store (the runs, read directly, not
// through the crashing wrapper):
//
//   - no run made more attempts than its budget (Attempt - Disruptions <= MaxAttempts), nor
//     more disruptions than its policy allows, nor got a budget its policy and the manual
//     retries sent do not account for;
//   - a lease belongs to running runs alone, and every running run has one; waiting and
//     scheduled runs say why (invariant 2);
//   - a final run stays final, unless a manual retry was sent for it;
//   - under a concurrency limit, the runs holding a slot of a key, and those running, never
//     exceed its max;
//   - no worker has more capacity booked than it declared (invariant 5);
//   - no run a client was told of disappears (invariant 1);
//   - cron: no instant of a job fires twice, every instant is on the schedule's grid, and,
//     by an oracle of the simulation's own (cron.go) for the schedules it uses, each fire
//     of a wall-clock schedule is at a time the expression names or at the end of a DST
//     gap, never at the second occurrence of a repeated time, and no wall time twice.
//
// At the events they concern: a completion is accepted exactly when it carries the token of
// the run's current lease, a heartbeat renews exactly the valid leases it names and reports
// the others lost or ended, leaving them as they were (fencing, invariant 3); a lease is
// the store's, and takes no paused queue's run nor a queue past its limit; no attempt starts
// while another process still runs that run, and no worker runs more attempts than its slots
// (invariant 8).
//
// At the end: every run that was active when the run quiesced, and every run a client was
// told of, is final; each run's attempt history matches its count, with at least as many
// lost attempts as disruptions; each cron job fired every instant t for which the services
// completed a round within [t, t+grace] while it existed (invariant 4: none missed while a
// server was up), and its misfire policy held for the instants it missed (skip fired none
// of them, run_once at most the first of each recovery, run_all all of them).
//
// # What is not simulated
//
// One server: no cluster, no leader changes, no PostgreSQL (the engine's Stepped mode would
// drive several engines on one store, but their interleaving is not modelled). Pipelines,
// DAG submissions, backfills, webhooks, rate limits, logs, drains, labels and best-fit
// placement across workers are not exercised, nor the HTTP layer (api, client, worker are
// not imported). The clocks do not drift: workers and server read the one fake clock. A
// crash is a process's; the database survives it (SQLite with synchronous=OFF loses
// nothing to a process crash; power loss is not simulated). Idle workers do not heartbeat
// (the agent does; it only marks them live). A worker's registration is delivered once and
// promptly: a late duplicate of a process's registration would start a new session and end
// the attempts that process runs, which the protocol cannot tell from a restart (see
// docs/architecture.md, "Deterministic simulation"). Slots are checked on the worker's
// side: the store may count a lease whose answer the worker never read until it expires.
//
// # Running it
//
//	go test ./internal/sim                                     # 200 seeds (100 with -short, 8 with -race)
//	go test ./internal/sim -run 'TestSim$' -sim.seeds 100000   # or STINT_SIM_SEEDS=100000
//	go test ./internal/sim -run 'TestSim$' -sim.first 5000     # another range of seeds
//	go test ./internal/sim -run 'TestSim$' -seed 1157          # replay one, printing its whole trace
//
// A failing seed prints what broke, that replay command and the last 60 lines of its trace.
// TestSimDeterministic runs seeds twice and compares the SHA-256 of their traces.
//
// Cost, measured on this project's 2-core machine while other work loaded it: a seed (25
// requests, about 50 simulated minutes, 320 store writes, 420 events) takes about 0.23 s of
// CPU, ten times that under the race detector. At a load average of 7 to 9 the package took
// 20 s with its 200 seeds, 10 to 17 s with -short (100), 37 s with -race (8, as CI runs
// it); at a load of 17 it runs at a third of that speed (1.1 seeds a second). 600 seeds
// took 2m18s at a load of 4 to 8.
package sim
