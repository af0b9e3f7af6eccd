// Package bench implements `stint bench WORKLOAD`: the workloads that BENCHMARKS.md reports, run
// over the public API against a running server, or against a server the bench starts in its
// own process on a fresh store (--store sqlite or a PostgreSQL URL, where it creates and
// drops a scratch database). Every workload uses a queue of its own, so a bench never counts
// other work, and reports figures from the runs' own server-side timestamps.
package bench
