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
package e2e
