// Package bench implements `stint bench WORKLOAD`: the workloads that BENCHMARKS.md reports, run
// over the public API against a running server, or against a server the bench starts in its
// own process on a fresh store (--store sqlite or a PostgreSQL URL, where it creates and
// drops a scratch database), or as `stint server` processes (--servers N, several on one
// PostgreSQL database). Every workload uses a queue of its own, so a bench never counts
// other work, and reports figures from the runs' own server-side timestamps.
//
// The scale workloads of issue 11 (BENCHMARKS.md, "Scale"): --seed-finished fills the fresh
// PostgreSQL store with a history of finished runs before the workload (seed.go, seedpg.go);
// plans explains the store's hot statements on such a store (plans.go); agents runs
// thousands of simulated agents over HTTP and reads what the server processes cost from
// /proc (agents.go, procstat.go, cluster.go).
package bench
