package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/stint-dev/stint/internal/auth"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/secret"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/ui"
)

// Config wires an API.
type Config struct {
	Engine *engine.Engine
	Logger *slog.Logger // default slog.Default()
	// Every route but the open ones (health, readiness, metrics, the OpenAPI document, the
	// signed webhooks) needs a bearer token: one of the store's API tokens, or one of these
	// static ones. UserToken, when set, acts as an admin token; WorkerToken as a worker
	// token for any worker id. A request over TLS may instead present a client certificate
	// verified by the server (its http.Server's TLS config decides which CA): it acts as a
	// worker token bound to the certificate's Common Name.
	UserToken   string
	WorkerToken string
	// Open turns authentication off: every request acts as an admin. Only `stint dev` on a
	// loopback address does this.
	Open bool
	// Limits bound what a request may ask; zero fields take DefaultLimits.
	Limits Limits
	// WriteTimeout is the http.Server's WriteTimeout (0: none). The routes that answer late
	// (a worker's long poll) or stream (a followed log, a stream of jobs) give each of their
	// writes this long from when it starts (see deadlines.go).
	WriteTimeout time.Duration
	// ReadTimeout is the http.Server's ReadTimeout (0: none). POST /v1/jobs/stream, whose
	// body may take longer, gives each of its reads this long from when it starts.
	ReadTimeout time.Duration
	// Metrics, when set, serves GET /metrics.
	Metrics http.Handler
	// Requests, when set, is told of every request once answered: the path of the route
	// pattern it matched ("" when none did, so that raw paths never become labels), its
	// method, status code and duration.
	Requests func(route, method string, code int, d time.Duration)
	// SubmitRate, when set, caps each client's submissions (the routes marked Submit): at
	// most Rate in any window of Per; more is a 429 with Retry-After. See ratelimit.go.
	SubmitRate *model.RateLimit
	// ClientKey names the client a request counts against (default DefaultClientKey).
	ClientKey func(*http.Request) string
	// Secrets seal jobs' secret env values and webhook secrets at rest; nil: the server
	// has no key, so a spec with secret_env is refused and webhook secrets are kept in clear.
	Secrets *secret.Keys
}

// API is stint's HTTP layer; see the package doc.
type API struct {
	eng     *engine.Engine
	proto   *Protocol
	store   store.Store
	clock   clock.Clock
	log     *slog.Logger
	cfg     Config
	lim     *Limits        // cfg.Limits, with the defaults
	submits *submitLimiter // nil: no submission rate
	ready   readiness
	handler http.Handler
	tokens  *tokenCache
	keys    *secret.Keys // cfg.Secrets
}

// New builds the API and its routes.
func New(cfg Config) (*API, error) {
	if cfg.Engine == nil {
		return nil, errors.New("new api: no engine")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.ClientKey == nil {
		cfg.ClientKey = DefaultClientKey
	}
	if r := cfg.SubmitRate; r != nil && (r.Rate < 1 || r.Per <= 0) {
		return nil, fmt.Errorf("new api: submit rate %d per %s: want at least 1 per a positive duration", r.Rate, r.Per)
	}
	a := &API{
		eng:    cfg.Engine,
		proto:  NewProtocol(cfg.Engine, cfg.Secrets),
		store:  cfg.Engine.Store(),
		clock:  cfg.Engine.Clock(),
		log:    cfg.Logger,
		cfg:    cfg,
		lim:    &cfg.Limits,
		tokens: newTokenCache(),
		keys:   cfg.Secrets,
	}
	if cfg.SubmitRate != nil {
		a.submits = newSubmitLimiter(cfg.SubmitRate)
	}
	mux, err := a.mux(routeTable())
	if err != nil {
		return nil, fmt.Errorf("new api: %w", err)
	}
	// The web UI's files are open, like the health check: they hold no data, which the
	// pages fetch from the routes above with the user's token. They are not API routes, so
	// they are neither in the route table nor in the OpenAPI document.
	mux.Handle("GET "+ui.Prefix, ui.Handler())
	a.handler = a.middleware(mux)
	return a, nil
}

// mux registers routes, refusing one that declares no permission.
func (a *API) mux(routes []route) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	for _, rt := range routes {
		if rt.Perm == auth.PermUnset {
			return nil, fmt.Errorf("route %s %s declares no permission", rt.Method, rt.Path)
		}
		mux.Handle(rt.Method+" "+rt.Path, a.endpoint(rt))
	}
	return mux, nil
}

// Handler returns the API's HTTP handler.
func (a *API) Handler() http.Handler { return a.handler }

// Protocol returns the worker protocol the API's worker routes serve, for a worker that
// runs in the server's process.
func (a *API) Protocol() *Protocol { return a.proto }

// bodyLimit is the body cap of a route.
func (a *API) bodyLimit(b bodySize) int64 {
	switch b {
	case bodyBatch:
		return a.lim.MaxBatchBodyBytes
	case bodyLogs:
		return a.lim.MaxLogBodyBytes
	case bodyStream:
		return a.lim.MaxStreamBodyBytes
	case bodyHeld:
		return max(a.lim.MaxBodyBytes, heldBodyBytes)
	}
	return a.lim.MaxBodyBytes
}
