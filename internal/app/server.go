package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/api"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/metrics"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/secret"
	"github.com/stint-dev/stint/internal/version"
	"github.com/stint-dev/stint/worker"
)

// ServerConfig configures `stint server` and `stint dev`.
type ServerConfig struct {
	Addr     string // listen address
	DataDir  string // where the embedded store lives
	StoreURL string // empty: SQLite in DataDir

	LeaseTTL time.Duration

	// ServerID names this server in the cluster; AdvertiseAddr is where it is reached
	// (default the listen address); LeaderTTL is the leader lease's length. See
	// leaderDefaults for the defaults of the first and the last.
	ServerID      string
	AdvertiseAddr string
	LeaderTTL     time.Duration

	// Authentication is on unless OpenAuth: UserToken acts as an admin token, WorkerToken as
	// a worker token of any id, and the store's API tokens as their roles say.
	// BootstrapToken (STINT_BOOTSTRAP_TOKEN) is an admin token's secret the server makes
	// sure is stored; without it (and without UserToken) a store with no token at all gets
	// a new admin token, printed once on Stderr.
	UserToken      string
	WorkerToken    string
	BootstrapToken string
	// OpenAuth turns authentication off (every caller is an admin): `stint dev` with no
	// token set. The server then listens on a loopback address only.
	OpenAuth bool
	// Stderr receives the first admin token (default os.Stderr).
	Stderr io.Writer

	// TLS, with a certificate, makes the server serve HTTPS only; with a client CA too,
	// workers may authenticate with a client certificate of that CA (see serverTLS).
	TLS TLSFiles

	// Limits bound requests (zero fields: api.DefaultLimits); HTTP the server's timeouts and
	// connection caps (zero fields: DefaultHTTPLimits, negative: off); SubmitRate, when set,
	// each client's submissions (the flags default to DefaultSubmitRate; nil here: none).
	Limits     api.Limits
	HTTP       HTTPLimits
	SubmitRate *model.RateLimit

	// Retention is how long history is kept (the --retain-* flags; zero: for ever).
	Retention Retention

	// Secrets encrypt secret env values and webhook secrets at rest (STINT_SECRET_KEY,
	// --secret-key-file); nil: jobs with secret_env are refused, webhook secrets kept in clear.
	Secrets *secret.Keys

	// Alerts configures the alert rules and channels (zero: the default rules, no channel);
	// AlertRetry and AlertRetryMax pace the retries of a failed notification (zero: 1 s
	// doubling to 1 min).
	Alerts                    AlertConfig
	AlertRetry, AlertRetryMax time.Duration

	// LocalWorker runs a worker inside the server process (stint dev) that offers
	// LocalCapacity (zero CPU: the machine's CPUs; zero slots: 4 per CPU; memory and GPUs as
	// given); its jobs get the variables LocalPassEnv names (worker.Config.PassEnv), and
	// LocalGuard is its guard process (worker.Config.Guard).
	LocalWorker   bool
	LocalCapacity apitype.Capacity
	LocalPassEnv  []string
	LocalGuard    []string
	// LocalHandlers are handler kinds the local worker runs besides the built-in noop; an
	// entry named noop replaces it (stint bench notes when each run's handler starts).
	LocalHandlers map[string]worker.Handler

	Logger *slog.Logger
	// Ready, if set, receives the listening address once the server accepts requests.
	Ready func(addr string)
}

// cronLead is the engine's CronLead: long enough to create the runs of 10,000 jobs due on
// one second before it comes, short enough that a schedule changed meanwhile rarely drops a
// run made ahead.
const cronLead = 2 * time.Second

// soleLeaderTTL is the leader lease of a server on SQLite. The data directory's lock makes
// that server the only one, so the lease fences nobody and only has to outlive a stall:
// under a burst of work the writer can hold off a renewal for longer than PostgreSQL's
// 1 s lease allows, and a server alone should not step down (and log errors) for that.
const soleLeaderTTL = 10 * time.Second

// leaderDefaults returns the server id and leader lease length a server runs with, given
// the flags (empty or zero when not set). On PostgreSQL: hostname-pid and the engine's
// default (1 s), since servers come and go and a dead leader must be replaced fast. On
// SQLite, where one process owns the data directory: the host name alone, so that a
// restarted server finds the lease its predecessor held still its own and leads at once
// whatever the lease's length, and soleLeaderTTL.
func leaderDefaults(eng Engine, id string, ttl time.Duration, host string) (string, time.Duration) {
	if eng != EngineSQLite {
		return id, ttl // the engine's defaults
	}
	if id == "" {
		id = host
	}
	if ttl == 0 {
		ttl = soleLeaderTTL
	}
	return id, ttl
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "stint"
	}
	return h
}

// RunServer runs a server until ctx ends, then shuts down gracefully: it stops accepting
// requests, lets the local worker drain, and closes the store.
func RunServer(ctx context.Context, cfg ServerConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.OpenAuth && !loopbackAddr(cfg.Addr) {
		return errOpenOffLoopback(cfg.Addr)
	}
	tlsCfg, err := serverTLS(cfg.TLS, clock.Real{}, log)
	if err != nil {
		return err
	}
	st, eng, err := OpenStore(ctx, cfg.StoreURL, cfg.DataDir, log)
	if err != nil {
		return err
	}
	defer st.Close()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	defer ln.Close() // on an early return; Serve closes it otherwise
	if cfg.OpenAuth && !listensOnLoopback(ln) {
		return errOpenOffLoopback(ln.Addr().String())
	}
	if tlsCfg != nil {
		// HTTPS only: a plain HTTP request is answered 400 by net/http and closed.
		ln = tls.NewListener(ln, tlsCfg)
	}
	advertise := cfg.AdvertiseAddr
	if advertise == "" {
		advertise = ln.Addr().String()
	}

	serverID, leaderTTL := leaderDefaults(eng, cfg.ServerID, cfg.LeaderTTL, hostname())
	committers := 1
	if eng == EnginePostgres {
		committers = 4
	}
	// Servers on one PostgreSQL wake each other's workers and loops (LISTEN/NOTIFY).
	notifier, err := newNotifier(ctx, st)
	if err != nil {
		return err
	}
	lim := cfg.Limits.WithDefaults()
	// This server's metrics: the engine tells it what it ended, retried and leased, the
	// store wrapper times the hot calls, the API counts requests (docs/metrics.md).
	m := metrics.New(version.Get())
	e := engine.New(engine.Config{Store: m.Store(st), Logger: log, Observer: m, LeaseTTL: cfg.LeaseTTL, Committers: committers,
		MaxLogBytes: lim.MaxLogBytes,
		Notifier:    notifier,
		// Batch the dispatch transactions under a stream of submissions (see engine.Config):
		// with SQLite, 16 producers of single jobs reach ~6,000/s instead of ~5,000/s, for
		// at most 5 ms more submit-to-start latency. See BENCHMARKS.md.
		LeaseLinger: 5 * time.Millisecond, CompleteLinger: 2 * time.Millisecond,
		// One statement records the heartbeats of many workers: 2,000 idle workers cost
		// the server and the database a fraction of one statement each (BENCHMARKS.md,
		// "Workers at scale").
		HeartbeatLinger: 50 * time.Millisecond,
		// One transaction writes the audit entries of many requests: under a stream of
		// single submissions an entry each was a tenth of PostgreSQL's statement time.
		AuditLinger: 20 * time.Millisecond,
		// Cron runs of jobs without concurrency limits are created this far ahead of their
		// instant, so that thousands of jobs due on one second only need promoting then.
		CronLead: cronLead,
		ServerID: serverID, AdvertiseAddr: advertise, LeaderTTL: leaderTTL,
		Retention: cfg.Retention.Policy, RetentionBatch: cfg.Retention.Batch, RetentionPause: cfg.Retention.Pause,
		RetentionInterval: cfg.Retention.Interval,
		Alerts:            startAlerts(ctx, cfg.Alerts, cfg.AlertRetry, cfg.AlertRetryMax, log)})
	if err := e.Start(ctx); err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	defer e.Stop()
	if cfg.OpenAuth {
		log.Warn("authentication is off: every caller that reaches the (loopback) address is an admin")
	} else if err := bootstrapToken(ctx, e, cfg.BootstrapToken, cfg.UserToken, cfg.Stderr, log); err != nil {
		return err
	}

	h := cfg.HTTP.resolved()
	a, err := api.New(api.Config{
		Engine:       e,
		Logger:       log,
		UserToken:    cfg.UserToken,
		WorkerToken:  cfg.WorkerToken,
		Open:         cfg.OpenAuth,
		Metrics:      m.Handler(e, log),
		Requests:     m.Request,
		Limits:       lim,
		WriteTimeout: h.WriteTimeout,
		ReadTimeout:  h.ReadTimeout,
		SubmitRate:   cfg.SubmitRate,
		Secrets:      cfg.Secrets,
	})
	if err != nil {
		return fmt.Errorf("build api: %w", err)
	}
	srv, _ := newHTTPServer(a.Handler(), h, log)

	var wg sync.WaitGroup
	serveErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()
	if cfg.Secrets == nil {
		log.Warn("no secret key: jobs with secret_env are refused, and webhook secrets are stored in clear; " +
			"set STINT_SECRET_KEY or --secret-key-file (docs/security.md)")
	}
	log.Info("stint server listening", "addr", ln.Addr().String(), "store", string(eng), "local_worker", cfg.LocalWorker,
		"auth", !cfg.OpenAuth, "tls", tlsCfg != nil, "client_certificates", cfg.TLS.ClientCA != "",
		"secret_key", cfg.Secrets.ID())

	workerCtx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorker()
	workerDone := make(chan error, 1)
	if cfg.LocalWorker {
		w, err := newLocalWorker(a.Protocol(), cfg, log)
		if err != nil {
			return err
		}
		go func() { workerDone <- w.Run(workerCtx) }()
	} else {
		close(workerDone)
	}
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down")
	stopWorker()
	<-workerDone
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	wg.Wait()
	return nil
}

// newHTTPServer is the server of handler with the timeouts and connection caps of h
// (resolved: zero is off).
func newHTTPServer(handler http.Handler, h HTTPLimits, log *slog.Logger) (*http.Server, *connGuard) {
	guard := newConnGuard(h.MaxConns, h.MaxPendingPerIP, log)
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: h.ReadHeaderTimeout,
		ReadTimeout:       h.ReadTimeout,
		WriteTimeout:      h.WriteTimeout,
		IdleTimeout:       h.IdleTimeout,
		ConnState:         guard.connState,
		ErrorLog:          stdlog.New(serverErrors{log}, "", 0),
	}, guard
}

// serverErrors logs what net/http reports (accept errors such as running out of file
// descriptors, failed TLS handshakes) as warnings, except a handshake cut off before it began
// (EOF: a TCP health check, a port scan), which is only debug: a load balancer's probes
// would fill the log otherwise.
type serverErrors struct{ log *slog.Logger }

func (w serverErrors) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "http: TLS handshake error") && strings.HasSuffix(msg, ": EOF") {
		level = slog.LevelDebug
	}
	w.log.Log(context.Background(), level, msg)
	return len(p), nil
}

// newLocalWorker builds the worker that runs inside `stint dev`: commands, shell and the
// built-in noop handler, calling the API's worker protocol in-process (the translation
// remote workers go through too, without HTTP). Its jobs start from a clean environment, so
// that the server's tokens (STINT_API_TOKEN, STINT_WORKER_TOKEN) never reach them.
func newLocalWorker(srv worker.Server, cfg ServerConfig, log *slog.Logger) (*worker.Agent, error) {
	host, _ := os.Hostname()
	capa := cfg.LocalCapacity
	if capa.CPU <= 0 {
		capa.CPU = float64(runtime.NumCPU())
	}
	if capa.Slots <= 0 {
		capa.Slots = localSlotsPerCPU * max(1, int(math.Ceil(capa.CPU)))
	}
	log.Info("local worker offers", "cpu", capa.CPU, "memory_mb", capa.MemoryMB, "slots", capa.Slots)
	handlers := map[string]worker.Handler{"noop": worker.Noop}
	maps.Copy(handlers, cfg.LocalHandlers)
	w, err := worker.New(worker.Config{
		Server:   srv,
		ID:       "local-" + host,
		Capacity: capa,
		Handlers: handlers,
		Commands: true,
		PassEnv:  cfg.LocalPassEnv,
		Limits:   true,
		Guard:    cfg.LocalGuard,
		Logger:   log.With("component", "local-worker"),
	})
	if err != nil {
		return nil, fmt.Errorf("local worker: %w", err)
	}
	return w, nil
}
