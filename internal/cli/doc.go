// Package cli holds the client-side commands of the stint CLI (submit, runs, logs, jobs,
// queues, workers): cobra commands over package client. NewRoot builds the command tree,
// and Execute runs it and turns its outcome into an exit code that says what happened
// (exit.go: 0 success, 1 failed, 2 usage, 3 not found, 4 unreachable, 5 unauthorized,
// 6 conflict, 7 timeout, 130 interrupted).
//
// Commands write only to cmd.OutOrStdout() and cmd.ErrOrStderr(), so tests run them against
// an httptest server and read what they print. Read and write commands print through one
// printer (output.go): aligned tables with times in local time, or with -o wide more
// columns, or -o json / -o yaml (--json) the API object. Long operations (apply, backfill,
// waiting on many runs) draw a progress bar on the error output when a person reads it at
// a terminal (progress.go), never in JSON or YAML output. A flag has one spelling across the
// command tree: cmd/stint's TestFlagSpellings checks it.
package cli
