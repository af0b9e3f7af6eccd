package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

const (
	asynqTask  = "compare:noop"
	asynqQueue = "default"
	// payloadSize: the job's number and submit time (8 bytes each, big-endian), and 1
	// to run `true`.
	payloadSize = 17
)

// asynqSystem is an Asynq client and server on one Redis database, flushed before and after.
type asynqSystem struct {
	cfg    *config
	rdb    *redis.Client
	client *asynq.Client
	insp   *asynq.Inspector
	srv    *asynq.Server
	mux    *asynq.ServeMux
	pid    int
}

func newAsynq(ctx context.Context, cfg *config, rec *recorder) (*asynqSystem, error) {
	s := &asynqSystem{cfg: cfg, rdb: redis.NewClient(&redis.Options{Addr: cfg.redis, DB: cfg.redisDB})}
	info, err := s.rdb.Info(ctx, "server").Result()
	if err != nil {
		s.rdb.Close()
		return nil, fmt.Errorf("--redis %s: %w", cfg.redis, err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			s.pid, _ = strconv.Atoi(v)
		}
	}
	if err := s.rdb.FlushDB(ctx).Err(); err != nil {
		s.rdb.Close()
		return nil, fmt.Errorf("flush redis database %d: %w", cfg.redisDB, err)
	}
	opt := asynq.RedisClientOpt{Addr: cfg.redis, DB: cfg.redisDB, PoolSize: cfg.pool}
	s.client = asynq.NewClient(opt)
	s.insp = asynq.NewInspector(opt)
	s.srv = asynq.NewServer(opt, asynq.Config{
		Concurrency:              cfg.workers,
		Queues:                   map[string]int{asynqQueue: 1},
		TaskCheckInterval:        cfg.taskCheckInterval,
		DelayedTaskCheckInterval: cfg.delayedCheckPeriod,
		LogLevel:                 asynq.WarnLevel,
	})
	s.mux = asynq.NewServeMux()
	s.mux.HandleFunc(asynqTask, func(ctx context.Context, t *asynq.Task) error {
		p := t.Payload()
		if len(p) != payloadSize {
			return fmt.Errorf("payload of %d bytes, want %d", len(p), payloadSize)
		}
		return rec.handle(ctx, int64(binary.BigEndian.Uint64(p)), int64(binary.BigEndian.Uint64(p[8:])), p[16] == 1)
	})
	return s, nil
}

func (s *asynqSystem) store() string {
	return fmt.Sprintf("redis %s, database %d", s.cfg.redis, s.cfg.redisDB)
}

func (s *asynqSystem) params() map[string]string {
	return map[string]string{
		"concurrency":            strconv.Itoa(s.cfg.workers),
		"task check interval":    s.cfg.taskCheckInterval.String(),
		"delayed check interval": s.cfg.delayedCheckPeriod.String(),
		"redis pool size":        strconv.Itoa(s.cfg.pool),
	}
}

func (s *asynqSystem) insertOne(ctx context.Context, j job) error {
	p := make([]byte, payloadSize)
	binary.BigEndian.PutUint64(p, uint64(j.seq))
	binary.BigEndian.PutUint64(p[8:], uint64(j.submit.UnixNano()))
	if j.cmd {
		p[16] = 1
	}
	opts := []asynq.Option{asynq.Queue(asynqQueue)}
	if !j.runAt.IsZero() {
		opts = append(opts, asynq.ProcessAt(j.runAt))
	}
	_, err := s.client.EnqueueContext(ctx, asynq.NewTask(asynqTask, p), opts...)
	return err
}

// insertBatch enqueues one job after another: Asynq has no batch enqueue.
func (s *asynqSystem) insertBatch(ctx context.Context, jobs []job) error {
	for _, j := range jobs {
		if err := s.insertOne(ctx, j); err != nil {
			return err
		}
	}
	return nil
}

func (s *asynqSystem) start(context.Context) error {
	if err := s.srv.Start(s.mux); err != nil {
		return fmt.Errorf("start the asynq server: %w", err)
	}
	return nil
}

func (s *asynqSystem) backlog(context.Context) (int, error) {
	q, err := s.insp.GetQueueInfo(asynqQueue)
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("queue info: %w", err)
	}
	return q.Pending + q.Scheduled + q.Retry, nil
}

func (s *asynqSystem) confirm(ctx context.Context, n int) error {
	for deadline := time.Now().Add(time.Minute); ; {
		q, err := s.insp.GetQueueInfo(asynqQueue)
		if err != nil {
			return fmt.Errorf("queue info: %w", err)
		}
		if q.ProcessedTotal == n && q.Size == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("a minute after the handlers finished: %d of %d processed, %d in the queue", q.ProcessedTotal, n, q.Size)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *asynqSystem) serverPIDs(context.Context) ([]int, error) {
	if s.pid == 0 {
		return nil, errors.New("redis INFO gave no process_id")
	}
	return []int{s.pid}, nil
}

func (s *asynqSystem) serverName() string { return "Redis" }

func (s *asynqSystem) close() {
	s.srv.Shutdown()
	s.client.Close()
	s.insp.Close()
	s.rdb.FlushDB(context.Background())
	s.rdb.Close()
}
