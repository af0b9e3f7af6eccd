package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// ErrCrashed is what every call of a crashed store returns: the server process died at a
// store write (see crashStore).
var ErrCrashed = errors.New("server crashed")

// crashMode says whether the write a crash interrupts is committed.
type crashMode int

const (
	crashBefore crashMode = iota // the process dies before the write commits: nothing of it happened
	crashAfter                   // the write commits, and the process dies before its answer is used
)

func (m crashMode) String() string {
	if m == crashAfter {
		return "after"
	}
	return "before"
}

// crashStore is the store as one server process sees it: it counts the writes (every
// method that runs a write transaction, whether or not it changes anything) and, at write
// number crashAt, kills the process: the write is committed or not (mode), and that call
// and every later one, reads included, fail with ErrCrashed. The simulation then drops
// the engine and everything it held in memory, closes the store, and later opens a new
// one on the same database (a restart).
//
// It is used by one goroutine at a time (the simulation's, or an engine committer's while
// the simulation waits for it), so it needs no lock.
type crashStore struct {
	inner   store.Store
	writes  int // writes so far, the crashing one included
	crashAt int // 0: never
	mode    crashMode
	dead    bool
	crashOp string // the method that crashed
}

var _ store.Store = (*crashStore)(nil)

// call runs f, a call of the inner store, unless the process is dead or dies at it.
func call[R any](c *crashStore, write bool, op string, f func() (R, error)) (R, error) {
	var zero R
	if c.dead {
		return zero, fmt.Errorf("%s: %w", op, ErrCrashed)
	}
	if !write {
		return f()
	}
	c.writes++
	if c.writes != c.crashAt {
		return f()
	}
	c.dead, c.crashOp = true, op
	if c.mode == crashAfter {
		_, _ = f() // committed (or failed on its own): either way the answer is lost
	}
	return zero, fmt.Errorf("%s: %w", op, ErrCrashed)
}

// Close closes the inner store, dead or not (the process's files are closed either way).
func (c *crashStore) Close() error { return c.inner.Close() }

func (c *crashStore) CreateJobs(ctx context.Context, p *store.CreateJobsParams) ([]store.CreateJobResult, error) {
	return call(c, true, "CreateJobs", func() ([]store.CreateJobResult, error) { return c.inner.CreateJobs(ctx, p) })
}

func (c *crashStore) GetJob(ctx context.Context, p *store.GetJobParams) (*model.Job, error) {
	return call(c, false, "GetJob", func() (*model.Job, error) { return c.inner.GetJob(ctx, p) })
}

func (c *crashStore) ListJobs(ctx context.Context, p *store.ListJobsParams) (*store.JobPage, error) {
	return call(c, false, "ListJobs", func() (*store.JobPage, error) { return c.inner.ListJobs(ctx, p) })
}

func (c *crashStore) UpdateJob(ctx context.Context, p *store.UpdateJobParams) (*model.Job, error) {
	return call(c, true, "UpdateJob", func() (*model.Job, error) { return c.inner.UpdateJob(ctx, p) })
}

func (c *crashStore) DeleteJob(ctx context.Context, p *store.DeleteJobParams) ([]*model.Run, error) {
	return call(c, true, "DeleteJob", func() ([]*model.Run, error) { return c.inner.DeleteJob(ctx, p) })
}

func (c *crashStore) CreateRuns(ctx context.Context, p *store.CreateRunsParams) ([]store.CreateRunResult, error) {
	return call(c, true, "CreateRuns", func() ([]store.CreateRunResult, error) { return c.inner.CreateRuns(ctx, p) })
}

func (c *crashStore) GetRun(ctx context.Context, p *store.GetRunParams) (*model.Run, error) {
	return call(c, false, "GetRun", func() (*model.Run, error) { return c.inner.GetRun(ctx, p) })
}

func (c *crashStore) ListRuns(ctx context.Context, p *store.ListRunsParams) (*store.RunPage, error) {
	return call(c, false, "ListRuns", func() (*store.RunPage, error) { return c.inner.ListRuns(ctx, p) })
}

func (c *crashStore) LastRuns(ctx context.Context, p *store.LastRunsParams) (map[string]*model.Run, error) {
	return call(c, false, "LastRuns", func() (map[string]*model.Run, error) { return c.inner.LastRuns(ctx, p) })
}

func (c *crashStore) CancelRuns(ctx context.Context, p *store.CancelRunsParams) ([]*model.Run, error) {
	return call(c, true, "CancelRuns", func() ([]*model.Run, error) { return c.inner.CancelRuns(ctx, p) })
}

func (c *crashStore) RetryRun(ctx context.Context, p *store.RetryRunParams) (*model.Run, error) {
	return call(c, true, "RetryRun", func() (*model.Run, error) { return c.inner.RetryRun(ctx, p) })
}

func (c *crashStore) ReopenRuns(ctx context.Context, p *store.ReopenRunsParams) ([]*model.Run, error) {
	return call(c, true, "ReopenRuns", func() ([]*model.Run, error) { return c.inner.ReopenRuns(ctx, p) })
}

func (c *crashStore) NextFire(ctx context.Context, p *store.NextFireParams) (time.Time, bool, error) {
	type pair struct {
		a time.Time
		b bool
	}
	p2, err := call(c, false, "NextFire", func() (pair, error) {
		a, b, err := c.inner.NextFire(ctx, p)
		return pair{a, b}, err
	})
	return p2.a, p2.b, err
}

func (c *crashStore) DueJobs(ctx context.Context, p *store.DueJobsParams) ([]*model.Job, error) {
	return call(c, false, "DueJobs", func() ([]*model.Job, error) { return c.inner.DueJobs(ctx, p) })
}

func (c *crashStore) FireJobs(ctx context.Context, p *store.FireJobsParams) ([]store.FireResult, error) {
	return call(c, true, "FireJobs", func() ([]store.FireResult, error) { return c.inner.FireJobs(ctx, p) })
}

func (c *crashStore) AdmitHeld(ctx context.Context, p *store.AdmitHeldParams) ([]*model.Run, error) {
	return call(c, true, "AdmitHeld", func() ([]*model.Run, error) { return c.inner.AdmitHeld(ctx, p) })
}

func (c *crashStore) ReleaseDue(ctx context.Context, p *store.ReleaseDueParams) ([]*model.Run, error) {
	return call(c, true, "ReleaseDue", func() ([]*model.Run, error) { return c.inner.ReleaseDue(ctx, p) })
}

func (c *crashStore) NextRelease(ctx context.Context) (time.Time, bool, error) {
	type pair struct {
		a time.Time
		b bool
	}
	p2, err := call(c, false, "NextRelease", func() (pair, error) {
		a, b, err := c.inner.NextRelease(ctx)
		return pair{a, b}, err
	})
	return p2.a, p2.b, err
}

func (c *crashStore) NextQueueTurn(ctx context.Context, p *store.NextQueueTurnParams) (time.Time, bool, error) {
	type pair struct {
		a time.Time
		b bool
	}
	p2, err := call(c, false, "NextQueueTurn", func() (pair, error) {
		a, b, err := c.inner.NextQueueTurn(ctx, p)
		return pair{a, b}, err
	})
	return p2.a, p2.b, err
}

func (c *crashStore) FiredInstants(ctx context.Context, p *store.FiredInstantsParams) ([]time.Time, error) {
	return call(c, false, "FiredInstants", func() ([]time.Time, error) { return c.inner.FiredInstants(ctx, p) })
}

func (c *crashStore) SetWebhookSecret(ctx context.Context, p *store.SetWebhookSecretParams) error {
	_, err := call(c, true, "SetWebhookSecret", func() (struct{}, error) { return struct{}{}, c.inner.SetWebhookSecret(ctx, p) })
	return err
}

func (c *crashStore) WebhookSecret(ctx context.Context, p *store.WebhookSecretParams) (string, error) {
	return call(c, false, "WebhookSecret", func() (string, error) { return c.inner.WebhookSecret(ctx, p) })
}

func (c *crashStore) PromoteDue(ctx context.Context, p *store.PromoteDueParams) (int, error) {
	return call(c, true, "PromoteDue", func() (int, error) { return c.inner.PromoteDue(ctx, p) })
}

func (c *crashStore) NextDue(ctx context.Context, after time.Time) (time.Time, bool, error) {
	type pair struct {
		a time.Time
		b bool
	}
	p2, err := call(c, false, "NextDue", func() (pair, error) {
		a, b, err := c.inner.NextDue(ctx, after)
		return pair{a, b}, err
	})
	return p2.a, p2.b, err
}

func (c *crashStore) PutPipeline(ctx context.Context, p *store.PutPipelineParams) (*model.Pipeline, bool, error) {
	type pair struct {
		a *model.Pipeline
		b bool
	}
	p2, err := call(c, true, "PutPipeline", func() (pair, error) {
		a, b, err := c.inner.PutPipeline(ctx, p)
		return pair{a, b}, err
	})
	return p2.a, p2.b, err
}

func (c *crashStore) GetPipeline(ctx context.Context, p *store.GetPipelineParams) (*model.Pipeline, error) {
	return call(c, false, "GetPipeline", func() (*model.Pipeline, error) { return c.inner.GetPipeline(ctx, p) })
}

func (c *crashStore) ListPipelines(ctx context.Context, p *store.ListPipelinesParams) ([]*model.Pipeline, error) {
	return call(c, false, "ListPipelines", func() ([]*model.Pipeline, error) { return c.inner.ListPipelines(ctx, p) })
}

func (c *crashStore) DeletePipeline(ctx context.Context, p *store.DeletePipelineParams) error {
	_, err := call(c, true, "DeletePipeline", func() (struct{}, error) { return struct{}{}, c.inner.DeletePipeline(ctx, p) })
	return err
}

func (c *crashStore) GetPipelineRun(ctx context.Context, p *store.GetPipelineRunParams) (*model.PipelineRun, error) {
	return call(c, false, "GetPipelineRun", func() (*model.PipelineRun, error) { return c.inner.GetPipelineRun(ctx, p) })
}

func (c *crashStore) ListPipelineRuns(ctx context.Context, p *store.ListPipelineRunsParams) (*store.PipelineRunPage, error) {
	return call(c, false, "ListPipelineRuns", func() (*store.PipelineRunPage, error) { return c.inner.ListPipelineRuns(ctx, p) })
}

func (c *crashStore) SetPipelineNextFire(ctx context.Context, p *store.SetPipelineNextFireParams) (bool, error) {
	return call(c, true, "SetPipelineNextFire", func() (bool, error) { return c.inner.SetPipelineNextFire(ctx, p) })
}

func (c *crashStore) DuePipelines(ctx context.Context, p *store.DuePipelinesParams) ([]*model.Pipeline, error) {
	return call(c, false, "DuePipelines", func() ([]*model.Pipeline, error) { return c.inner.DuePipelines(ctx, p) })
}

func (c *crashStore) ResolvePending(ctx context.Context, p *store.ResolvePendingParams) ([]*model.Run, error) {
	return call(c, true, "ResolvePending", func() ([]*model.Run, error) { return c.inner.ResolvePending(ctx, p) })
}

func (c *crashStore) CreateGraph(ctx context.Context, p *store.CreateGraphParams) (*store.Graph, error) {
	return call(c, true, "CreateGraph", func() (*store.Graph, error) { return c.inner.CreateGraph(ctx, p) })
}

func (c *crashStore) LeaseRuns(ctx context.Context, p *store.LeaseRunsParams) (*store.Leased, error) {
	return call(c, true, "LeaseRuns", func() (*store.Leased, error) { return c.inner.LeaseRuns(ctx, p) })
}

func (c *crashStore) CompleteAttempts(ctx context.Context, p *store.CompleteAttemptsParams) ([]store.CompletionResult, error) {
	return call(c, true, "CompleteAttempts", func() ([]store.CompletionResult, error) { return c.inner.CompleteAttempts(ctx, p) })
}

func (c *crashStore) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]store.HeartbeatResult, error) {
	return call(c, true, "Heartbeat", func() ([]store.HeartbeatResult, error) { return c.inner.Heartbeat(ctx, p) })
}

func (c *crashStore) RescueExpired(ctx context.Context, p *store.RescueExpiredParams) ([]*model.Run, error) {
	return call(c, true, "RescueExpired", func() ([]*model.Run, error) { return c.inner.RescueExpired(ctx, p) })
}

func (c *crashStore) NextLeaseExpiry(ctx context.Context) (time.Time, bool, error) {
	type pair struct {
		a time.Time
		b bool
	}
	p2, err := call(c, false, "NextLeaseExpiry", func() (pair, error) {
		a, b, err := c.inner.NextLeaseExpiry(ctx)
		return pair{a, b}, err
	})
	return p2.a, p2.b, err
}

func (c *crashStore) AppendLogs(ctx context.Context, p *store.AppendLogsParams) ([]error, error) {
	return call(c, true, "AppendLogs", func() ([]error, error) { return c.inner.AppendLogs(ctx, p) })
}

func (c *crashStore) ReadLogs(ctx context.Context, p *store.ReadLogsParams) ([]model.LogChunk, error) {
	return call(c, false, "ReadLogs", func() ([]model.LogChunk, error) { return c.inner.ReadLogs(ctx, p) })
}

func (c *crashStore) ListQueues(ctx context.Context) ([]*model.Queue, error) {
	return call(c, false, "ListQueues", func() ([]*model.Queue, error) { return c.inner.ListQueues(ctx) })
}

func (c *crashStore) OldestQueued(ctx context.Context) (map[string]time.Time, error) {
	return call(c, false, "OldestQueued", func() (map[string]time.Time, error) { return c.inner.OldestQueued(ctx) })
}

func (c *crashStore) GetQueue(ctx context.Context, p *store.GetQueueParams) (*model.Queue, error) {
	return call(c, false, "GetQueue", func() (*model.Queue, error) { return c.inner.GetQueue(ctx, p) })
}

func (c *crashStore) UpdateQueue(ctx context.Context, p *store.UpdateQueueParams) (*model.Queue, error) {
	return call(c, true, "UpdateQueue", func() (*model.Queue, error) { return c.inner.UpdateQueue(ctx, p) })
}

func (c *crashStore) RegisterWorker(ctx context.Context, p *store.RegisterWorkerParams) (*model.Worker, []*model.Run, error) {
	type pair struct {
		a *model.Worker
		b []*model.Run
	}
	p2, err := call(c, true, "RegisterWorker", func() (pair, error) {
		a, b, err := c.inner.RegisterWorker(ctx, p)
		return pair{a, b}, err
	})
	return p2.a, p2.b, err
}

func (c *crashStore) GetWorker(ctx context.Context, p *store.GetWorkerParams) (*model.Worker, error) {
	return call(c, false, "GetWorker", func() (*model.Worker, error) { return c.inner.GetWorker(ctx, p) })
}

func (c *crashStore) ListWorkers(ctx context.Context) ([]*model.Worker, error) {
	return call(c, false, "ListWorkers", func() ([]*model.Worker, error) { return c.inner.ListWorkers(ctx) })
}

func (c *crashStore) SetWorkerState(ctx context.Context, p *store.SetWorkerStateParams) error {
	_, err := call(c, true, "SetWorkerState", func() (struct{}, error) { return struct{}{}, c.inner.SetWorkerState(ctx, p) })
	return err
}

func (c *crashStore) HeartbeatServer(ctx context.Context, p *store.HeartbeatServerParams) error {
	_, err := call(c, true, "HeartbeatServer", func() (struct{}, error) { return struct{}{}, c.inner.HeartbeatServer(ctx, p) })
	return err
}

func (c *crashStore) ListServers(ctx context.Context, p *store.ListServersParams) ([]*model.Server, error) {
	return call(c, false, "ListServers", func() ([]*model.Server, error) { return c.inner.ListServers(ctx, p) })
}

func (c *crashStore) TryLead(ctx context.Context, p *store.TryLeadParams) (*model.Leadership, error) {
	return call(c, true, "TryLead", func() (*model.Leadership, error) { return c.inner.TryLead(ctx, p) })
}

func (c *crashStore) ResignLead(ctx context.Context, p *store.ResignLeadParams) error {
	_, err := call(c, true, "ResignLead", func() (struct{}, error) { return struct{}{}, c.inner.ResignLead(ctx, p) })
	return err
}

func (c *crashStore) Leader(ctx context.Context, p *store.LeaderParams) (*model.Leadership, error) {
	return call(c, false, "Leader", func() (*model.Leadership, error) { return c.inner.Leader(ctx, p) })
}

func (c *crashStore) Ping(ctx context.Context) error {
	_, err := call(c, false, "Ping", func() (struct{}, error) { return struct{}{}, c.inner.Ping(ctx) })
	return err
}

func (c *crashStore) CreateToken(ctx context.Context, p *store.CreateTokenParams) (bool, error) {
	return call(c, true, "CreateToken", func() (bool, error) { return c.inner.CreateToken(ctx, p) })
}

func (c *crashStore) FindToken(ctx context.Context, p *store.FindTokenParams) (*model.Token, error) {
	return call(c, false, "FindToken", func() (*model.Token, error) { return c.inner.FindToken(ctx, p) })
}

func (c *crashStore) ListTokens(ctx context.Context) ([]*model.Token, error) {
	return call(c, false, "ListTokens", func() ([]*model.Token, error) { return c.inner.ListTokens(ctx) })
}

func (c *crashStore) RevokeToken(ctx context.Context, p *store.RevokeTokenParams) (*model.Token, error) {
	return call(c, true, "RevokeToken", func() (*model.Token, error) { return c.inner.RevokeToken(ctx, p) })
}

func (c *crashStore) TouchToken(ctx context.Context, p *store.TouchTokenParams) error {
	_, err := call(c, true, "TouchToken", func() (struct{}, error) { return struct{}{}, c.inner.TouchToken(ctx, p) })
	return err
}

func (c *crashStore) PruneRuns(ctx context.Context, p *store.PruneRunsParams) (int, error) {
	return call(c, true, "PruneRuns", func() (int, error) { return c.inner.PruneRuns(ctx, p) })
}

func (c *crashStore) PruneWorkers(ctx context.Context, p *store.PruneWorkersParams) (int, error) {
	return call(c, true, "PruneWorkers", func() (int, error) { return c.inner.PruneWorkers(ctx, p) })
}

func (c *crashStore) PruneRateLimits(ctx context.Context, p *store.PruneRateLimitsParams) (int, error) {
	return call(c, true, "PruneRateLimits", func() (int, error) { return c.inner.PruneRateLimits(ctx, p) })
}

func (c *crashStore) AlertFacts(ctx context.Context, p *store.AlertFactsParams) (*alerting.Facts, error) {
	return call(c, false, "AlertFacts", func() (*alerting.Facts, error) { return c.inner.AlertFacts(ctx, p) })
}

func (c *crashStore) ApplyAlerts(ctx context.Context, p *store.ApplyAlertsParams) error {
	_, err := call(c, true, "ApplyAlerts", func() (struct{}, error) { return struct{}{}, c.inner.ApplyAlerts(ctx, p) })
	return err
}

func (c *crashStore) ListAlerts(ctx context.Context, p *store.ListAlertsParams) ([]alerting.Alert, error) {
	return call(c, false, "ListAlerts", func() ([]alerting.Alert, error) { return c.inner.ListAlerts(ctx, p) })
}

func (c *crashStore) AppendAudit(ctx context.Context, p *store.AppendAuditParams) error {
	_, err := call(c, true, "AppendAudit", func() (struct{}, error) { return struct{}{}, c.inner.AppendAudit(ctx, p) })
	return err
}

func (c *crashStore) ListAudit(ctx context.Context, p *store.ListAuditParams) ([]*model.AuditEntry, error) {
	return call(c, false, "ListAudit", func() ([]*model.AuditEntry, error) { return c.inner.ListAudit(ctx, p) })
}
