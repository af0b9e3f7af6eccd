package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// Config configures a PostgreSQL store.
type Config struct {
	// URL is a postgres:// or postgresql:// connection URL. Query parameters that pgx does
	// not know become run-time parameters of every connection, e.g. search_path=myschema.
	URL string
	// MaxConns caps the pool; 0 takes pgxpool's default (max(4, cores)).
	MaxConns int32
	// Logger receives migrations applied, transactions retried after a deadlock and batches
	// that took the slow path; nil discards them.
	Logger *slog.Logger
}

// Store is the PostgreSQL engine of store.Store. It is safe for concurrent use.
type Store struct {
	// pool classifies the errors of what runs on it (model.ErrUnavailable), as control does.
	pool classifiedPool
	// control is the elector's own connection (HeartbeatServer, TryLead, ResignLead): a
	// renewal must not queue for a connection behind a burst of batches, or a busy leader
	// misses its renewal deadline and steps down for nothing.
	control classifiedPool
	log     *slog.Logger
	// queues holds names of queues known to exist. Queues are never deleted, so a name
	// once seen stays true; CreateJobs skips creating those.
	queues sync.Map
	// placedUntil (Unix ns of a lease's Now) turns off LeaseRuns' one-statement path until
	// then: a lease met runs with requirements, which only the placing path can hand out.
	placedUntil atomic.Int64
}

func (s *Store) queueKnown(name string) bool {
	_, ok := s.queues.Load(name)
	return ok
}

func (s *Store) knowQueues(names ...string) {
	for _, n := range names {
		s.queues.Store(n, true)
	}
}

var _ store.Store = (*Store)(nil)

// Open connects to PostgreSQL, applies the embedded migrations that are missing and returns
// the store.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if !strings.HasPrefix(cfg.URL, "postgres://") && !strings.HasPrefix(cfg.URL, "postgresql://") {
		return nil, errors.New("open postgres: url must start with postgres:// or postgresql://")
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("open postgres: parse url: %w", err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	// Every statement of this package has a fixed shape meant for index access: batches
	// over unnest'ed arrays joined by primary key, partial indexes on constant states.
	// Generic plans keep them there whatever the batch size and however stale the table
	// statistics are; custom plans turned a 500-run completion into a hash join over a
	// sequential scan of all runs while autovacuum had not analyzed a growing table yet.
	// A URL that sets plan_cache_mode keeps its own.
	if _, ok := pcfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !ok {
		pcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	// No JIT compilation: a generic plan's estimates, made without the parameters, can pass
	// jit_above_cost on a big store, and compiling then costs far more than these
	// statements run. On a store of 1,000,000 finished runs the alerter's read of failure
	// streaks took 0.9-1.1 s a pass, nearly all of it compiling a statement that returns in
	// milliseconds, and halved steady's throughput (BENCHMARKS.md, "Cost of scale").
	// A URL that sets jit keeps its own.
	if _, ok := pcfg.ConnConfig.RuntimeParams["jit"]; !ok {
		pcfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	ccfg := pcfg.Copy()
	ccfg.MaxConns, ccfg.MinConns = 1, 1
	// A renewal need not wait for its WAL flush (the wait that grows most under I/O
	// load): one lost in a crash only shortens the lease, and fencing does not rest on
	// it, since every leader-only write checks the term in its own transaction.
	ccfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	control, err := pgxpool.NewWithConfig(ctx, ccfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: control connection: %w", err)
	}
	s := &Store{pool: classifiedPool{pool}, control: classifiedPool{control}, log: log}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return s, nil
}

// Ping checks the database is reachable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// Close releases the pools' connections.
func (s *Store) Close() error {
	s.pool.Close()
	s.control.Close()
	return nil
}

// retryable reports whether err failed a transaction that is safe to run again whole: a
// deadlock or a serialization failure, after which PostgreSQL rolled it back.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// retry runs f, and again (three times in all) while it fails retryably. Batches lock runs in
// id order so that they cannot deadlock each other; this covers the rest (unique-index waits
// between concurrent inserts, plans that lock in another order). An error that says the
// database is unavailable is a model.ErrUnavailable (classify), whatever in f returned it.
func (s *Store) retry(ctx context.Context, f func() error) error {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		if err = f(); !retryable(err) || ctx.Err() != nil {
			return classify(err)
		}
		s.log.Info("postgres: transaction rolled back, running it again", "attempt", attempt, "err", err)
	}
	return classify(err)
}

// inTx runs f in a transaction, run again whole if it failed retryably (see retry).
func (s *Store) inTx(ctx context.Context, f func(tx pgx.Tx) error) error {
	return s.retry(ctx, func() error { return pgx.BeginFunc(ctx, s.pool, f) })
}

// translate maps driver errors to the model's sentinel errors, wrapped with what was being
// done: no rows is model.ErrNotFound, a unique violation model.ErrConflict, an unreachable
// database model.ErrUnavailable.
func translate(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	err = classify(err)
	what := fmt.Sprintf(format, args...)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, model.ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%s: %w (%s)", what, model.ErrConflict, pgErr.ConstraintName)
	}
	return fmt.Errorf("%s: %w", what, err)
}

var _ store.WriteProber = (*Store)(nil)
