package store

import (
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// CreateTokenParams are the arguments of CreateToken.
type CreateTokenParams struct {
	// Token is stored as given: the caller fills its id, hash and CreatedAt.
	Token *model.Token
	// OnlyIfNone creates the token only when the store holds no token at all, revoked ones
	// included (the first admin token of a fresh server); CreateToken then reports whether
	// it did. Two servers starting at once create one token between them.
	OnlyIfNone bool
}

// FindTokenParams look a token up by the SHA-256 of its secret.
type FindTokenParams struct {
	Hash string
}

// RevokeTokenParams name the token to revoke.
type RevokeTokenParams struct {
	ID  string
	Now time.Time
}

// TouchTokenParams record that a token was used.
type TouchTokenParams struct {
	ID  string
	Now time.Time // becomes LastUsedAt ...
	// ... unless LastUsedAt is already at or after Stale: a token in constant use is
	// written at most once per Now - Stale, whichever server sees it.
	Stale time.Time
}
