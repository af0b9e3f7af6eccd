// Package model holds stint's domain types — Job, Run, Attempt, Worker, Queue — their state
// words, and the sentinel errors every layer shares.
//
// A Job is a definition; a Run is one request to execute it; an Attempt is one execution of a
// run on one worker. Runs move through the states of DESIGN.md:
//
//	waiting -> scheduled -> queued -> running -> succeeded | failed | cancelled
//	waiting -> skipped
//
// and a final run changes again only through a manual retry. The package imports nothing of
// stint's own and does no I/O.
package model
