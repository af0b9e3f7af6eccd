// Package e2e holds end-to-end tests that run stint the way users do: a real `stint` binary
// built once per test run, real server and worker processes, real commands, real SIGKILL.
// They prove the invariants of DESIGN.md that no unit test can: durability across a crash
// (invariant 1) and every run ending final (invariant 2), on SQLite and on PostgreSQL
// (PostgreSQL when STINT_TEST_DATABASE_URL is set).
//
// On PostgreSQL, TestClusterFailover and TestChaos run a cluster of three servers and four
// workers under load (rig_test.go) and kill its processes: the leaders and a follower in a
// fixed sequence, or servers and workers by a seeded random plan (STINT_CHAOS_SEED,
// STINT_CHAOS_DURATION). They check invariants 2, 4 and 6 across the kills: every run
// succeeds, each cron instant has exactly one run, and only a worker's death loses an attempt.
//
// The fault suite (TestFault..., fault_*_test.go) runs the same rig under one fault each: a
// PostgreSQL of its own stopped and restarted, SQLite's disk filled, a worker cut off the
// network, slow and hostile clients, issue 12's nested key template. After each, every
// accepted job succeeded, no other run failed, and every error a client saw was clear.
// docs/reliability.md has the table of what they measure.
package e2e
