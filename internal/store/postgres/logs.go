package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// appendLogsSQL inserts the chunks ($1...$8, numbered by ordinality) whose writer holds
// their attempt's lease (store.HoldsChunk, in SQL) and that fit in the cap $9 (when above
// 0: a running sum over those chunks of an attempt, in batch order, on top of what the
// attempt has stored; the first chunk past it is dropped with the ones after it), and
// returns the chunks refused: their number and whether their run exists.
const appendLogsSQL = `WITH c AS (
		SELECT * FROM unnest($1::text[], $2::int4[], $3::int8[], $4::text[], $5::bytea[], $6::timestamptz[],
			$7::text[], $8::text[]) WITH ORDINALITY AS c(run_id, attempt, seq, stream, data, created_at, token, worker_id, i)
	), ok AS (
		SELECT c.* FROM c JOIN runs r ON r.id = c.run_id
		WHERE r.status = 'running' AND c.token <> '' AND r.attempt = c.attempt AND r.lease_token = c.token
			AND (c.worker_id = '' OR r.worker_id = c.worker_id)
	), stored AS (
		SELECT k.run_id, k.attempt, (SELECT coalesce(sum(octet_length(l.data)), 0) FROM log_chunks l
			WHERE $9::int8 > 0 AND l.run_id = k.run_id AND l.attempt = k.attempt) AS bytes
		FROM (SELECT DISTINCT run_id, attempt FROM ok) k
	), fit AS (
		SELECT ok.*, s.bytes + sum(octet_length(ok.data)) OVER (PARTITION BY ok.run_id, ok.attempt ORDER BY ok.i) AS upto
		FROM ok JOIN stored s ON s.run_id = ok.run_id AND s.attempt = ok.attempt
	), ins AS (
		INSERT INTO log_chunks (run_id, attempt, seq, stream, data, created_at)
		SELECT run_id, attempt, seq, stream, data, created_at FROM fit
		WHERE $9::int8 <= 0 OR upto <= $9::int8
		ON CONFLICT DO NOTHING
	)
	SELECT c.i, EXISTS (SELECT 1 FROM runs r WHERE r.id = c.run_id)
	FROM c WHERE NOT EXISTS (SELECT 1 FROM ok WHERE ok.i = c.i)`

// AppendLogs stores the chunks whose writer holds their attempt's lease, in one statement;
// resent chunks are ignored, and chunks past MaxAttemptBytes dropped (not refused).
func (s *Store) AppendLogs(ctx context.Context, p *store.AppendLogsParams) ([]error, error) {
	chunks := p.Chunks
	if len(chunks) == 0 {
		return nil, nil
	}
	n := len(chunks)
	var (
		runID, stream = make([]string, n), make([]string, n)
		token, worker = make([]string, n), make([]string, n)
		attempt       = make([]int32, n)
		seq           = make([]int64, n)
		data          = make([][]byte, n)
		created       = make([]time.Time, n)
	)
	for i, c := range chunks {
		runID[i], attempt[i], seq[i], stream[i] = c.RunID, int32(c.Attempt), c.Seq, string(c.Stream)
		token[i], worker[i] = c.Token, c.WorkerID
		data[i] = c.Data
		if data[i] == nil {
			data[i] = []byte{}
		}
		created[i] = utc(c.CreatedAt)
	}
	rows, err := s.pool.Query(ctx, appendLogsSQL, runID, attempt, seq, stream, data, created, token, worker, p.MaxAttemptBytes)
	if err != nil {
		return nil, translate(err, "append logs")
	}
	refused := make([]error, n)
	var (
		i      int64
		exists bool
	)
	_, err = pgx.ForEachRow(rows, []any{&i, &exists}, func() error {
		c := chunks[i-1]
		if !exists {
			refused[i-1] = fmt.Errorf("run %s: %w", c.RunID, model.ErrNotFound)
		} else {
			refused[i-1] = fmt.Errorf("run %s attempt %d: %w", c.RunID, c.Attempt, model.ErrLeaseLost)
		}
		return nil
	})
	if err != nil {
		return nil, translate(err, "append logs")
	}
	return refused, nil
}

// ReadLogs returns chunks of one attempt after AfterSeq, in order.
func (s *Store) ReadLogs(ctx context.Context, p *store.ReadLogsParams) ([]model.LogChunk, error) {
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	rows, err := s.pool.Query(ctx, `SELECT run_id, attempt, seq, stream, data, created_at FROM log_chunks
		WHERE run_id = $1 AND attempt = $2 AND seq > $3
		ORDER BY seq LIMIT $4`, p.RunID, p.Attempt, p.AfterSeq, limit)
	if err != nil {
		return nil, translate(err, "read logs of run %s", p.RunID)
	}
	defer rows.Close()
	out := []model.LogChunk{}
	for rows.Next() {
		var (
			c      model.LogChunk
			stream string
		)
		if err := rows.Scan(&c.RunID, &c.Attempt, &c.Seq, &stream, &c.Data, &c.CreatedAt); err != nil {
			return nil, translate(err, "read logs of run %s", p.RunID)
		}
		c.Stream = model.LogStream(stream)
		c.CreatedAt = c.CreatedAt.UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err, "read logs of run %s", p.RunID)
	}
	if len(out) == 0 {
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)`, p.RunID).Scan(&exists); err != nil {
			return nil, translate(err, "read logs of run %s", p.RunID)
		}
		if !exists {
			return nil, fmt.Errorf("read logs of run %s: %w", p.RunID, model.ErrNotFound)
		}
	}
	return out, nil
}
