// Package storetest is the conformance suite every store engine runs: one set of tests,
// written against store.Store only, that pins down the contract documented in package store.
//
// An engine's own test calls Run with a function that opens a fresh, empty store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t testing.TB) store.Store {
//			s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "stint.db")})
//			require.NoError(t, err)
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Subtests run in parallel (t.Parallel), so every call of open must return a store isolated
// from the others (its own file, schema or database). Tests never read the wall clock: every
// time they pass as Now is derived from a fixed instant, so the suite is deterministic.
//
// The test bodies live in non-test files grouped by topic (jobs.go, runs.go, dispatch.go,
// logs.go, queues.go, workers.go) so that other packages can import them.
package storetest
