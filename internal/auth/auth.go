// Package auth holds who may do what: the permission each API route needs, which roles hold
// it (Allows, the one table of roles and actions), the principal a request acts as (its
// role, namespace scope and worker binding), and the format of API token secrets (random,
// recognisable by their prefix, stored only as a SHA-256).
//
// It is pure: no store, no clock, no I/O besides crypto/rand for new secrets; the API
// authenticates a request (a bearer token, or a client certificate: FromCertificate) and
// asks these functions, and so does the server's bootstrap.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/stint-dev/stint/internal/model"
)

// Perm is what a route needs of its caller.
type Perm int

// Permissions. The zero value is no permission at all: a route must declare one (the API
// refuses to build a route table with an undeclared permission).
const (
	PermUnset Perm = iota
	// Open: no token needed (health, readiness, metrics, the OpenAPI document, and the
	// webhook receivers, which check their own signature).
	Open
	// Read: read jobs, runs, logs, pipelines, queues, workers and the cluster, and plan.
	Read
	// Operate: submit, trigger, cancel, retry, pause and resume, backfill, apply and
	// delete, rotate webhook secrets, drain workers, change queues.
	Operate
	// Admin: manage API tokens.
	Admin
	// Worker: the worker protocol (register, lease, heartbeat, logs, complete).
	Worker
)

// String names a permission as the docs and the route table test do.
func (p Perm) String() string {
	switch p {
	case Open:
		return "open"
	case Read:
		return "read"
	case Operate:
		return "operate"
	case Admin:
		return "admin"
	case Worker:
		return "worker"
	}
	return "unset"
}

// Allows reports whether role holds perm: the roles x actions table of docs/security.md.
// An admin holds every permission; an operator reads and operates; a viewer reads; a worker
// speaks the worker protocol and nothing else. Open needs no role at all.
func Allows(role model.Role, perm Perm) bool {
	switch perm {
	case Open:
		return true
	case Read:
		return role == model.RoleAdmin || role == model.RoleOperator || role == model.RoleViewer
	case Operate:
		return role == model.RoleAdmin || role == model.RoleOperator
	case Admin:
		return role == model.RoleAdmin
	case Worker:
		return role == model.RoleAdmin || role == model.RoleWorker
	}
	return false
}

// Principal is who a request acts as.
type Principal struct {
	// TokenID is the stored token's id; empty for the static tokens (--api-token,
	// --worker-token) and for a server without authentication.
	TokenID string
	Name    string
	Role    model.Role
	// Namespaces, when not empty, are the only namespaces the principal sees and acts in.
	Namespaces []string
	// WorkerID, for a worker, is the one worker id it may act as (empty: any).
	WorkerID string
	// Certificate: the principal was authenticated by a client certificate (mutual TLS),
	// whose Common Name is Name; otherwise by a bearer token named Name.
	Certificate bool
}

// FromToken is the principal of a stored token.
func FromToken(tk *model.Token) *Principal {
	return &Principal{TokenID: tk.ID, Name: tk.Name, Role: tk.Role, Namespaces: tk.Namespaces, WorkerID: tk.WorkerID}
}

// FromCertificate is the principal of a client certificate the server verified: a worker
// bound to the id the certificate's Common Name gives, as a worker token bound to that id
// is, so it speaks the worker protocol as that id only. A certificate without a Common
// Name names no worker and is refused.
func FromCertificate(cert *x509.Certificate) (*Principal, error) {
	cn := cert.Subject.CommonName
	if cn == "" {
		return nil, errors.New("the client certificate has no Common Name (CN), which names the worker it identifies")
	}
	return &Principal{Name: cn, Role: model.RoleWorker, WorkerID: cn, Certificate: true}, nil
}

// Via names how the principal was authenticated, for messages: `the token "ci"` or `the
// client certificate "w1"`.
func (p *Principal) Via() string {
	if p.Certificate {
		return fmt.Sprintf("the client certificate %q", p.Name)
	}
	return fmt.Sprintf("the token %q", p.Name)
}

// Scoped reports whether the principal is limited to some namespaces.
func (p *Principal) Scoped() bool { return len(p.Namespaces) > 0 }

// Sees reports whether the principal sees and acts in namespace ns.
func (p *Principal) Sees(ns string) bool {
	return !p.Scoped() || slices.Contains(p.Namespaces, ns)
}

// ActsAs reports whether the principal may speak the worker protocol as worker id: an
// admin and an unbound worker as any, a bound worker as its own id only.
func (p *Principal) ActsAs(id string) bool {
	switch p.Role {
	case model.RoleAdmin:
		return true
	case model.RoleWorker:
		return p.WorkerID == "" || p.WorkerID == id
	}
	return false
}

// Proves reports whether the principal proves it is worker id, so that its registration may
// replace a live session of that id (scheduler.SessionHeld's takeover): an admin, or a
// worker token (or client certificate) bound to id. An unbound worker token acts as any
// worker but proves none.
func (p *Principal) Proves(id string) bool {
	return p.Role == model.RoleAdmin || p.Role == model.RoleWorker && p.WorkerID == id
}

type ctxKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal ctx carries, if any.
func FromContext(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(*Principal)
	return p, ok && p != nil
}

// SecretPrefix starts every token secret stint makes, so that people and secret scanners
// recognise one.
const SecretPrefix = "stint_"

// secretBytes is how much randomness a secret carries.
const secretBytes = 32

// lowerBase32 writes secrets in lowercase letters and digits, without padding.
var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding) //nolint:gochecknoglobals // read-only

// NewSecret returns a new token secret: SecretPrefix and 32 random bytes in base32.
func NewSecret() (string, error) {
	var b [secretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new token secret: %w", err)
	}
	return SecretPrefix + lowerBase32.EncodeToString(b[:]), nil
}

// Hash is what the store keeps of a secret: its SHA-256, in lowercase hex. The secrets are
// random and long, so a fast hash does; nothing slower would add to their strength.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// MinSecretLen is the shortest secret the server accepts from an operator (a bootstrap
// token chosen by hand): 128 bits of hex, or a little more than half a stint secret.
const MinSecretLen = 32

// CheckToken says why a token with these fields cannot be created (nil when it can):
// namespaces scope operators and viewers only, and only a worker token is bound to a
// worker id.
func CheckToken(role model.Role, namespaces []string, workerID string) error {
	if !role.Valid() {
		return fmt.Errorf("role %q is not one of admin, operator, viewer, worker", role)
	}
	if len(namespaces) > 0 && role != model.RoleOperator && role != model.RoleViewer {
		return errors.New("namespaces scope operator and viewer tokens only: an admin manages tokens for every namespace, and a worker takes runs of any")
	}
	if workerID != "" && role != model.RoleWorker {
		return errors.New("a worker id binds worker tokens only")
	}
	return nil
}
