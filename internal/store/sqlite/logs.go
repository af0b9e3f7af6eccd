package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// AppendLogs stores the chunks whose writer holds their attempt's lease, in one
// transaction; resent chunks are ignored, and chunks past MaxAttemptBytes dropped.
func (s *Store) AppendLogs(ctx context.Context, p *store.AppendLogsParams) ([]error, error) {
	chunks := p.Chunks
	if len(chunks) == 0 {
		return nil, nil
	}
	type attemptKey struct {
		run     string
		attempt int
	}
	var refused []error
	err := s.write(ctx, func(t *wtx) error {
		refused = make([]error, len(chunks))
		lease, ins := t.stmt(t.ws.runLease), t.stmt(t.ws.insertLogChunk)
		type runLease struct {
			running         bool
			attempt         int
			token, workerID string
			err             error
		}
		leases := map[string]*runLease{}
		stored := map[attemptKey]int64{} // bytes of each attempt, when capped
		full := map[attemptKey]bool{}
		for i, c := range chunks {
			l := leases[c.RunID]
			if l == nil {
				l = &runLease{}
				var status string
				err := lease.QueryRowContext(t.ctx, c.RunID).Scan(&status, &l.attempt, &l.token, &l.workerID)
				switch {
				case errors.Is(err, sql.ErrNoRows):
					l.err = fmt.Errorf("run %s: %w", c.RunID, model.ErrNotFound)
				case err != nil:
					return fmt.Errorf("run %s: %w", c.RunID, err)
				}
				l.running = status == string(model.RunRunning)
				leases[c.RunID] = l
			}
			if l.err != nil {
				refused[i] = l.err
				continue
			}
			if !store.HoldsChunk(c, l.running, l.attempt, l.token, l.workerID) {
				refused[i] = fmt.Errorf("run %s attempt %d: %w", c.RunID, c.Attempt, model.ErrLeaseLost)
				continue
			}
			if p.MaxAttemptBytes > 0 {
				k := attemptKey{c.RunID, c.Attempt}
				n, ok := stored[k]
				if !ok {
					if err := t.tx.QueryRowContext(t.ctx, `SELECT coalesce(sum(length(data)), 0) FROM log_chunks
						WHERE run_id = ? AND attempt = ?`, c.RunID, c.Attempt).Scan(&n); err != nil {
						return fmt.Errorf("log bytes of run %s attempt %d: %w", c.RunID, c.Attempt, err)
					}
				}
				if full[k] || n+int64(len(c.Data)) > p.MaxAttemptBytes {
					full[k], stored[k] = true, n
					continue
				}
				stored[k] = n + int64(len(c.Data))
			}
			data := c.Data
			if data == nil {
				data = []byte{}
			}
			if _, err := ins.ExecContext(t.ctx, c.RunID, c.Attempt, c.Seq, string(c.Stream), data, micros(c.CreatedAt)); err != nil {
				return fmt.Errorf("chunk %d of run %s attempt %d: %w", c.Seq, c.RunID, c.Attempt, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("append logs: %w", err)
	}
	return refused, nil
}

// ReadLogs returns one attempt's chunks after AfterSeq.
func (s *Store) ReadLogs(ctx context.Context, p *store.ReadLogsParams) ([]model.LogChunk, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	var one int
	if err := s.rs.runExists.QueryRowContext(ctx, p.RunID).Scan(&one); err != nil {
		return nil, fmt.Errorf("read logs of run %s: %w", p.RunID, mapErr(err))
	}
	rows, err := s.rs.readLogs.QueryContext(ctx, p.RunID, p.Attempt, p.AfterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("read logs of run %s: %w", p.RunID, err)
	}
	defer rows.Close()
	var out []model.LogChunk
	for rows.Next() {
		c := model.LogChunk{RunID: p.RunID, Attempt: p.Attempt}
		var (
			stream  string
			created int64
		)
		if err := rows.Scan(&c.Seq, &stream, &c.Data, &created); err != nil {
			return nil, fmt.Errorf("read logs of run %s: %w", p.RunID, err)
		}
		c.Stream = model.LogStream(stream)
		c.CreatedAt = fromMicros(created)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read logs of run %s: %w", p.RunID, err)
	}
	return out, nil
}
