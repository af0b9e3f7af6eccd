package apitype

import "time"

// Token is an API token as the API shows it: what it may do, never its secret.
type Token struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Role is admin, operator, viewer or worker.
	Role string `json:"role"`
	// Namespaces, when not empty, are the only namespaces the token sees and acts in.
	Namespaces []string `json:"namespaces,omitempty"`
	// WorkerID, for a worker token, is the one worker id it may act as (empty: any).
	WorkerID   string     `json:"worker_id,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// TokenList lists tokens, revoked ones included, oldest first.
type TokenList struct {
	Items []*Token `json:"items"`
}

// CreateTokenRequest is the body of POST /v1/tokens.
type CreateTokenRequest struct {
	Name       string   `json:"name"`
	Role       string   `json:"role"`
	Namespaces []string `json:"namespaces,omitempty"`
	WorkerID   string   `json:"worker_id,omitempty"`
}

// CreatedToken answers POST /v1/tokens: the token and, this once, its secret. The server
// keeps only a hash of the secret and cannot show it again.
type CreatedToken struct {
	Secret string `json:"token"`
	Token
}

// Whoami answers GET /v1/whoami: who the caller's credentials make it, so that a client
// (the web UI) can offer only what the role may do.
type Whoami struct {
	// Name is the token's name (or the static token's flag, or the certificate's Common Name).
	Name    string `json:"name"`
	TokenID string `json:"token_id,omitempty"`
	Role    string `json:"role"`
	// Namespaces, when not empty, are the only namespaces the caller sees and acts in.
	Namespaces []string `json:"namespaces,omitempty"`
	// Open: the server runs without authentication (stint dev on loopback).
	Open bool `json:"open,omitempty"`
}
