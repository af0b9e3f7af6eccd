package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/store"
)

// Config wires an API.
type Config struct {
	Engine *engine.Engine
	Logger *slog.Logger // default slog.Default()
	// UserToken, when set, is the bearer token every user route requires.
	UserToken string
	// WorkerToken, when set, is a bearer token the worker protocol routes accept; they also
	// accept UserToken. With neither set the worker routes are open.
	WorkerToken string
	// Limits bound what a request may ask; zero fields take DefaultLimits.
	Limits Limits
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
	lim     *Limits // cfg.Limits, with the defaults
	handler http.Handler
}

// New builds the API and its routes.
func New(cfg Config) (*API, error) {
	if cfg.Engine == nil {
		return nil, errors.New("new api: no engine")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Limits = cfg.Limits.withDefaults()
	a := &API{
		eng:   cfg.Engine,
		proto: NewProtocol(cfg.Engine),
		store: cfg.Engine.Store(),
		clock: cfg.Engine.Clock(),
		log:   cfg.Logger,
		cfg:   cfg,
		lim:   &cfg.Limits,
	}
	mux := http.NewServeMux()
	for _, rt := range routeTable() {
		mux.Handle(rt.Method+" "+rt.Path, a.endpoint(rt))
	}
	a.handler = a.middleware(mux)
	return a, nil
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
	}
	return a.lim.MaxBodyBytes
}
