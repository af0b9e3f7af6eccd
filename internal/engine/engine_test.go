package engine

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

type testBundle struct {
	clk   *clock.Fake
	store store.Store
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// setup starts an engine with a fake clock on a fresh SQLite store. The lease TTL is 10s;
// mods change the rest of the config.
func setup(t *testing.T, mods ...func(*Config)) (*Engine, *testBundle) {
	t.Helper()
	return setupAt(t, t0, mods...)
}

// setupAt is setup with the fake clock starting at start.
func setupAt(t *testing.T, start time.Time, mods ...func(*Config)) (*Engine, *testBundle) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "stint.db")})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(start)
	cfg := Config{
		Store:    st,
		Clock:    clk,
		Logger:   slog.New(slog.DiscardHandler),
		LeaseTTL: 10 * time.Second,
		Rand:     func() float64 { return 0.5 },
	}
	for _, m := range mods {
		m(&cfg)
	}
	e := New(cfg)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(e.Stop)
	return e, &testBundle{clk: clk, store: st}
}

// submit creates a noop job with one run due at due (zero: now).
func submit(t *testing.T, e *Engine, b *testBundle, due time.Time, retry model.RetryPolicy) *model.Run {
	t.Helper()
	now := b.clk.Now()
	jobID := id.New(now)
	job := &model.Job{
		ID: jobID, Namespace: model.DefaultNamespace, Name: jobID, Enabled: true,
		Spec:      model.JobSpec{Handler: "noop", Queue: model.DefaultQueue, Retry: retry},
		CreatedAt: now, UpdatedAt: now,
	}
	run := scheduler.NewRun(id.New(now), job, model.TriggerSubmit, nil, due, now)
	res, err := e.SubmitJobs(context.Background(), []store.NewJob{{Job: job, Run: run}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	return res[0].Run
}

// register registers workerID as the worker itself (Takeover): a new session replaces a
// live one.
func register(t *testing.T, e *Engine, workerID string) {
	t.Helper()
	_, err := e.Register(context.Background(), &RegisterParams{
		ID: workerID, Capacity: model.Capacity{Slots: 10}, Handlers: []string{"noop"}, Takeover: true,
	})
	require.NoError(t, err)
}

func lease(t *testing.T, e *Engine, workerID string, maxRuns int, wait time.Duration) *LeaseResult {
	t.Helper()
	resp, err := e.Lease(context.Background(), workerID, &LeaseParams{Max: maxRuns, Wait: wait})
	require.NoError(t, err)
	return resp
}

// completeWith reports the end of lease l with status; the answer is the completion's result.
func completeWith(t *testing.T, e *Engine, l *model.Lease, status model.AttemptStatus) store.CompletionResult {
	t.Helper()
	res, err := e.Complete(context.Background(), []store.Completion{{RunID: l.Run.ID, Token: l.Token, Status: status}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	return res[0]
}

// complete reports the end of lease l with status and requires it accepted.
func complete(t *testing.T, e *Engine, l *model.Lease, status model.AttemptStatus) {
	t.Helper()
	require.NoError(t, completeWith(t, e, l, status).Err)
}

func getRun(t *testing.T, b *testBundle, runID string) *model.Run {
	t.Helper()
	r, err := b.store.GetRun(context.Background(), &store.GetRunParams{ID: runID})
	require.NoError(t, err)
	return r
}

// The engine's services (internal/service) read the time, work out how long to sleep and
// then set a timer. A test moves the fake clock only once the service that must act sleeps
// on a timer that the move fires (waitTimer, waitTimerBy): a service caught between reading
// the time and setting its timer would work out its wait from the old time, and sleep past
// the instant the test moved to. The services' own tests wait on their Slept signal
// instead; these tests of the whole engine look at the fake clock's pending timers.

// waitTimer waits until some service sleeps on a fake-clock timer due at at.
func waitTimer(t *testing.T, b *testBundle, at time.Time) {
	t.Helper()
	require.Eventually(t, func() bool { return slices.ContainsFunc(b.clk.Pending(), at.Equal) }, 10*time.Second, time.Millisecond,
		"no timer due at %s; pending: %v", at, b.clk.Pending())
}

// waitTimerBy waits until some service sleeps on a fake-clock timer that setting the clock to
// at fires: one due after the current time and no later than at.
func waitTimerBy(t *testing.T, b *testBundle, at time.Time) {
	t.Helper()
	now := b.clk.Now()
	firedBy := func(due time.Time) bool { return due.After(now) && !due.After(at) }
	require.Eventually(t, func() bool { return slices.ContainsFunc(b.clk.Pending(), firedBy) }, 10*time.Second, time.Millisecond,
		"no timer due after %s and by %s; pending: %v", now, at, b.clk.Pending())
}

// waitFor checks cond until it holds.
func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, msg)
}

func TestLeaseLongPollWakesOnSubmit(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	register(t, e, "w1")
	got := make(chan *LeaseResult, 1)
	go func() { got <- lease(t, e, "w1", 5, time.Hour) }()
	// The poll parks on a fake-clock timer that never fires in this test, so only the
	// submission's wake-up can end it.
	waitTimer(t, b, t0.Add(30*time.Second)) // the wait is capped at MaxLeaseWait (30s)
	run := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	resp := pollAnswer(t, got, "long poll was not woken by the submission")
	require.Len(t, resp.Leases, 1)
	require.Equal(t, run.ID, resp.Leases[0].Run.ID)
	require.Equal(t, "noop", resp.Leases[0].Spec.Handler)
}

func TestScheduledRunIsLeasableWhenDue(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	register(t, e, "w1")
	due := t0.Add(5 * time.Second)
	run := submit(t, e, b, due, model.RetryPolicy{})
	require.Equal(t, model.RunScheduled, run.Status)
	require.Equal(t, model.PendingNotDue, run.PendingCode)
	waitTimer(t, b, due) // the promoter sleeps until the run is due

	b.clk.Set(due.Add(-time.Millisecond))
	require.Empty(t, lease(t, e, "w1", 5, 0).Leases, "not due yet")
	require.Equal(t, model.RunScheduled, getRun(t, b, run.ID).Status)

	// Due: leased straight from scheduled, before the promoter queues it.
	b.clk.Set(due)
	resp := lease(t, e, "w1", 5, 0)
	require.Len(t, resp.Leases, 1)
	require.Equal(t, run.ID, resp.Leases[0].Run.ID)
	require.Equal(t, model.RunRunning, getRun(t, b, run.ID).Status)
}

func TestDueRunNoLeaseTookIsQueuedAfterTheGrace(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	due := t0.Add(5 * time.Second)
	run := submit(t, e, b, due, model.RetryPolicy{})
	waitTimer(t, b, due)

	// A worker waiting in a long poll is woken as the run falls due. The poll parks on a
	// fake-clock timer (MaxLeaseWait) that moving the clock to due does not fire.
	register(t, e, "w1")
	polled := make(chan *LeaseResult, 1)
	go func() { polled <- lease(t, e, "w1", 1, time.Hour) }()
	waitTimer(t, b, t0.Add(30*time.Second))
	b.clk.Set(due)
	resp := pollAnswer(t, polled, "the long poll was not woken when the run fell due")
	require.Len(t, resp.Leases, 1)
	require.Equal(t, run.ID, resp.Leases[0].Run.ID)

	// With no worker to take it, a due run stays scheduled for the grace, then is queued.
	later := submit(t, e, b, due.Add(time.Second), model.RetryPolicy{})
	waitTimer(t, b, due.Add(time.Second))
	b.clk.Set(due.Add(time.Second))
	waitTimer(t, b, due.Add(time.Second+dueGrace))
	require.Equal(t, model.RunScheduled, getRun(t, b, later.ID).Status)
	b.clk.Set(due.Add(time.Second + dueGrace))
	waitFor(t, func() bool { return getRun(t, b, later.ID).Status == model.RunQueued }, "run queued after the grace")
}

func TestExpiredLeaseIsRescuedAndRetried(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	register(t, e, "w1")
	// No disruptions: the lost attempts count, and the second one ends the run.
	noDisruptions := 0
	run := submit(t, e, b, time.Time{}, model.RetryPolicy{MaxAttempts: 2, InitialDelay: 3 * time.Second, MaxDisruptions: &noDisruptions})
	first := lease(t, e, "w1", 1, 0)
	require.Len(t, first.Leases, 1)

	// w1 goes silent. After the TTL its attempt is lost and the run waits out its backoff.
	// The rescuer sleeps a TTL (t0+10s), or until the lease's expiry (t0+10s+1ms) if it has
	// seen the lease: either way a timer that moving the clock to expired fires.
	expired := t0.Add(10*time.Second + time.Millisecond)
	waitTimerBy(t, b, expired)
	b.clk.Set(expired)
	waitFor(t, func() bool { return getRun(t, b, run.ID).Status == model.RunScheduled }, "lost attempt rescued")
	r := getRun(t, b, run.ID)
	require.Equal(t, model.PendingRetryBackoff, r.PendingCode)
	require.Equal(t, expired.Add(3*time.Second), r.ScheduledFor, "backoff of 3s (jitter midpoint)")
	require.Equal(t, model.AttemptLost, r.Attempts[0].Status)
	// w1, if it still polls, is told to kill it, once (the push follows the store's commit).
	var lost []string
	waitFor(t, func() bool { lost = append(lost, lease(t, e, "w1", 0, 0).Lost...); return len(lost) > 0 }, "w1 told of its lost attempt")
	require.Equal(t, []string{run.ID}, lost)
	require.Empty(t, lease(t, e, "w1", 0, 0).Lost)

	// The late completion of the lost attempt is refused (fencing).
	require.ErrorIs(t, completeWith(t, e, first.Leases[0], model.AttemptSucceeded).Err, model.ErrLeaseLost)

	// Due again: another worker takes attempt 2, and also goes silent: attempts are spent.
	// Before the clock moves, the promoter sleeps until the retry is due, and the rescuer,
	// with no lease left, a TTL from the rescue: a rescuer still working out its wait when
	// the clock jumps would oversleep the second expiry.
	register(t, e, "w2")
	retryAt := expired.Add(3 * time.Second)
	waitTimer(t, b, retryAt)
	waitTimer(t, b, expired.Add(10*time.Second))
	b.clk.Set(retryAt)
	second := lease(t, e, "w2", 1, 0)
	require.Len(t, second.Leases, 1)
	require.Equal(t, 2, second.Leases[0].Run.Attempt)
	expiredAgain := retryAt.Add(10*time.Second + time.Millisecond)
	waitTimerBy(t, b, expiredAgain)
	b.clk.Set(expiredAgain)
	waitFor(t, func() bool { return getRun(t, b, run.ID).Status == model.RunFailed }, "second lost attempt rescued, run failed")
	r = getRun(t, b, run.ID)
	require.Len(t, r.Attempts, 2)
	require.Equal(t, model.AttemptLost, r.Attempts[1].Status)
}

func TestHeartbeatKeepsLeaseAlive(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	register(t, e, "w1")
	run := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	l := lease(t, e, "w1", 1, 0).Leases[0]
	for i := 1; i <= 5; i++ {
		b.clk.Set(t0.Add(time.Duration(i) * 5 * time.Second))
		hb, err := e.Heartbeat(context.Background(), "w1", &HeartbeatParams{Held: []store.LeaseRef{{RunID: run.ID, Token: l.Token}}})
		require.NoError(t, err)
		require.Empty(t, hb.Lost)
	}
	require.Equal(t, model.RunRunning, getRun(t, b, run.ID).Status, "25s in, with heartbeats every 5s")
	complete(t, e, l, model.AttemptSucceeded)
	require.Equal(t, model.RunSucceeded, getRun(t, b, run.ID).Status)
}

func TestCancelIsPushedToTheWorkersLongPoll(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	register(t, e, "w1")
	run := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	require.Len(t, lease(t, e, "w1", 1, 0).Leases, 1)

	got := make(chan *LeaseResult, 1)
	go func() { got <- lease(t, e, "w1", 0, time.Hour) }() // full worker: a Max 0 poll
	waitTimer(t, b, t0.Add(30*time.Second))                // the wait is capped at MaxLeaseWait (30s)
	cancelled, err := e.CancelRuns(context.Background(), &store.CancelRunsParams{RunIDs: []string{run.ID}})
	require.NoError(t, err)
	require.True(t, cancelled[0].CancelRequested)
	resp := pollAnswer(t, got, "cancel was not pushed to the long poll")
	require.Equal(t, []string{run.ID}, resp.Cancel)
}

func TestReRegisteredWorkerLosesItsAttempts(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	register(t, e, "w1")
	run := submit(t, e, b, time.Time{}, model.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Nanosecond})
	old := lease(t, e, "w1", 1, 0).Leases[0]

	register(t, e, "w1") // the process restarted: a new session
	r := getRun(t, b, run.ID)
	require.NotEqual(t, model.RunRunning, r.Status)
	require.Equal(t, model.AttemptLost, r.Attempts[0].Status)

	hb, err := e.Heartbeat(context.Background(), "w1", &HeartbeatParams{Held: []store.LeaseRef{{RunID: run.ID, Token: old.Token}}})
	require.NoError(t, err)
	require.Equal(t, []string{run.ID}, hb.Lost, "the old session's lease is gone")
}

func TestLeaseFromUnknownWorker(t *testing.T) {
	t.Parallel()
	e, _ := setup(t)
	_, err := e.Lease(context.Background(), "nobody", &LeaseParams{Max: 1})
	require.ErrorIs(t, err, ErrUnknownWorker)
	require.ErrorIs(t, err, model.ErrNotFound)
}

func TestQueuedRunsSayWhyTheyWait(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	ctx := context.Background()
	run := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	explain := func() *model.Run {
		r := getRun(t, b, run.ID)
		require.NoError(t, e.ExplainPending(ctx, []*model.Run{r}))
		return r
	}
	r := explain()
	require.Equal(t, model.PendingNoWorker, r.PendingCode)
	require.Equal(t, "no worker is connected", r.PendingReason)

	register(t, e, "w1")
	require.Contains(t, explain().PendingReason, "the one active worker is busy")

	paused := true
	_, err := e.UpdateQueue(ctx, &store.UpdateQueueParams{Name: model.DefaultQueue, Paused: &paused})
	require.NoError(t, err)
	r = explain()
	require.Equal(t, model.PendingQueuePaused, r.PendingCode)
	require.Empty(t, lease(t, e, "w1", 5, 0).Leases, "a paused queue hands out nothing")

	paused = false
	zero := 1
	_, err = e.UpdateQueue(ctx, &store.UpdateQueueParams{Name: model.DefaultQueue, Paused: &paused, MaxConcurrency: &zero})
	require.NoError(t, err)
	second := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	require.Len(t, lease(t, e, "w1", 5, 0).Leases, 1, "max concurrency 1")
	waiting := run.ID
	if getRun(t, b, run.ID).Status == model.RunRunning {
		waiting = second.ID
	}
	r = getRun(t, b, waiting)
	require.NoError(t, e.ExplainPending(ctx, []*model.Run{r}))
	require.Equal(t, model.PendingConcurrencyLimit, r.PendingCode)
}

// cancelOnLease is a store whose LeaseRuns cancels the poll's context once it has leased,
// as a worker that dies while its poll is being answered does.
type cancelOnLease struct {
	store.Store
	cancel context.CancelFunc
}

func (s *cancelOnLease) LeaseRuns(ctx context.Context, p *store.LeaseRunsParams) (*store.Leased, error) {
	l, err := s.Store.LeaseRuns(ctx, p)
	s.cancel()
	return l, err
}

func TestLeaseOfAGonePollEndsLostAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, b := setup(t, func(c *Config) { c.Store = &cancelOnLease{Store: c.Store, cancel: cancel} })
	run := submit(t, e, b, time.Time{}, model.RetryPolicy{MaxAttempts: 1})
	register(t, e, "w1")

	_, err := e.Lease(ctx, "w1", &LeaseParams{Max: 1})
	require.ErrorIs(t, err, context.Canceled, "the poll is gone: no answer")

	// The attempt ended lost at once, without the clock moving to the lease's expiry, and
	// the run is queued again without spending its one attempt: a disruption.
	got, err := b.store.GetRun(context.Background(), &store.GetRunParams{ID: run.ID})
	require.NoError(t, err)
	require.Equal(t, model.RunQueued, got.Status)
	require.Equal(t, 1, got.Disruptions)
	require.Len(t, got.Attempts, 1)
	require.Equal(t, model.AttemptLost, got.Attempts[0].Status)
	require.Equal(t, scheduler.LeaseUndelivered, got.Attempts[0].Error)
}

// A run whose lease expired on w1 and that w1 leased again is not pushed to w1 as lost: the
// push names runs, and is about the old attempt, so a worker applying it would kill the new
// one. That holds whether the push is pending when w1 leases the run again (the same answer)
// or comes after (the rescuer pushes once its transaction has committed, and w1 may have
// leased the run meanwhile).
func TestLostPushSparesARunLeasedAgain(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	register(t, e, "w1")
	run := submit(t, e, b, time.Time{}, model.RetryPolicy{})
	require.Len(t, lease(t, e, "w1", 1, 0).Leases, 1)

	expired := t0.Add(10*time.Second + time.Millisecond)
	waitTimerBy(t, b, expired)
	b.clk.Set(expired)
	waitFor(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.workers["w1"].lost) > 0
	}, "the lost push pending for w1")
	again := lease(t, e, "w1", 1, 0)
	require.Len(t, again.Leases, 1, "the run, retried at once (a disruption), leased to w1 again")
	require.Equal(t, 2, again.Leases[0].Run.Attempt)
	require.Empty(t, again.Lost, "the push is about attempt 1")

	e.pushLost([]*model.Run{getRun(t, b, run.ID)}) // a push arriving after the new lease
	require.Empty(t, lease(t, e, "w1", 0, 0).Lost)
	require.Equal(t, model.RunRunning, getRun(t, b, run.ID).Status)
}

// pollAnswer waits for the answer of a lease poll running in another goroutine; the test
// fails with msg if none comes.
func pollAnswer(t *testing.T, got <-chan *LeaseResult, msg string) *LeaseResult {
	t.Helper()
	select {
	case resp := <-got:
		return resp
	case <-time.After(10 * time.Second):
		t.Fatal(msg)
		return nil
	}
}
