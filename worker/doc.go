// Package worker is stint's worker agent: it registers with a stint server, leases runs,
// executes them (commands and shell scripts as processes, handler kinds as Go functions in
// this process), streams their output, keeps their leases alive and reports how each attempt
// ended. `stint worker` runs it against a remote server over HTTP (client.Client implements
// Server), `stint dev` runs it in-process for the server's local worker, and Go programs
// embed it to serve their own handler kinds:
//
//	agent, err := worker.New(worker.Config{
//		Server:   client,
//		Capacity: apitype.Capacity{Slots: 8},
//		Handlers: map[string]worker.Handler{"resize": resize},
//	})
//	...
//	err = agent.Run(ctx) // until ctx is done, then drain
//
// The package imports only the standard library and apitype.
//
// # Loops
//
// Run registers the worker and starts three goroutines, plus one per running attempt. Lease
// polls and heartbeats carry the worker's session, so any server of the cluster serves them
// (a client given several servers moves on when one dies). When a server answers
// ErrUnknownWorker the agent registers again with its session and the leases it holds: if
// the session is still the worker's, it keeps the attempts whose leases the server proves
// (same run, token and worker) and they run on; the others are killed as lost.
//
//   - The lease loop keeps exactly one Lease long poll outstanding. It asks for as many runs as
//     there are free slots (at most apitype.MaxLeaseBatch); when the worker is full it still
//     polls, with Max 0, so that the server's pushes (cancel, lost, drain) arrive at once. A
//     poll sent with Max 0 is aborted and sent again as soon as a slot frees. Each leased run
//     starts at once in its own goroutine.
//   - The heartbeat loop sends one heartbeat per interval (the server's HeartbeatInterval)
//     carrying every lease the worker holds, including attempts that have ended but whose
//     completion is not yet delivered, and acts on the answer: a lost lease is killed, an
//     ended one (its completion was recorded) only forgotten. A failed heartbeat is retried
//     with backoff and never taken for a loss.
//   - The ship loop sends output and completions. An attempt's stdout and stderr are cut into
//     chunks (numbered per attempt from 1) when a chunk reaches LogChunkBytes, and at least
//     every LogFlushInterval while the attempt runs; the loop sends whatever chunks of any
//     attempts are ready in one AppendLogs call, then whatever completions are ready in one
//     Complete call. There is no artificial delay: batches grow by themselves when the server
//     is slower than the attempts.
//
// A slot is taken when an attempt starts and freed when its goroutine returns (the handler
// returned, the process was reaped), so the worker never runs more than Capacity.Slots
// attempts. Its lease is held, and heartbeated, until the completion is delivered (or the
// lease is lost); the slot does not wait for that, so a short attempt's slot does not idle
// for the server's commit. A worker holds at most HeldLeasesPerSlot times its slots in
// leases, so that one whose completions cannot be delivered stops leasing.
//
// # Outcomes
//
// A command runs in its own process group (see Commands below for its environment, directory,
// user and limits), with STINT_RUN_ID, STINT_ATTEMPT, STINT_JOB, STINT_JOB_ID, STINT_ARGS (the
// args as JSON, "{}" when there are none) and STINT_WORK_DIR, and CUDA_VISIBLE_DEVICES and
// STINT_GPUS when it was given GPU devices (see GPUs below). Exit status 0 succeeds; another exit status fails with "exit status
// N" and records the code; death by a signal fails with the signal named ("signal: killed");
// a process that cannot start fails with the reason. When the group leader exits, whatever it
// left in its group is killed, so that no stray child outlives its attempt or holds its output
// open.
//
// A handler succeeds by returning nil, fails with its error's text, and fails with the panic
// message when it panics (the stack goes to the run's log).
//
// Stopping an attempt:
//
//   - Cancel (pushed on the poll or the heartbeat): the process group gets SIGTERM, then
//     SIGKILL after KillGrace; a handler's context is cancelled. Reported as cancelled.
//   - Timeout (the lease's Timeout, counted from the start): the same, reported as timed_out.
//   - Lost (pushed, or a lease the agent could not renew coming within a tenth of LeaseTTL
//     of its expiry, counted on the agent's own clock from when the last successful renewal
//     was sent, so before the server may give the run to another worker): the process group
//     gets SIGKILL at once, a handler's context is cancelled, and nothing is reported: the
//     lease belongs to someone else now.
//   - Drain: see below; attempts stopped at the drain timeout are reported as lost, so the
//     server retries them.
//
// A handler that ignores its cancelled context is reported anyway after KillGrace; its
// goroutine keeps its slot until it returns. context.Cause of a handler's context says why it
// was stopped (ErrCancelled, ErrTimedOut, ErrLeaseLost, ErrShutdown).
//
// Config.OnCompleted hears of each attempt whose completion the server accepted, once, with
// its run, attempt and outcome: a program that embeds the agent can count what is done (and
// durable) without wrapping its handlers. A completion the server refused (the lease was
// lost meanwhile) or that could not be delivered is not told.
//
// # Commands
//
// How a command attempt runs, set by the Config fields after Commands:
//
//   - Environment: a clean one, not the worker's: PATH (the worker's, or a default), HOME
//     (the RunAs user's, or the worker's), the worker's CUDA_VISIBLE_DEVICES and
//     CUDA_DEVICE_ORDER when set, TMPDIR (the attempt's directory), then the worker's
//     variables PassEnv names, then the job's env and secret env (the lease carries the
//     secret values in clear, for that attempt only; the agent never logs them), then
//     stint's variables. The worker's STINT_ variables (its token) never pass.
//   - Directory: an empty one per attempt under WorkDir, owned by the user the command runs
//     as, its current directory unless the job names one. When the attempt ends, however it
//     ends, and before the end is reported, it is removed with its contents; or, left empty
//     with nothing the attempt started still holding its output, kept as it is for a later
//     attempt (the directories are named for the agent, not the attempt: see workDirs).
//   - Executable: the first word of a command, looked up in the worker's PATH (the job's env
//     cannot change that; a lookup is reused for a second), or /bin/sh for a shell job; outside AllowCommands (when set) the
//     attempt fails at once with the reason and nothing starts. The retry rules take that as
//     any failure.
//   - User: RunAs, with its groups (setuid, setgid and setgroups in the child).
//   - Limits (Limits): a memory requirement becomes memory.max of the attempt's cgroup when
//     Cgroup has the memory controller, else RLIMIT_DATA on the process (set right after it
//     started; each process it starts inherits it); a cpu requirement becomes cpu.max of
//     the cgroup when it has the cpu controller, else nothing. What could not be applied is
//     said in the attempt's log, on stderr, in lines starting "stint: ".
//   - Death of the agent: the process gets SIGKILL when the agent's process dies (Linux
//     Pdeathsig). The signal follows the thread that forked, not the process, so processes
//     are started by a few starter goroutines, each locked to an OS thread of its own from
//     when Run begins until it returns; the attempts wait for their processes on their own
//     goroutines. A process still running when Run returns dies with the starters' threads.
//     A guard process (Guard, RunGuard) kills the attempt's whole process group and cgroup
//     then, and removes its directory. An agent whose process is stopped (SIGSTOP) kills nothing until it runs
//     again: the server ends its leases meanwhile, and a retry may run beside the old
//     attempt.
//
// # GPUs
//
// Config.GPUs names the GPU devices the worker offers (default "0" to Capacity.GPU-1), and
// the worker registers Capacity.GPU as their number. The server books GPUs by the lease's
// Requirements and never books more than the worker declared; the agent picks the devices. An
// attempt whose lease needs k GPUs (Requirements.GPU = k > 0) gets the k first free devices,
// in Config.GPUs order, before it starts, and holds them until its process has exited or its
// handler has returned, whatever the outcome. A command's environment then has
// CUDA_VISIBLE_DEVICES and STINT_GPUS set to the devices, comma-separated ("0,2"), replacing
// any value from the worker's or the job's env, and CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA
// numbers devices as nvidia-smi does; a handler finds them in Task.GPUs. A run that
// needs no GPU is left alone: it gets no STINT_GPUS, and CUDA_VISIBLE_DEVICES is whatever the
// worker's environment and the job's env say (unset, usually, so such a process sees every
// device).
//
// A lease that needs more devices than are free (a server bug, or a --gpus override that
// does not match the host) does not run: its attempt fails with an error such as "needs 2
// GPUs, 1 of 4 free on this worker", and the agent logs it. The one exception is devices
// still held by attempts that are already being stopped (a lost lease, above all: the server
// frees its booking when it takes the lease back, before the worker has killed the process):
// when those would make up the difference, the new attempt waits for them, for at most
// KillGrace plus a few seconds, and fails as above if they do not come back.
//
// # Guarantees
//
//   - Every chunk of an attempt's output is sent before its completion. Output past LogCap
//     per attempt is dropped and replaced by one marker line saying how much was dropped.
//   - A completion is retried with backoff on transient errors until it is delivered or Run
//     gives up at the end of a drain; a completion the server refuses for good (4xx) is
//     retried alone, so that it cannot sink the others of its batch, and then dropped.
//   - The server fences stale leases (a completion or heartbeat with an old token is refused),
//     so reporting late is harmless; the agent's own job is to stop work whose lease is gone.
//
// # Drain
//
// When Run's context is done, or the server pushes Drain, the agent stops leasing (the
// outstanding poll is aborted), keeps heartbeating, and waits for running attempts to end:
// for at most DrainTimeout after its context is done, for as long as they take after a
// server's drain. Attempts still running then are stopped as on a cancel and reported as
// lost. Run returns once every completion is delivered, or FlushTimeout after the stop.
package worker
