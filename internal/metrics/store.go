package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// Store returns st with the duration of its hot calls observed (stint_store_duration_seconds
// by op, the method's name): what a run costs on its way (submit, promote, lease,
// heartbeat, log, complete, rescue, register) and the reads behind the API's lists. The
// other methods are st's own, untimed: embedding keeps the wrapper to the calls worth a
// series, and a method added to store.Store needs no change here.
func (m *Metrics) Store(st store.Store) store.Store { return &timedStore{Store: st, m: m} }

type timedStore struct {
	store.Store
	m *Metrics
}

// timed calls f and observes its duration as op.
func timed[R any](m *Metrics, op string, f func() (R, error)) (R, error) {
	start := time.Now()
	r, err := f()
	m.StoreCall(op, time.Since(start))
	return r, err
}

func (s *timedStore) CreateJobs(ctx context.Context, p *store.CreateJobsParams) ([]store.CreateJobResult, error) {
	return timed(s.m, "CreateJobs", func() ([]store.CreateJobResult, error) { return s.Store.CreateJobs(ctx, p) })
}

func (s *timedStore) CreateRuns(ctx context.Context, p *store.CreateRunsParams) ([]store.CreateRunResult, error) {
	return timed(s.m, "CreateRuns", func() ([]store.CreateRunResult, error) { return s.Store.CreateRuns(ctx, p) })
}

func (s *timedStore) GetRun(ctx context.Context, p *store.GetRunParams) (*model.Run, error) {
	return timed(s.m, "GetRun", func() (*model.Run, error) { return s.Store.GetRun(ctx, p) })
}

func (s *timedStore) ListRuns(ctx context.Context, p *store.ListRunsParams) (*store.RunPage, error) {
	return timed(s.m, "ListRuns", func() (*store.RunPage, error) { return s.Store.ListRuns(ctx, p) })
}

func (s *timedStore) LastRuns(ctx context.Context, p *store.LastRunsParams) (map[string]*model.Run, error) {
	return timed(s.m, "LastRuns", func() (map[string]*model.Run, error) { return s.Store.LastRuns(ctx, p) })
}

func (s *timedStore) PromoteDue(ctx context.Context, p *store.PromoteDueParams) (int, error) {
	return timed(s.m, "PromoteDue", func() (int, error) { return s.Store.PromoteDue(ctx, p) })
}

func (s *timedStore) LeaseRuns(ctx context.Context, p *store.LeaseRunsParams) (*store.Leased, error) {
	return timed(s.m, "LeaseRuns", func() (*store.Leased, error) { return s.Store.LeaseRuns(ctx, p) })
}

func (s *timedStore) CompleteAttempts(ctx context.Context, p *store.CompleteAttemptsParams) ([]store.CompletionResult, error) {
	return timed(s.m, "CompleteAttempts", func() ([]store.CompletionResult, error) { return s.Store.CompleteAttempts(ctx, p) })
}

func (s *timedStore) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]store.HeartbeatResult, error) {
	return timed(s.m, "Heartbeat", func() ([]store.HeartbeatResult, error) { return s.Store.Heartbeat(ctx, p) })
}

func (s *timedStore) RescueExpired(ctx context.Context, p *store.RescueExpiredParams) ([]*model.Run, error) {
	return timed(s.m, "RescueExpired", func() ([]*model.Run, error) { return s.Store.RescueExpired(ctx, p) })
}

func (s *timedStore) AppendLogs(ctx context.Context, p *store.AppendLogsParams) ([]error, error) {
	return timed(s.m, "AppendLogs", func() ([]error, error) { return s.Store.AppendLogs(ctx, p) })
}

func (s *timedStore) ListQueues(ctx context.Context) ([]*model.Queue, error) {
	return timed(s.m, "ListQueues", func() ([]*model.Queue, error) { return s.Store.ListQueues(ctx) })
}

func (s *timedStore) RegisterWorker(ctx context.Context, p *store.RegisterWorkerParams) (*model.Worker, []*model.Run, error) {
	start := time.Now()
	w, runs, err := s.Store.RegisterWorker(ctx, p)
	s.m.StoreCall("RegisterWorker", time.Since(start))
	return w, runs, err
}

// ProbeWrite passes store.WriteProber through the wrapper (nil when the store has none), so
// that readiness probes writes.
func (s *timedStore) ProbeWrite(ctx context.Context) error {
	if p, ok := s.Store.(store.WriteProber); ok {
		return p.ProbeWrite(ctx)
	}
	return nil
}

// Schema passes store.SchemaReporter through the wrapper.
func (s *timedStore) Schema(ctx context.Context) (database, known int, err error) {
	if r, ok := s.Store.(store.SchemaReporter); ok {
		return r.Schema(ctx)
	}
	return 0, 0, errors.ErrUnsupported
}
