package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// HeartbeatServer creates or updates a server's row.
func (s *Store) HeartbeatServer(ctx context.Context, p *store.HeartbeatServerParams) error {
	_, err := s.control.Exec(ctx, `INSERT INTO servers (id, addr, started_at, last_seen) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET addr = EXCLUDED.addr, started_at = EXCLUDED.started_at, last_seen = EXCLUDED.last_seen`,
		p.ID, p.Addr, utc(p.StartedAt), utc(p.Now))
	if err != nil {
		return translate(err, "heartbeat server %s", p.ID)
	}
	return nil
}

// ListServers returns the servers seen after SeenAfter, by id.
func (s *Store) ListServers(ctx context.Context, p *store.ListServersParams) ([]*model.Server, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, addr, started_at, last_seen FROM servers
		WHERE $1::timestamptz IS NULL OR last_seen > $1 ORDER BY id`, afterTime(p.SeenAfter))
	if err != nil {
		return nil, translate(err, "list servers")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*model.Server, error) {
		var sv model.Server
		if err := row.Scan(&sv.ID, &sv.Addr, &sv.StartedAt, &sv.LastSeen); err != nil {
			return nil, err
		}
		sv.StartedAt, sv.LastSeen = sv.StartedAt.UTC(), sv.LastSeen.UTC()
		return &sv, nil
	})
	if err != nil {
		return nil, translate(err, "list servers")
	}
	return out, nil
}

// tryLeadSQL takes the lease when it is free, expired or the caller's, on the database's
// clock. The upsert locks the row, so concurrent callers are serialised and each sees the
// one before it: exactly one holder. The term grows when the holder changes.
const tryLeadSQL = `INSERT INTO leadership AS l (name, holder, term, since, expires_at)
	VALUES ($1, $2, 1, now(), now() + $3 * interval '1 microsecond')
	ON CONFLICT (name) DO UPDATE SET
		holder = EXCLUDED.holder,
		term = CASE WHEN l.holder = EXCLUDED.holder THEN l.term ELSE l.term + 1 END,
		since = CASE WHEN l.holder = EXCLUDED.holder THEN l.since ELSE now() END,
		expires_at = EXCLUDED.expires_at
	WHERE l.holder = EXCLUDED.holder OR l.expires_at <= now()
	RETURNING holder, term, since, expires_at`

// TryLead acquires or renews the leader lease; see store.Store.
func (s *Store) TryLead(ctx context.Context, p *store.TryLeadParams) (*model.Leadership, error) {
	l, err := scanLeadership(s.control.QueryRow(ctx, tryLeadSQL, store.LeaderLease, p.Holder, p.TTL.Microseconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		// Another server holds a live lease: answer with it.
		l, err = scanLeadership(s.control.QueryRow(ctx, `SELECT holder, term, since, expires_at FROM leadership WHERE name = $1`,
			store.LeaderLease))
	}
	if err != nil {
		return nil, translate(err, "try lead for %s", p.Holder)
	}
	return l, nil
}

// ResignLead gives the lease up if Holder has it.
func (s *Store) ResignLead(ctx context.Context, p *store.ResignLeadParams) error {
	_, err := s.control.Exec(ctx, `UPDATE leadership SET holder = '', expires_at = now() WHERE name = $1 AND holder = $2`,
		store.LeaderLease, p.Holder)
	if err != nil {
		return translate(err, "resign lead of %s", p.Holder)
	}
	return nil
}

// Leader returns the live lease.
func (s *Store) Leader(ctx context.Context, _ *store.LeaderParams) (*model.Leadership, error) {
	l, err := scanLeadership(s.pool.QueryRow(ctx, `SELECT holder, term, since, expires_at FROM leadership
		WHERE name = $1 AND holder <> '' AND expires_at > now()`, store.LeaderLease))
	if err != nil {
		return nil, translate(err, "leader")
	}
	return l, nil
}

func scanLeadership(row pgx.Row) (*model.Leadership, error) {
	var l model.Leadership
	if err := row.Scan(&l.Holder, &l.Term, &l.Since, &l.ExpiresAt); err != nil {
		return nil, err
	}
	l.Since, l.ExpiresAt = l.Since.UTC(), l.ExpiresAt.UTC()
	return &l, nil
}

// checkTerm fences a leader-only write: inside tx, the lease must still have term and be
// live on the database's clock. FOR SHARE holds the lease row until tx ends, so a
// takeover (TryLead's update) waits for the write, and a write after a takeover sees the
// new term. Term zero is not fenced.
func checkTerm(ctx context.Context, tx pgx.Tx, term int64) error {
	if term == 0 {
		return nil
	}
	var ok bool
	err := tx.QueryRow(ctx, `SELECT term = $2 AND holder <> '' AND expires_at > now() FROM leadership WHERE name = $1 FOR SHARE`,
		store.LeaderLease, term).Scan(&ok)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		ok = false
	case err != nil:
		return fmt.Errorf("check term %d: %w", term, err)
	}
	if !ok {
		return fmt.Errorf("term %d: %w", term, model.ErrNotLeader)
	}
	return nil
}
