package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs are the River jobs' arguments: the job's number, the submit time, and whether
// to run `true`.
type noopArgs struct {
	Seq    int64 `json:"i"`
	Submit int64 `json:"s"`
	Cmd    bool  `json:"c,omitempty"`
}

func (noopArgs) Kind() string { return "compare_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	rec *recorder
}

func (w *noopWorker) Work(ctx context.Context, j *river.Job[noopArgs]) error {
	return w.rec.handle(ctx, j.Args.Seq, j.Args.Submit, j.Args.Cmd)
}

// riverSystem is a River client with its workers, on a scratch database of its own.
type riverSystem struct {
	cfg     *config
	dbName  string
	dbURL   string
	drop    func()
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	sampler *activitySampler
	stderr  io.Writer
}

func newRiver(ctx context.Context, cfg *config, rec *recorder, stderr io.Writer) (*riverSystem, error) {
	dbURL, dbName, drop, err := scratchDatabase(ctx, cfg.db)
	if err != nil {
		return nil, err
	}
	s := &riverSystem{cfg: cfg, dbName: dbName, dbURL: dbURL, drop: drop, stderr: stderr}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("--db: %w", err)
	}
	pcfg.MaxConns = int32(cfg.pool)
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, fmt.Errorf("connect to the scratch database: %w", err)
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(s.pool), nil)
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{rec: rec})
	s.client, err = river.NewClient(riverpgxv5.New(s.pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.workers}},
		Workers:           workers,
		FetchCooldown:     cfg.fetchCooldown,
		FetchPollInterval: cfg.fetchPollInterval,
		Logger:            cfg.logger,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	ok = true
	return s, nil
}

func (s *riverSystem) store() string {
	return "postgres, scratch database " + s.dbName
}

func (s *riverSystem) params() map[string]string {
	return map[string]string{
		"max workers":         strconv.Itoa(s.cfg.workers),
		"fetch cooldown":      s.cfg.fetchCooldown.String(),
		"fetch poll interval": s.cfg.fetchPollInterval.String(),
		"insert call":         map[string]string{"fast": "InsertManyFast", "many": "InsertMany"}[s.cfg.insertMode],
		"pool max conns":      strconv.Itoa(s.cfg.pool),
	}
}

func (s *riverSystem) args(j job) river.InsertManyParams {
	p := river.InsertManyParams{Args: noopArgs{Seq: j.seq, Submit: j.submit.UnixNano(), Cmd: j.cmd}}
	if !j.runAt.IsZero() {
		p.InsertOpts = &river.InsertOpts{ScheduledAt: j.runAt}
	}
	return p
}

func (s *riverSystem) insertBatch(ctx context.Context, jobs []job) error {
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = s.args(j)
	}
	var err error
	if s.cfg.insertMode == "fast" {
		_, err = s.client.InsertManyFast(ctx, params)
	} else {
		_, err = s.client.InsertMany(ctx, params)
	}
	return err
}

func (s *riverSystem) insertOne(ctx context.Context, j job) error {
	p := s.args(j)
	_, err := s.client.Insert(ctx, p.Args, p.InsertOpts)
	return err
}

func (s *riverSystem) start(ctx context.Context) error {
	if s.cfg.pgSample > 0 {
		s.sampler = startActivitySampler(ctx, s.pool, s.dbName, s.cfg.pgSample)
	}
	if err := s.client.Start(ctx); err != nil {
		return fmt.Errorf("start the river client: %w", err)
	}
	return nil
}

func (s *riverSystem) backlog(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state IN ('available', 'scheduled', 'retryable', 'pending')`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the backlog: %w", err)
	}
	return n, nil
}

func (s *riverSystem) confirm(ctx context.Context, n int) error {
	if s.sampler != nil {
		s.sampler.stop(s.stderr)
		s.sampler = nil
	}
	var completed int
	for deadline := time.Now().Add(time.Minute); ; {
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&completed); err != nil {
			return fmt.Errorf("count completed jobs: %w", err)
		}
		if completed == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d jobs completed in river_job a minute after their handlers finished", completed, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *riverSystem) serverPIDs(ctx context.Context) ([]int, error) {
	return backendPIDs(ctx, s.pool, s.dbName)
}

func (s *riverSystem) serverName() string { return "PostgreSQL" }

func (s *riverSystem) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.sampler != nil {
		s.sampler.stop(s.stderr)
	}
	if s.client != nil {
		if err := s.client.Stop(ctx); err != nil {
			s.cfg.logger.Warn("stop the river client", "err", err)
		}
	}
	if s.pool != nil {
		s.pool.Close()
	}
	s.drop()
}

// scratchDatabase creates an empty database on the PostgreSQL server of base and returns
// its URL, its name and a function that drops it.
func scratchDatabase(ctx context.Context, base string) (string, string, func(), error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", "", nil, fmt.Errorf("connect to %s: %w", base, err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("stint_compare_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", "", nil, fmt.Errorf("create scratch database: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", "", nil, fmt.Errorf("--db %s: %w", base, err)
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return u.String(), name, drop, nil
}

// backendPIDs are the PostgreSQL backends connected to the database.
func backendPIDs(ctx context.Context, pool *pgxpool.Pool, db string) ([]int, error) {
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1`, db)
	if err != nil {
		return nil, fmt.Errorf("list backends: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("list backends: %w", err)
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out, nil
}
