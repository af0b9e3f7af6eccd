package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// AppendLogs stores log chunks in one statement. A resent chunk is ignored; a chunk of an
// unknown run fails the batch with model.ErrNotFound and nothing is written; with
// MaxAttemptBytes, a chunk that would take its attempt past it is dropped with the ones after
// it (a running sum over the batch in order, on top of what the attempt has stored).
func (s *Store) AppendLogs(ctx context.Context, p *store.AppendLogsParams) error {
	chunks := p.Chunks
	if len(chunks) == 0 {
		return nil
	}
	n := len(chunks)
	var (
		runID, stream = make([]string, n), make([]string, n)
		attempt       = make([]int32, n)
		seq           = make([]int64, n)
		data          = make([][]byte, n)
		created       = make([]time.Time, n)
	)
	for i, c := range chunks {
		runID[i], attempt[i], seq[i], stream[i] = c.RunID, int32(c.Attempt), c.Seq, string(c.Stream)
		data[i] = c.Data
		if data[i] == nil {
			data[i] = []byte{}
		}
		created[i] = utc(c.CreatedAt)
	}
	var missing *string
	err := s.pool.QueryRow(ctx, `WITH c AS (
			SELECT * FROM unnest($1::text[], $2::int4[], $3::int8[], $4::text[], $5::bytea[], $6::timestamptz[])
				WITH ORDINALITY AS c(run_id, attempt, seq, stream, data, created_at, ord)
		), missing AS (
			SELECT c.run_id FROM c WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = c.run_id) LIMIT 1
		), stored AS (
			SELECT k.run_id, k.attempt, (SELECT coalesce(sum(octet_length(l.data)), 0) FROM log_chunks l
				WHERE $7 > 0 AND l.run_id = k.run_id AND l.attempt = k.attempt) AS bytes
			FROM (SELECT DISTINCT run_id, attempt FROM c) k
		), fit AS (
			SELECT c.*, s.bytes + sum(octet_length(c.data)) OVER (PARTITION BY c.run_id, c.attempt ORDER BY c.ord) AS upto
			FROM c JOIN stored s ON s.run_id = c.run_id AND s.attempt = c.attempt
		), ins AS (
			INSERT INTO log_chunks (run_id, attempt, seq, stream, data, created_at)
			SELECT run_id, attempt, seq, stream, data, created_at FROM fit
			WHERE NOT EXISTS (SELECT 1 FROM missing) AND ($7 <= 0 OR upto <= $7)
			ON CONFLICT DO NOTHING
		)
		SELECT (SELECT run_id FROM missing)`, runID, attempt, seq, stream, data, created, p.MaxAttemptBytes).Scan(&missing)
	if err != nil {
		return translate(err, "append logs")
	}
	if missing != nil {
		return fmt.Errorf("append logs: run %s: %w", *missing, model.ErrNotFound)
	}
	return nil
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
