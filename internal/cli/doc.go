// Package cli holds the client-side commands of the stint CLI (submit, runs, logs, jobs,
// queues, workers): cobra commands over package client. NewRoot builds the command tree,
// and Execute runs it and turns its outcome into an exit code:
//
//	0    success (for submit --wait/--follow: the run succeeded)
//	1    the call failed: an API problem (its title, detail and field errors are printed),
//	     a transport error, or a run that ended other than succeeded
//	2    bad usage: an unknown command or flag, a missing argument, a malformed flag value
//	130  interrupted (the context was cancelled)
//
// Commands write only to cmd.OutOrStdout() and cmd.ErrOrStderr(), so tests run them against
// an httptest server and read what they print. Read commands print aligned tables with times
// in local time; --json prints the API object instead.
package cli
