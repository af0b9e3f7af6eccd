// Package e2e holds end-to-end tests that run stint the way users do: a real `stint` binary
// built once per test run, real server and worker processes, real commands, real SIGKILL.
// They prove the invariants of DESIGN.md that no unit test can: durability across a crash
// (invariant 1) and every run ending final (invariant 2), on SQLite and on PostgreSQL
// (PostgreSQL when STINT_TEST_DATABASE_URL is set).
package e2e
