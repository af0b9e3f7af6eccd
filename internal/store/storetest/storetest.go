package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// OpenFunc opens a fresh, empty store for one test. The engine's test registers the
// clean-up (closing the store, removing its file or schema) with t.Cleanup.
type OpenFunc func(t testing.TB) store.Store

// Run runs the whole conformance suite against the engine that open opens. Every subtest
// calls open once and runs in parallel with the others.
func Run(t *testing.T, open func(t testing.TB) store.Store) {
	t.Helper()
	groups := []struct {
		name string
		run  func(t *testing.T, open OpenFunc)
	}{
		{"Jobs", testJobs},
		{"Anonymous", testAnonymous},
		{"Runs", testRuns},
		{"Dispatch", testDispatch},
		{"Completion", testCompletion},
		{"Logs", testLogs},
		{"Queues", testQueues},
		{"Workers", testWorkers},
		{"Cron", testCron},
		{"Limits", testLimits},
		{"Placement", testPlacement},
		{"Dependencies", testDeps},
		{"Pipelines", testPipelines},
		{"Wording", testWording},
		{"Cluster", testCluster},
		{"Tokens", testTokens},
		{"Secrets", testSecrets},
		{"Retention", testRetention},
		{"Alerts", testAlerts},
		{"Audit", testAudit},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t, open)
		})
	}
}

// t0 is the fixed instant every test measures time from.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) //nolint:gochecknoglobals // a read-only test constant

// at returns t0 + d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// fx is one test's fixture: a fresh store and helpers that build and store data.
type fx struct {
	t   *testing.T
	ctx context.Context
	s   store.Store
	seq int
}

// setup opens a fresh store for a parallel subtest.
func setup(t *testing.T, open OpenFunc) *fx {
	t.Helper()
	t.Parallel()
	return &fx{t: t, ctx: t.Context(), s: open(t)}
}

// id returns a new id that sorts after every id this fixture made before.
func (f *fx) id() string {
	f.seq++
	return id.New(t0.Add(time.Duration(f.seq) * time.Millisecond))
}

// job builds a command job named name in the default namespace and queue (not stored).
func (f *fx) job(name string, mods ...func(*model.Job)) *model.Job {
	j := &model.Job{
		ID:        f.id(),
		Namespace: model.DefaultNamespace,
		Name:      name,
		Spec: model.JobSpec{
			Command: []string{"true"},
			Queue:   model.DefaultQueue,
			Retry:   retryAtOnce,
		},
		Enabled:   true,
		CreatedAt: t0,
		UpdatedAt: t0,
	}
	for _, m := range mods {
		m(j)
	}
	return j
}

// run builds a queued run of j, due at t0 (not stored).
func (f *fx) run(j *model.Job, mods ...func(*model.Run)) *model.Run {
	maxAttempts := j.Spec.Retry.MaxAttempts
	if maxAttempts < 1 {
		maxAttempts = 1
	}
	r := &model.Run{
		ID:           f.id(),
		JobID:        j.ID,
		JobName:      j.Name,
		Namespace:    j.Namespace,
		Status:       model.RunQueued,
		Queue:        j.Spec.Queue,
		Priority:     j.Spec.Priority,
		Trigger:      model.TriggerSubmit,
		ScheduledFor: t0,
		CreatedAt:    t0,
		MaxAttempts:  maxAttempts,
	}
	for _, m := range mods {
		m(r)
	}
	return r
}

// cronAt makes a run the cron run of instant, as scheduler.NewCronRun builds one: due at
// the instant, and holding it.
func cronAt(instant time.Time) func(*model.Run) {
	return func(r *model.Run) { r.Trigger, r.ScheduledFor, r.Instant = model.TriggerCron, instant, &instant }
}

// createJob stores j with first run r (nil: none) and requires success.
func (f *fx) createJob(j *model.Job, r *model.Run) store.CreateJobResult {
	f.t.Helper()
	res, err := f.s.CreateJobs(f.ctx, &store.CreateJobsParams{Jobs: []store.NewJob{{Job: j, Run: r}}, Now: t0})
	require.NoError(f.t, err)
	require.Len(f.t, res, 1)
	require.NoError(f.t, res[0].Err)
	require.False(f.t, res[0].Existing)
	return res[0]
}

// submit stores a job named name with one queued run due at t0, and returns both as stored.
func (f *fx) submit(name string, mods ...func(*model.Job)) (*model.Job, *model.Run) {
	f.t.Helper()
	j := f.job(name, mods...)
	res := f.createJob(j, f.run(j))
	return res.Job, res.Run
}

// createRuns stores runs of existing jobs and requires success for each.
func (f *fx) createRuns(runs ...*model.Run) []*model.Run {
	f.t.Helper()
	res, err := f.s.CreateRuns(f.ctx, &store.CreateRunsParams{Runs: runs, Now: t0})
	require.NoError(f.t, err)
	require.Len(f.t, res, len(runs))
	out := make([]*model.Run, len(res))
	for i, r := range res {
		require.NoError(f.t, r.Err)
		require.False(f.t, r.Existing)
		out[i] = r.Run
	}
	return out
}

// lease leases up to max runs for worker at now with a 30 s TTL.
func (f *fx) lease(worker string, max int, now time.Time) []*model.Lease {
	f.t.Helper()
	ls, err := Leases(f.s.LeaseRuns(f.ctx, &store.LeaseRunsParams{WorkerID: worker, Max: max, LeaseTTL: 30 * time.Second, Now: now}))
	require.NoError(f.t, err)
	return ls
}

// leaseOne leases exactly one run and returns its lease.
func (f *fx) leaseOne(worker string, now time.Time) *model.Lease {
	f.t.Helper()
	ls := f.lease(worker, 1, now)
	require.Len(f.t, ls, 1)
	return ls[0]
}

// complete reports one completion and returns its result (Err not checked). rand is the
// params' Rand; nil here means drawZero, which retries the fixture's jobs at once.
func (f *fx) complete(c store.Completion, now time.Time, rand func() float64) store.CompletionResult {
	f.t.Helper()
	if rand == nil {
		rand = drawZero
	}
	res, err := f.s.CompleteAttempts(f.ctx, &store.CompleteAttemptsParams{Completions: []store.Completion{c}, Now: now, Rand: rand})
	require.NoError(f.t, err)
	require.Len(f.t, res, 1)
	return res[0]
}

// finish completes lease l with status and exit code and requires it accepted.
func (f *fx) finish(l *model.Lease, status model.AttemptStatus, exit *int, now time.Time) *model.Run {
	f.t.Helper()
	res := f.complete(store.Completion{RunID: l.Run.ID, Token: l.Token, Status: status, ExitCode: exit, Error: errText(status)}, now, nil)
	require.NoError(f.t, res.Err)
	require.NotNil(f.t, res.Run)
	return res.Run
}

// heartbeat sends the one beat b (see store.Store.Heartbeat) and returns its result, or its
// Err.
func (f *fx) heartbeat(b store.Beat, ttl time.Duration, now time.Time) (*store.HeartbeatResult, error) {
	f.t.Helper()
	res, err := f.s.Heartbeat(f.ctx, &store.HeartbeatParams{Beats: []store.Beat{b}, LeaseTTL: ttl, Now: now})
	if err != nil {
		return nil, err
	}
	require.Len(f.t, res, 1)
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	return &res[0], nil
}

// getRun reads a run and requires it exists.
func (f *fx) getRun(runID string) *model.Run {
	f.t.Helper()
	r, err := f.s.GetRun(f.ctx, &store.GetRunParams{ID: runID})
	require.NoError(f.t, err)
	return r
}

// register registers worker w with session and generous capacity, as the worker itself
// (Takeover): a new session replaces a live one.
func (f *fx) register(w, session string, now time.Time) (*model.Worker, []*model.Run) {
	f.t.Helper()
	wk, lost, err := f.s.RegisterWorker(f.ctx, &store.RegisterWorkerParams{
		ID: w, Session: session, Labels: map[string]string{"zone": "a"},
		Capacity: model.Capacity{CPU: 8, MemoryMB: 16384, GPU: 2, Slots: 16}, Now: now, Rand: drawZero,
		Takeover: true,
	})
	require.NoError(f.t, err)
	return wk, lost
}

func errText(s model.AttemptStatus) string {
	if s == model.AttemptSucceeded {
		return ""
	}
	return "attempt " + string(s)
}

func intp(i int) *int                  { return &i }
func timep(t time.Time) *time.Time     { return &t }
func boolp(b bool) *bool               { return &b }
func micro(t time.Time) time.Time      { return t.UTC().Truncate(time.Microsecond) }
func rawJSON(s string) json.RawMessage { return json.RawMessage(s) }

// runIDs returns the ids of runs, in order.
func runIDs(runs []*model.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// leaseIDs returns the run ids of leases, in order.
func leaseIDs(ls []*model.Lease) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Run.ID
	}
	return out
}

// retryAtOnce is the retry policy of the fixture's jobs: one attempt, and full jitter, so
// that with a draw of 0 (drawZero) the backoff is zero. A test that gives such a job more
// attempts sees a failed attempt retried at once (queued), as long as it draws zero.
var retryAtOnce = model.RetryPolicy{MaxAttempts: 1, Jitter: 1} //nolint:gochecknoglobals // a read-only test constant

// drawZero is a Rand that always draws 0.
func drawZero() float64 { return 0 }

// randRecorder is a Rand that always draws u and counts its draws.
type randRecorder struct {
	u     float64
	draws int
}

func (r *randRecorder) fn() float64 {
	r.draws++
	return r.u
}

// Leases unwraps LeaseRuns' answer for callers that look at the leases only.
func Leases(l *store.Leased, err error) ([]*model.Lease, error) {
	if err != nil {
		return nil, err
	}
	return l.Leases, nil
}
