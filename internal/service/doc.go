// Package service holds the server's background loops as small services, one type per
// loop: the Promoter (scheduled runs become queued when due), the Rescuer (expired leases
// end as lost), the Releaser (rate-limited runs and queues get their turns), the
// CronFirer (cron schedules of jobs and pipelines fire), Retention (history past the
// retention policy is deleted in small batches), the Alerter (the alert rules of
// internal/alerting are evaluated and their alerts stored and notified), and the Elector,
// which takes part in the cluster's leadership (the leader lease in the store) and tells the
// engine when this server becomes the leader or stops being it; the engine then starts or
// stops the services only the leader runs. The CronFirer fires under the leader's term, which
// the store checks.
//
// The model. Each service is one goroutine that sequences store calls and sleeps: it asks
// the store when it next has something to do, sleeps until that instant (read from an
// injected clock.Clock; a timer set for an instant, never a duration measured before the
// store calls), acts, and asks again. A change that may bring that instant earlier wakes
// it through its Wake source (the engine's broadcasts), so nothing polls on an interval.
// A store error is logged and retried after RetryDelay, so an outage neither spins nor
// kills a loop. What to do is decided elsewhere: the store applies the changes and pure
// code (internal/scheduler, internal/cron) plans them; the services only sequence.
//
// Each service is built from a Config: a narrow store interface declared here with only
// the store methods it calls (store.Store satisfies each), a clock, a logger, its wake
// source, and callbacks through which it hands what it did to the engine (runs to wake
// workers for, lost attempts to push to their workers). There is no global state.
//
// Lifecycle. Start(ctx) runs the loop until Stop or ctx's end; Stop ends it and waits for
// its goroutine, and may be called any number of times. A service starts once: Start on a
// running service fails with ErrStarted, after Stop with ErrStopped; build a new one to run
// again.
//
// Rounds. A service's loop is a sequence of rounds: each service's Pass is one, run in the
// caller's goroutine, which acts on what is due at the clock's reading and says when the
// next is due. Start runs them in the service's goroutine, sleeping between them; a
// Stepper (the service's Stepper method) runs them instead in the caller's goroutine, when
// the loop would have (the instant came, or the Wake source fired), so that a caller that
// owns the clock decides every interleaving. The engine's Stepped mode drives its services
// so for the deterministic simulation in internal/sim. A service is started or stepped,
// never both.
//
// Tests. Each service has TestSignals, a struct of internal/testsignal signals sent at the
// points a test cares about (it promoted n runs; it sleeps until t; a store call failed).
// They are no-ops until a test initialises them; a test then waits on them instead of
// polling the store or the fake clock. Slept is sent once the timer is set, so a test may
// move a fake clock to the instant it carries and the service wakes.
package service
