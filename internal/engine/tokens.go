package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// CreateToken stores an API token (its hash: the caller made the secret); see
// store.Store.CreateToken for OnlyIfNone.
func (e *Engine) CreateToken(ctx context.Context, p *store.CreateTokenParams) (bool, error) {
	created, err := e.store.CreateToken(ctx, p)
	if err != nil {
		return false, fmt.Errorf("create token: %w", err)
	}
	return created, nil
}

// RevokeToken revokes a token now and returns it.
func (e *Engine) RevokeToken(ctx context.Context, id string) (*model.Token, error) {
	tk, err := e.store.RevokeToken(ctx, &store.RevokeTokenParams{ID: id, Now: e.clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("revoke token: %w", err)
	}
	return tk, nil
}

// TouchToken records that a token was used now, unless it was recorded less than every ago.
func (e *Engine) TouchToken(ctx context.Context, id string, every time.Duration) error {
	now := e.clock.Now()
	if err := e.store.TouchToken(ctx, &store.TouchTokenParams{ID: id, Now: now, Stale: now.Add(-every)}); err != nil {
		return fmt.Errorf("touch token: %w", err)
	}
	return nil
}
