package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// HeartbeatServer creates or updates a server's row.
func (s *Store) HeartbeatServer(ctx context.Context, p *store.HeartbeatServerParams) error {
	err := s.write(ctx, func(t *wtx) error {
		_, err := t.tx.ExecContext(t.ctx, `INSERT INTO servers (id, addr, started_at, last_seen) VALUES (?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, started_at = excluded.started_at, last_seen = excluded.last_seen`,
			p.ID, p.Addr, micros(p.StartedAt), micros(p.Now))
		return err
	})
	if err != nil {
		return fmt.Errorf("heartbeat server %s: %w", p.ID, err)
	}
	return nil
}

// ListServers returns the servers seen after SeenAfter, by id.
func (s *Store) ListServers(ctx context.Context, p *store.ListServersParams) ([]*model.Server, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, addr, started_at, last_seen FROM servers WHERE last_seen > ? ORDER BY id`,
		afterMicros(p.SeenAfter))
	if err != nil {
		return nil, fmt.Errorf("list servers: %w", err)
	}
	defer rows.Close()
	var out []*model.Server
	for rows.Next() {
		var (
			sv            model.Server
			started, seen int64
		)
		if err := rows.Scan(&sv.ID, &sv.Addr, &started, &seen); err != nil {
			return nil, fmt.Errorf("list servers: %w", err)
		}
		sv.StartedAt, sv.LastSeen = fromMicros(started), fromMicros(seen)
		out = append(out, &sv)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list servers: %w", err)
	}
	return out, nil
}

// TryLead acquires or renews the leader lease, judging expiry by Now: one process owns a
// data directory, so its clock is the only one. The writer transaction serialises callers.
func (s *Store) TryLead(ctx context.Context, p *store.TryLeadParams) (*model.Leadership, error) {
	var l *model.Leadership
	err := s.write(ctx, func(t *wtx) error {
		now := micros(p.Now)
		_, err := t.tx.ExecContext(t.ctx, `INSERT INTO leadership AS l (name, holder, term, since, expires_at)
			VALUES (?1, ?2, 1, ?3, ?3 + ?4)
			ON CONFLICT (name) DO UPDATE SET
				holder = excluded.holder,
				term = CASE WHEN l.holder = excluded.holder THEN l.term ELSE l.term + 1 END,
				since = CASE WHEN l.holder = excluded.holder THEN l.since ELSE ?3 END,
				expires_at = excluded.expires_at
			WHERE l.holder = excluded.holder OR l.expires_at <= ?3`,
			store.LeaderLease, p.Holder, now, p.TTL.Microseconds())
		if err != nil {
			return err
		}
		l, err = scanLeadership(t.tx.QueryRowContext(t.ctx, `SELECT holder, term, since, expires_at FROM leadership WHERE name = ?`,
			store.LeaderLease))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("try lead for %s: %w", p.Holder, err)
	}
	return l, nil
}

// ResignLead gives the lease up if Holder has it.
func (s *Store) ResignLead(ctx context.Context, p *store.ResignLeadParams) error {
	err := s.write(ctx, func(t *wtx) error {
		_, err := t.tx.ExecContext(t.ctx, `UPDATE leadership SET holder = '', expires_at = ? WHERE name = ? AND holder = ?`,
			micros(p.Now), store.LeaderLease, p.Holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("resign lead of %s: %w", p.Holder, err)
	}
	return nil
}

// Leader returns the live lease at Now.
func (s *Store) Leader(ctx context.Context, p *store.LeaderParams) (*model.Leadership, error) {
	l, err := scanLeadership(s.r.QueryRowContext(ctx, `SELECT holder, term, since, expires_at FROM leadership
		WHERE name = ? AND holder <> '' AND expires_at > ?`, store.LeaderLease, micros(p.Now)))
	if err != nil {
		return nil, fmt.Errorf("leader: %w", mapErr(err))
	}
	return l, nil
}

func scanLeadership(row *sql.Row) (*model.Leadership, error) {
	var (
		l              model.Leadership
		since, expires int64
	)
	if err := row.Scan(&l.Holder, &l.Term, &since, &expires); err != nil {
		return nil, err
	}
	l.Since, l.ExpiresAt = fromMicros(since), fromMicros(expires)
	return &l, nil
}

// checkTerm fences a leader-only write inside the writer transaction: the lease must still
// have term and be live at now. Term zero is not fenced.
func (t *wtx) checkTerm(term int64, now int64) error {
	if term == 0 {
		return nil
	}
	var ok bool
	err := t.tx.QueryRowContext(t.ctx, `SELECT term = ? AND holder <> '' AND expires_at > ? FROM leadership WHERE name = ?`,
		term, now, store.LeaderLease).Scan(&ok)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		ok = false
	case err != nil:
		return fmt.Errorf("check term %d: %w", term, err)
	}
	if !ok {
		return fmt.Errorf("term %d: %w", term, model.ErrNotLeader)
	}
	return nil
}
