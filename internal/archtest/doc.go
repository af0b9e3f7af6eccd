// Package archtest holds no code, only tests that keep the package arrows of
// docs/architecture.md true: which packages may import which, and which packages may not
// read the wall clock. Each rule is a row of a table in archtest_test.go with the reason it
// exists; to add a rule, add a row. The tests read the module with `go list` and its files
// with go/parser, so they need the go command on PATH.
package archtest
