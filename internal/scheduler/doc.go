// Package scheduler is the one pure home of stint's scheduling rules: what a finished
// attempt makes of its run (Decide), which cron instants fire and where a schedule goes
// next (PlanFire), which instants a backfill may fill (BackfillInstants), how a new run is
// built (NewRun, and NewCronRun for a cron instant, which the run holds for good) and
// admitted under concurrency and rate limits (Admit, Reserve, Release), when a dependency
// holds, breaks or cascades (PrepareDependencies, ConditionsAt), the order of a graph or a
// pipeline (OrderGraph, StepOrder), the retry backoff (Backoff), why a queued run waits
// (QueueHold, WaitForWorker), whether a worker id is held by a live session (SessionHeld),
// and the words of every pending reason and server-made error.
//
// Functions here take the time as an argument, draw no random numbers (a uniform u is
// passed in), make no ids and do no I/O; they import nothing of stint's but model, cron and
// placement (internal/archtest enforces both). The stores and the engine call them and only
// persist or act on their answer. README.md draws the run state machine and names the
// function that decides each edge.
package scheduler
