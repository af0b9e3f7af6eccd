package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/stint-dev/stint/internal/auth"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/store"
)

// Config wires an API.
type Config struct {
	Engine *engine.Engine
	Logger *slog.Logger // default slog.Default()
	// Every route but the open ones (health, readiness, metrics, the OpenAPI document, the
	// signed webhooks) needs a bearer token: one of the store's API tokens, or one of these
	// static ones. UserToken, when set, acts as an admin token; WorkerToken as a worker
	// token for any worker id.
	UserToken   string
	WorkerToken string
	// Open turns authentication off: every request acts as an admin. Only `stint dev` on a
	// loopback address does this.
	Open bool
	// MaxBodyBytes caps request bodies (default 1 MiB); POST /v1/jobs/batch and POST /v1/dags allow 64 MiB
	// and POST /v1/attempts/logs 8 MiB, or MaxBodyBytes when that is larger.
	MaxBodyBytes int64
	// Metrics, when set, serves GET /metrics.
	Metrics http.Handler
}

// API is stint's HTTP layer; see the package doc.
type API struct {
	eng     *engine.Engine
	proto   *Protocol
	store   store.Store
	clock   clock.Clock
	log     *slog.Logger
	cfg     Config
	handler http.Handler
	tokens  *tokenCache
}

// New builds the API and its routes.
func New(cfg Config) (*API, error) {
	if cfg.Engine == nil {
		return nil, errors.New("new api: no engine")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = defaultMaxBody
	}
	a := &API{
		eng:    cfg.Engine,
		proto:  NewProtocol(cfg.Engine),
		store:  cfg.Engine.Store(),
		clock:  cfg.Engine.Clock(),
		log:    cfg.Logger,
		cfg:    cfg,
		tokens: newTokenCache(),
	}
	mux, err := a.mux(routeTable())
	if err != nil {
		return nil, fmt.Errorf("new api: %w", err)
	}
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
		return max(batchMaxBody, a.cfg.MaxBodyBytes)
	case bodyLogs:
		return max(logsMaxBody, a.cfg.MaxBodyBytes)
	}
	return a.cfg.MaxBodyBytes
}
