package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

const tokenCols = `id, name, role, namespaces, worker_id, hash, created_at, last_used_at, revoked_at`

// CreateToken stores a token; see store.Store. With OnlyIfNone the table is locked against
// other writers first, so that servers starting together create one first token.
func (s *Store) CreateToken(ctx context.Context, p *store.CreateTokenParams) (bool, error) {
	tk := p.Token
	created := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		created = false
		if p.OnlyIfNone {
			if _, err := tx.Exec(ctx, `LOCK TABLE tokens IN SHARE ROW EXCLUSIVE MODE`); err != nil {
				return err
			}
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tokens)`).Scan(&exists); err != nil {
				return err
			}
			if exists {
				return nil
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO tokens (`+tokenCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			tk.ID, tk.Name, string(tk.Role), orEmptyStrings(tk.Namespaces), tk.WorkerID, tk.Hash, utc(tk.CreatedAt),
			utcPtr(tk.LastUsedAt), utcPtr(tk.RevokedAt))
		if err != nil {
			return err
		}
		created = true
		return nil
	})
	if err != nil {
		return false, translate(err, "create token %s", tk.ID)
	}
	return created, nil
}

// FindToken returns the token with a hash.
func (s *Store) FindToken(ctx context.Context, p *store.FindTokenParams) (*model.Token, error) {
	tk, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE hash = $1`, p.Hash))
	if err != nil {
		return nil, translate(err, "find token")
	}
	return tk, nil
}

// ListTokens returns every token by id.
func (s *Store) ListTokens(ctx context.Context) ([]*model.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY id`)
	if err != nil {
		return nil, translate(err, "list tokens")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*model.Token, error) { return scanToken(row) })
	if err != nil {
		return nil, translate(err, "list tokens")
	}
	return out, nil
}

// RevokeToken revokes a token; the first revocation stands.
func (s *Store) RevokeToken(ctx context.Context, p *store.RevokeTokenParams) (*model.Token, error) {
	tk, err := scanToken(s.pool.QueryRow(ctx, `UPDATE tokens SET revoked_at = coalesce(revoked_at, $1)
		WHERE id = $2 RETURNING `+tokenCols, utc(p.Now), p.ID))
	if err != nil {
		return nil, translate(err, "revoke token %s", p.ID)
	}
	return tk, nil
}

// TouchToken records a token's use, at most once per Now - Stale.
func (s *Store) TouchToken(ctx context.Context, p *store.TouchTokenParams) error {
	_, err := s.pool.Exec(ctx, `UPDATE tokens SET last_used_at = $1
		WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)`, utc(p.Now), p.ID, utc(p.Stale))
	if err != nil {
		return translate(err, "touch token %s", p.ID)
	}
	return nil
}

func scanToken(row pgx.Row) (*model.Token, error) {
	var (
		tk            model.Token
		role          string
		used, revoked *time.Time
	)
	if err := row.Scan(&tk.ID, &tk.Name, &role, &tk.Namespaces, &tk.WorkerID, &tk.Hash, &tk.CreatedAt, &used, &revoked); err != nil {
		return nil, err
	}
	if len(tk.Namespaces) == 0 {
		tk.Namespaces = nil
	}
	tk.Role = model.Role(role)
	tk.CreatedAt = tk.CreatedAt.UTC()
	tk.LastUsedAt, tk.RevokedAt = utcPtr(used), utcPtr(revoked)
	return &tk, nil
}

func orEmptyStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
