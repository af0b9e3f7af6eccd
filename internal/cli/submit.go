package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// submitFlags are the flags of stint submit.
type submitFlags struct {
	shell, handler, name, queue, dir, idempotencyKey string
	cron, timezone, misfire                          string
	concurrency, concurrencyKey, rate                string
	maxConcurrency                                   int
	priority, retries, maxAttempts, gpu              int
	timeout, backoff, delay, waitTimeout             time.Duration
	cpu                                              float64
	memory                                           MemoryFlag
	runAt                                            timeFlag
	args, env, labels                                kvFlag
	secretEnv                                        secretEnvFlag
	after                                            afterFlag
	tags                                             []string
	wait, follow, quiet                              bool
	out                                              *output
	batch                                            string // submit_batch.go
}

func newSubmitCmd(cfg *config) *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit [flags] -- COMMAND [ARG...]",
		Short: "Submit a job: a command, a shell script or a handler",
		Long: "Submit a job. What it runs is exactly one of a command (after --), a shell script\n" +
			"(--shell, run with /bin/sh -c) or a handler kind served by SDK workers (--handler).\n" +
			"A job with no --cron schedule gets one run at once, due now, at --run-at or after --delay;\n" +
			"with --after it waits until the runs named hold their conditions (and is skipped if one never can).\n\n" +
			"Prints the run and the job it belongs to. With --wait it waits for the run to end, as\n" +
			"docker run does: each change of the run's state, with why it waits, goes to stderr, and\n" +
			"once it ends its last attempt's stdout goes to stdout and its stderr to stderr. With\n" +
			"--follow it streams the run's logs meanwhile. Both exit 0 when the run succeeded, 1 when it\n" +
			"did not, and 7 when --wait-timeout passed first (the run goes on).\n\n" +
			"With --batch FILE it submits the job specs of FILE instead, one JSON object per line, as\n" +
			"one stream the server commits in batches as it reads; see --batch.",
		Example: "  stint submit -- ./backup.sh /data\n" +
			"  stint submit --shell 'echo hi; sleep 5' --wait\n" +
			"  stint submit --name report --queue reports --cpu 2 --memory 4G --retries 3 --backoff 30s -- ./report\n" +
			"  stint submit --handler email --arg to=ops@example.com --arg subject=hello\n" +
			"  stint submit --name nightly --cron '0 3 * * *' --timezone Europe/Paris -- ./nightly\n" +
			"  stint submit --after 01jd3x5k8q9r2s4t6v8w0y2z4a --after 01jd3x5m0b1c2d3e4f5g6h7j8k:finished -- ./load\n" +
			"  stint submit --batch jobs.ndjson",
		RunE: func(cmd *cobra.Command, argv []string) error {
			if f.batch != "" {
				return runSubmitBatch(cmd, cfg, f.batch, f.out, f.quiet, argv)
			}
			return runSubmit(cmd, cfg, &f, argv)
		},
	}
	fl := cmd.Flags()
	// Flags after the command belong to the command: "stint submit ls -la" runs ls -la.
	fl.SetInterspersed(false)
	fl.StringVar(&f.shell, "shell", "", "shell script to run with /bin/sh -c")
	fl.StringVar(&f.handler, "handler", "", "handler kind to run on an SDK worker")
	fl.StringVar(&f.name, "name", "", "job name (unique; default: one is made up)")
	fl.StringVar(&f.queue, "queue", "", `queue (default "default")`)
	fl.IntVar(&f.priority, "priority", 0, "priority within the queue; higher runs first")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop an attempt that runs longer, e.g. 10m")
	fl.IntVar(&f.retries, "retries", 0, "retries after a failed first attempt (--retries 2: up to 3 attempts)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 0, "max attempts, the first included (--retries N is --max-attempts N+1)")
	fl.DurationVar(&f.backoff, "backoff", 0, "delay before the first retry, e.g. 30s")
	fl.Var(&f.runAt, "run-at", "run at this RFC 3339 time")
	fl.DurationVar(&f.delay, "delay", 0, "run after this delay, e.g. 5m")
	fl.StringVar(&f.cron, "cron", "", "cron schedule; the job then runs on it instead of once")
	fl.StringVar(&f.timezone, "timezone", "", "IANA time zone of --cron (default UTC)")
	fl.StringVar(&f.misfire, "misfire", "", "what --cron does with instants missed while no server ran: run_once (default), skip, run_all")
	fl.StringVar(&f.concurrency, "concurrency", "", "what a run does when --max-concurrency runs are active: allow, forbid, queue, replace")
	fl.IntVar(&f.maxConcurrency, "max-concurrency", 0, "runs of the job (or of its --concurrency-key) active at once (0: unlimited for allow, 1 otherwise)")
	// --max-concurrent was this flag's first spelling; stint queues set says max-concurrency.
	fl.IntVar(&f.maxConcurrency, "max-concurrent", 0, "")
	_ = fl.MarkDeprecated("max-concurrent", "use --max-concurrency")
	fl.StringVar(&f.rate, "rate", "", `rate limit of the job (or of its --concurrency-key): "N/DURATION", e.g. 100/1m`)
	fl.StringVar(&f.concurrencyKey, "concurrency-key", "", `limit per key, a template over the args, e.g. "customer-{{.customer_id}}"`)
	fl.Var(&f.args, "arg", "argument KEY=VALUE of the run, repeatable (the args object; commands get STINT_ARGS)")
	fl.Var(&f.env, "env", "environment variable KEY=VALUE, repeatable")
	fl.Var(&f.secretEnv, "secret-env", "secret environment variable KEY=VALUE, or KEY to send this shell's $KEY; repeatable. "+
		"The server encrypts it and shows it as ***; only the attempt gets it")
	fl.StringVar(&f.dir, "dir", "", "working directory on the worker")
	fl.StringVar(&f.idempotencyKey, "idempotency-key", "", "submitting again with the same key creates nothing new")
	fl.Float64Var(&f.cpu, "cpu", 0, "CPUs an attempt needs, e.g. 0.5")
	fl.Var(&f.memory, "memory", "memory an attempt needs, e.g. 512M or 2G (a bare number is MiB)")
	fl.IntVar(&f.gpu, "gpu", 0, "GPUs an attempt needs")
	fl.Var(&f.labels, "label", "worker label KEY=VALUE the job needs, repeatable")
	fl.StringArrayVar(&f.tags, "tag", nil, "tag, repeatable")
	fl.Var(&f.after, "after", "run only after run RUN_ID succeeded (RUN_ID:failed, RUN_ID:finished for the other conditions), repeatable")
	fl.BoolVar(&f.wait, "wait", false, "wait for the run to end, showing its state changes on stderr, then print its output; exit 0 only if it succeeded")
	fl.DurationVar(&f.waitTimeout, "wait-timeout", 0, "with --wait or --follow, stop waiting after this and exit 7; the run goes on (0: wait for ever)")
	fl.BoolVarP(&f.follow, "follow", "f", false, "stream the run's logs until it ends, exit 0 only if it succeeded")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print only the run id (the job id for a scheduled job)")
	f.out = addOutputFlags(cmd)
	fl.StringVar(&f.batch, "batch", "", batchFlagUsage)
	return cmd
}

func runSubmit(cmd *cobra.Command, cfg *config, f *submitFlags, argv []string) error {
	if err := f.out.check(); err != nil {
		return err
	}
	spec, err := f.spec(cmd, argv, cfg.getenv)
	if err != nil {
		return err
	}
	structured := f.out.structured()
	switch {
	case f.quiet && (f.out.json || cmd.Flags().Changed("output")):
		return Usagef("%s and --quiet: give one", f.out.flag())
	case structured && f.follow:
		return Usagef("%s and --follow: --follow prints logs, not the API object", f.out.flag())
	case (f.wait || f.follow) && f.cron != "":
		return Usagef("--cron with --wait or --follow: a scheduled job has no run to wait for")
	case f.waitTimeout < 0:
		return Usagef("--wait-timeout: must not be negative")
	case f.waitTimeout > 0 && !f.wait && !f.follow:
		return Usagef("--wait-timeout without --wait or --follow: there is no waiting to bound")
	case len(f.after.deps) > 0 && f.cron != "":
		return Usagef("--after with --cron: --after holds the job's one run, and a scheduled job has none")
	}
	c, err := cfg.client(cmd)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()

	resp, created, err := c.CreateJob(ctx, spec)
	if err != nil {
		return err
	}
	if !created {
		fmt.Fprintln(errOut, "note: an earlier submission had this idempotency key; nothing new was created")
	}
	waiting := f.wait || f.follow
	switch {
	case structured && !waiting:
		return f.out.print(out, resp, nil)
	case structured: // the run, once it ended
	case f.quiet:
		id := resp.Job.ID
		if resp.Run != nil {
			id = resp.Run.ID
		}
		fmt.Fprintln(out, id)
	default:
		w := out
		if f.wait {
			w = errOut // stdout is the run's output, as with docker run
		}
		if resp.Run != nil {
			fmt.Fprintf(w, "run %s %s\n", resp.Run.ID, resp.Run.Status)
		}
		if resp.Job.Name != "" && resp.Job.Name != resp.Job.ID {
			fmt.Fprintf(w, "job %s %s\n", resp.Job.ID, resp.Job.Name)
		} else {
			fmt.Fprintf(w, "job %s\n", resp.Job.ID)
		}
		if len(resp.Job.NextFireTimes) > 0 {
			fmt.Fprintf(w, "next %s\n", cfg.when(&resp.Job.NextFireTimes[0]))
		}
	}
	if !waiting {
		return nil
	}
	if resp.Run == nil {
		return fmt.Errorf("job %s has no run to wait for", resp.Job.ID)
	}

	waitCtx := ctx
	if f.waitTimeout > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, f.waitTimeout)
		defer cancel()
	}
	var run *apitype.Run
	switch {
	case f.follow:
		run, err = followRun(waitCtx, c, resp.Run.ID, out, errOut)
	case structured || f.quiet:
		run, err = c.WaitRun(waitCtx, resp.Run.ID, client.Finished)
	default:
		run, err = waitShowing(waitCtx, c, resp.Run, errOut)
	}
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(errOut, "stopped waiting after %s (--wait-timeout): run %s goes on\n", f.waitTimeout, resp.Run.ID)
			return &exitError{code: ExitTimeout}
		}
		return err
	}
	switch {
	case structured:
		if err := f.out.print(out, run, nil); err != nil {
			return err
		}
	case f.follow:
		fmt.Fprintln(errOut, runOutcome(run))
	case !f.quiet:
		if err := printOutput(ctx, c, run, out, errOut); err != nil {
			return err
		}
		fmt.Fprintln(errOut, runOutcome(run))
	}
	if run.Status != "succeeded" {
		return errRunFailed
	}
	return nil
}

// waitShowing waits for run to end, printing to w each change of its state, attempt or
// pending reason (one runOutcome line each, the run as submitted being the first), and
// returns it as it ended.
func waitShowing(ctx context.Context, c *client.Client, run *apitype.Run, w io.Writer) (*apitype.Run, error) {
	last := fmt.Sprintf("run %s %s", run.ID, run.Status) // printed with the submission
	return c.WaitRun(ctx, run.ID, func(r *apitype.Run) bool {
		if client.Finished(r) {
			return true
		}
		if line := runOutcome(r); line != last {
			fmt.Fprintln(w, line)
			last = line
		}
		return false
	})
}

// printOutput prints the output of a run's last attempt, its stdout to out and its stderr
// to errOut; a run that never started has none.
func printOutput(ctx context.Context, c *client.Client, run *apitype.Run, out, errOut io.Writer) error {
	if run.Attempt == 0 {
		return nil
	}
	for _, s := range []struct {
		stream string
		w      io.Writer
	}{{"stdout", out}, {"stderr", errOut}} {
		logs, err := c.Logs(ctx, run.ID, client.LogsOptions{Attempt: run.Attempt, Stream: s.stream})
		if err != nil {
			return err
		}
		_, err = io.Copy(s.w, logs)
		_ = logs.Close()
		if err != nil {
			return fmt.Errorf("read the %s of run %s: %w", s.stream, run.ID, err)
		}
	}
	return nil
}

// spec turns the flags and the command line into a job spec, refusing what is plainly wrong;
// getenv gives the values of the bare names of --secret-env.
func (f *submitFlags) spec(cmd *cobra.Command, argv []string, getenv func(string) string) (*apitype.JobSpec, error) {
	given := 0
	for _, ok := range []bool{len(argv) > 0, f.shell != "", f.handler != ""} {
		if ok {
			given++
		}
	}
	switch {
	case given == 0:
		return nil, Usagef("nothing to run: give a command after --, or --shell, or --handler")
	case given > 1:
		return nil, Usagef("give only one of a command, --shell and --handler")
	case f.runAt.t != nil && cmd.Flags().Changed("delay"):
		return nil, Usagef("--run-at and --delay: give one")
	case cmd.Flags().Changed("retries") && cmd.Flags().Changed("max-attempts"):
		return nil, Usagef("--retries and --max-attempts: give one (--retries N is --max-attempts N+1)")
	case f.retries < 0:
		return nil, Usagef("--retries: must not be negative")
	case cmd.Flags().Changed("max-attempts") && f.maxAttempts < 1:
		return nil, Usagef("--max-attempts: must be 1 or more")
	}
	args, err := f.args.json()
	if err != nil {
		return nil, err
	}
	secretEnv, err := f.secretEnv.resolve(getenv)
	if err != nil {
		return nil, err
	}
	spec := &apitype.JobSpec{
		Name:           f.name,
		Command:        argv,
		Shell:          f.shell,
		Handler:        f.handler,
		Args:           args,
		Env:            f.env.m,
		SecretEnv:      secretEnv,
		Dir:            f.dir,
		Queue:          f.queue,
		RunAt:          f.runAt.t,
		IdempotencyKey: f.idempotencyKey,
		Tags:           f.tags,
		DependsOn:      f.after.deps,
	}
	changed := cmd.Flags().Changed
	if changed("priority") {
		spec.Priority = &f.priority
	}
	if changed("timeout") {
		spec.Timeout = durationPtr(f.timeout)
	}
	if changed("delay") {
		spec.Delay = durationPtr(f.delay)
	}
	if changed("retries") || changed("max-attempts") || changed("backoff") {
		spec.Retry = &apitype.RetryPolicy{MaxAttempts: f.maxAttempts}
		if changed("retries") {
			spec.Retry.MaxAttempts = f.retries + 1
		}
		if changed("backoff") {
			spec.Retry.InitialDelay = durationPtr(f.backoff)
		}
	}
	if changed("cpu") || changed("memory") || changed("gpu") || changed("label") {
		spec.Requirements = &apitype.Requirements{CPU: f.cpu, MemoryMB: f.memory.MB, GPU: f.gpu, Labels: f.labels.m}
	}
	if f.cron != "" || f.timezone != "" || f.misfire != "" {
		spec.Schedule = &apitype.Schedule{Cron: f.cron, Timezone: f.timezone, Misfire: f.misfire}
	}
	if f.concurrency != "" || f.maxConcurrency != 0 || f.concurrencyKey != "" || f.rate != "" {
		spec.Concurrency = &apitype.Concurrency{Policy: f.concurrency, Max: f.maxConcurrency, Key: f.concurrencyKey}
		if f.rate != "" {
			r, err := parseRate(f.rate)
			if err != nil {
				return nil, err
			}
			spec.Concurrency.Rate = r
		}
	}
	return spec, nil
}

func durationPtr(d time.Duration) *apitype.Duration {
	v := apitype.Duration(d)
	return &v
}

// followRun streams the logs of each attempt of a run in turn until the run is final, and
// returns the final run. Attempts after the first get a header on errOut.
func followRun(ctx context.Context, c *client.Client, id string, out, errOut io.Writer) (*apitype.Run, error) {
	for n := 1; ; n++ {
		run, err := c.WaitRun(ctx, id, func(r *apitype.Run) bool { return client.Finished(r) || r.Attempt >= n })
		if err != nil {
			return nil, err
		}
		if run.Attempt < n {
			return run, nil // final, and attempt n never started
		}
		if n > 1 {
			fmt.Fprintf(errOut, "--- attempt %d ---\n", n)
		}
		logs, err := c.Logs(ctx, id, client.LogsOptions{Attempt: n, Follow: true})
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(out, logs)
		_ = logs.Close()
		if err != nil {
			return nil, fmt.Errorf("read logs of attempt %d: %w", n, err)
		}
	}
}

// runOutcome says in one line where a run stands: "run r1 failed (attempt 3/3): exit code 2".
func runOutcome(r *apitype.Run) string {
	s := fmt.Sprintf("run %s %s", r.ID, r.Status)
	if r.CancelRequested && !client.Finished(r) {
		s += ", cancel requested"
	}
	if r.Attempt > 0 {
		s += " (attempt " + attemptOf(r) + ")"
	}
	if r.Error != "" {
		s += ": " + r.Error
	} else if r.PendingReason != "" && !client.Finished(r) {
		s += ": " + r.PendingReason
	}
	return s
}

// attemptOf shows the attempt count against the maximum: "2/3", or "2" with no maximum;
// attempts lost to infrastructure, which the maximum does not count, follow it: "2/1+1".
func attemptOf(r *apitype.Run) string {
	s := fmt.Sprint(r.Attempt)
	if r.MaxAttempts > 0 {
		s = fmt.Sprintf("%d/%d", r.Attempt, r.MaxAttempts)
	}
	if r.Disruptions > 0 {
		s += fmt.Sprintf("+%d", r.Disruptions)
	}
	return s
}
