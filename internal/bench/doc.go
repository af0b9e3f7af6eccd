// Package bench implements `stint bench WORKLOAD`: the workloads that BENCHMARKS.md reports, run
// over the public API against a running server, or against a server the bench starts in its
// own process on a fresh store (--store sqlite or a PostgreSQL URL, where it creates and
// drops a scratch database), or as `stint server` processes (--servers N, several on one
// PostgreSQL database). Every workload uses a queue of its own, so a bench never counts
// other work. Latency is measured as a user sees it (latency.go): from just before a submit
// leaves the bench, or from a run's due instant, to the start of the run's handler, which the
// bench runs itself (the local worker of its in-process server, or its own workers over
// HTTP) and times in its own process; the bench counts its progress there too, not by
// asking the server. Throughput comes from the runs' server-side timestamps, read after the
// measured window.
//
// The scale workloads of issue 11 (BENCHMARKS.md, "Scale"): --seed-finished fills the fresh
// PostgreSQL store with a history of finished runs before the workload (seed.go, seedpg.go);
// plans explains the store's hot statements on such a store (plans.go); agents runs
// thousands of simulated agents over HTTP and reads what the server processes cost from
// /proc (agents.go, procstat.go, cluster.go).
package bench
