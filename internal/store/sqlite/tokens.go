package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

const tokenCols = `id, name, role, namespaces, worker_id, hash, created_at, last_used_at, revoked_at`

// CreateToken stores a token; see store.Store.
func (s *Store) CreateToken(ctx context.Context, p *store.CreateTokenParams) (bool, error) {
	tk := p.Token
	ns, err := json.Marshal(orEmpty(tk.Namespaces))
	if err != nil {
		return false, fmt.Errorf("create token %s: encode namespaces: %w", tk.ID, err)
	}
	created := false
	err = s.write(ctx, func(t *wtx) error {
		created = false
		if p.OnlyIfNone {
			var n int
			if err := t.tx.QueryRowContext(t.ctx, `SELECT count(*) FROM tokens`).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
		}
		_, err := t.tx.ExecContext(t.ctx, `INSERT INTO tokens (`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			tk.ID, tk.Name, string(tk.Role), ns, tk.WorkerID, tk.Hash, micros(tk.CreatedAt),
			nullMicros(tk.LastUsedAt), nullMicros(tk.RevokedAt))
		if err != nil {
			return mapErr(err)
		}
		created = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("create token %s: %w", tk.ID, err)
	}
	return created, nil
}

// FindToken returns the token with a hash.
func (s *Store) FindToken(ctx context.Context, p *store.FindTokenParams) (*model.Token, error) {
	tk, err := scanToken(s.r.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, p.Hash))
	if err != nil {
		return nil, fmt.Errorf("find token: %w", mapErr(err))
	}
	return tk, nil
}

// ListTokens returns every token by id.
func (s *Store) ListTokens(ctx context.Context) ([]*model.Token, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []*model.Token
	for rows.Next() {
		tk, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, tk)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken revokes a token; the first revocation stands.
func (s *Store) RevokeToken(ctx context.Context, p *store.RevokeTokenParams) (*model.Token, error) {
	var tk *model.Token
	err := s.write(ctx, func(t *wtx) error {
		var err error
		tk, err = scanToken(t.tx.QueryRowContext(t.ctx, `UPDATE tokens SET revoked_at = coalesce(revoked_at, ?)
			WHERE id = ? RETURNING `+tokenCols, micros(p.Now), p.ID))
		return mapErr(err)
	})
	if err != nil {
		return nil, fmt.Errorf("revoke token %s: %w", p.ID, err)
	}
	return tk, nil
}

// TouchToken records a token's use, at most once per Now - Stale.
func (s *Store) TouchToken(ctx context.Context, p *store.TouchTokenParams) error {
	err := s.write(ctx, func(t *wtx) error {
		_, err := t.tx.ExecContext(t.ctx, `UPDATE tokens SET last_used_at = ?
			WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`, micros(p.Now), p.ID, micros(p.Stale))
		return err
	})
	if err != nil {
		return fmt.Errorf("touch token %s: %w", p.ID, err)
	}
	return nil
}

func scanToken(sc scanner) (*model.Token, error) {
	var (
		tk            model.Token
		role          string
		ns            []byte
		created       int64
		used, revoked sql.NullInt64
	)
	if err := sc.Scan(&tk.ID, &tk.Name, &role, &ns, &tk.WorkerID, &tk.Hash, &created, &used, &revoked); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return nil, fmt.Errorf("scan token: %w", err)
	}
	if err := json.Unmarshal(ns, &tk.Namespaces); err != nil {
		return nil, fmt.Errorf("decode namespaces of token %s: %w", tk.ID, err)
	}
	if len(tk.Namespaces) == 0 {
		tk.Namespaces = nil
	}
	tk.Role = model.Role(role)
	tk.CreatedAt = fromMicros(created)
	tk.LastUsedAt, tk.RevokedAt = fromNullMicros(used), fromNullMicros(revoked)
	return &tk, nil
}
