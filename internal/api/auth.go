package api

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/auth"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

const (
	// tokenCacheTTL is how long this server trusts a token it looked up before asking the
	// store again: a token revoked through another server stops working here within it
	// (at once through this one).
	tokenCacheTTL = 5 * time.Second
	// tokenCacheMax bounds the looked-up tokens kept; past it the cache starts afresh.
	tokenCacheMax = 10000
	// touchEvery is how often a token in use has its last_used_at written.
	touchEvery = time.Minute
)

// The names of the static tokens' principals: the flags that set them.
const (
	staticAdminName  = "--api-token"
	staticWorkerName = "--worker-token"
)

// openPrincipal is who every request acts as when authentication is off (Config.Open).
func openPrincipal() *auth.Principal {
	return &auth.Principal{Name: "no authentication (stint dev)", Role: model.RoleAdmin}
}

// authorize authenticates the request and checks that its principal holds perm. It answers
// 401 (no valid token) or 403 (a token without the permission) itself and reports false;
// otherwise it returns the request with the principal in its context.
func (a *API) authorize(w http.ResponseWriter, r *http.Request, perm auth.Perm) (*http.Request, bool) {
	if perm == auth.Open {
		return r, true
	}
	p, err := a.authenticate(r)
	if err != nil {
		var he *httpError
		if errors.As(err, &he) && he.status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="stint"`)
		}
		a.writeError(w, r, err)
		return nil, false
	}
	if !auth.Allows(p.Role, perm) {
		a.writeError(w, r, &httpError{status: http.StatusForbidden,
			detail: fmt.Sprintf("this route needs %s; %s has the role %s", permWords(perm), p.Via(), p.Role)})
		return nil, false
	}
	return r.WithContext(auth.NewContext(r.Context(), p)), true
}

// permWords says what a permission is and which roles hold it.
func permWords(perm auth.Perm) string {
	switch perm {
	case auth.Read:
		return "the read permission (roles viewer, operator, admin)"
	case auth.Operate:
		return "the operate permission (roles operator, admin)"
	case auth.Admin:
		return "the admin role"
	case auth.Worker:
		return "the worker protocol (roles worker, admin)"
	}
	return "the " + perm.String() + " permission"
}

// authenticate finds who the request comes from: the worker a verified client certificate
// names (mutual TLS), or whom its bearer token belongs to: the static tokens of the config,
// else a stored token that is not revoked. A request may not carry both. Errors are 401
// problems, or the store's failure.
func (a *API) authenticate(r *http.Request) (*auth.Principal, error) {
	if a.cfg.Open {
		return openPrincipal(), nil
	}
	secret, ok := bearer(r)
	if cert := clientCert(r); cert != nil {
		if ok {
			return nil, &httpError{status: http.StatusUnauthorized,
				detail: "the request carries both a client certificate and a bearer token: send one or the other"}
		}
		p, err := auth.FromCertificate(cert)
		if err != nil {
			return nil, &httpError{status: http.StatusUnauthorized, detail: err.Error()}
		}
		return p, nil
	}
	if !ok {
		return nil, &httpError{status: http.StatusUnauthorized, detail: "a bearer token is required (Authorization: Bearer <token>)"}
	}
	if equalSecret(secret, a.cfg.UserToken) {
		return &auth.Principal{Name: staticAdminName, Role: model.RoleAdmin}, nil
	}
	if equalSecret(secret, a.cfg.WorkerToken) {
		return &auth.Principal{Name: staticWorkerName, Role: model.RoleWorker}, nil
	}
	ctx := r.Context()
	tk, err := a.lookupToken(ctx, auth.Hash(secret))
	switch {
	case errors.Is(err, model.ErrNotFound):
		return nil, &httpError{status: http.StatusUnauthorized, detail: "the bearer token is not valid"}
	case err != nil:
		return nil, fmt.Errorf("authenticate: %w", err)
	case tk.RevokedAt != nil:
		return nil, &httpError{status: http.StatusUnauthorized, detail: fmt.Sprintf("the bearer token %q was revoked", tk.Name)}
	}
	a.touch(ctx, tk)
	return auth.FromToken(tk), nil
}

// clientCert returns the client certificate the TLS handshake verified against the server's
// client CA (nil when the request has none, or came over plain HTTP).
func clientCert(r *http.Request) *x509.Certificate {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil
	}
	return r.TLS.VerifiedChains[0][0]
}

// bearer returns the request's bearer token.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// equalSecret compares a presented secret with a configured one in constant time; an
// unset one matches nothing.
func equalSecret(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// lookupToken returns the stored token with hash, from the cache while it is fresh.
func (a *API) lookupToken(ctx context.Context, hash string) (*model.Token, error) {
	now := a.clock.Now()
	if tk := a.tokens.get(hash, now); tk != nil {
		return tk, nil
	}
	tk, err := a.store.FindToken(ctx, &store.FindTokenParams{Hash: hash})
	if err != nil {
		return nil, err
	}
	a.tokens.put(hash, tk, now)
	return tk, nil
}

// touch records that tk was used, at most once per touchEvery (from this server; the store
// keeps it so across servers too). A failure is logged, not the request's.
func (a *API) touch(ctx context.Context, tk *model.Token) {
	now := a.clock.Now()
	if !a.tokens.due(tk, now) {
		return
	}
	if err := a.eng.TouchToken(ctx, tk.ID, touchEvery); err != nil && ctx.Err() == nil {
		a.log.WarnContext(ctx, "record token use", "token", tk.ID, "err", err)
	}
}

// tokenCache keeps looked-up tokens by hash for tokenCacheTTL, and when this server last
// recorded each one's use.
type tokenCache struct {
	mu      sync.Mutex
	byHash  map[string]cachedToken
	touched map[string]time.Time // by token id
}

type cachedToken struct {
	tk      *model.Token
	fetched time.Time
}

func newTokenCache() *tokenCache {
	return &tokenCache{byHash: map[string]cachedToken{}, touched: map[string]time.Time{}}
}

func (c *tokenCache) get(hash string, now time.Time) *model.Token {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byHash[hash]
	if !ok || now.Sub(e.fetched) >= tokenCacheTTL || now.Before(e.fetched) {
		return nil
	}
	return e.tk
}

func (c *tokenCache) put(hash string, tk *model.Token, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byHash) >= tokenCacheMax {
		clear(c.byHash)
	}
	c.byHash[hash] = cachedToken{tk: tk, fetched: now}
}

// forget drops a token (revoked through this server) from the cache.
func (c *tokenCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, e := range c.byHash {
		if e.tk.ID == id {
			delete(c.byHash, h)
		}
	}
	delete(c.touched, id)
}

// due reports whether tk's use should be recorded now, and if so notes that it is.
func (c *tokenCache) due(tk *model.Token, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.touched[tk.ID]
	if tk.LastUsedAt != nil && tk.LastUsedAt.After(last) {
		last = *tk.LastUsedAt
	}
	if !last.IsZero() && now.Sub(last) < touchEvery {
		return false
	}
	if len(c.touched) >= tokenCacheMax {
		clear(c.touched)
	}
	c.touched[tk.ID] = now
	return true
}

// principalOf returns the principal of a request's context; nil for a call made inside the
// server (the local worker of `stint dev`), which is trusted.
func principalOf(ctx context.Context) *auth.Principal {
	p, _ := auth.FromContext(ctx)
	return p
}

// sees reports whether the caller sees namespace ns (a scoped token sees only its own).
func sees(ctx context.Context, ns string) bool {
	p := principalOf(ctx)
	return p == nil || p.Sees(ns)
}

// scopeOf returns the namespaces the caller is limited to (nil: all).
func scopeOf(ctx context.Context) []string {
	if p := principalOf(ctx); p != nil {
		return p.Namespaces
	}
	return nil
}

// actIn refuses (403) a caller that may not act in namespace ns: a submission, apply or
// plan into a namespace outside a scoped token's own. field names where the namespace came
// from.
func actIn(ctx context.Context, field, ns string) error {
	if mayActIn(ctx, ns) {
		return nil
	}
	p := principalOf(ctx)
	msg := fmt.Sprintf("the token %q may act only in namespaces %s", p.Name, strings.Join(p.Namespaces, ", "))
	return &httpError{status: http.StatusForbidden, detail: fmt.Sprintf("namespace %q: %s", ns, msg),
		fields: []apitype.FieldError{{Field: field, Message: msg}}}
}

// mayActIn reports whether the caller may act in namespace ns (actIn refuses the others).
func mayActIn(ctx context.Context, ns string) bool {
	p := principalOf(ctx)
	return p == nil || p.Sees(ns)
}

// unscoped refuses (403) a scoped caller a change to something every namespace shares
// (a queue, a worker), described by what.
func unscoped(ctx context.Context, what string) error {
	p := principalOf(ctx)
	if p == nil || !p.Scoped() {
		return nil
	}
	return &httpError{status: http.StatusForbidden,
		detail: fmt.Sprintf("the token %q is limited to namespaces %s and may not change %s, which every namespace shares",
			p.Name, strings.Join(p.Namespaces, ", "), what)}
}

// whoami serves GET /v1/whoami: the caller's principal.
func (a *API) whoami(w http.ResponseWriter, r *http.Request) error {
	p := principalOf(r.Context())
	writeJSON(w, http.StatusOK, apitype.Whoami{
		Name: p.Name, TokenID: p.TokenID, Role: string(p.Role), Namespaces: p.Namespaces, Open: a.cfg.Open,
	})
	return nil
}
