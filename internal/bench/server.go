package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/app"
	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/worker"
)

// benchServer is a server the bench started in its own process.
type benchServer struct {
	url       string
	storeName string
	storeURL  string // the scratch PostgreSQL database; empty on SQLite
	stop      func()
}

// startServer starts a server on a fresh store, with a local worker that runs handlers (the
// bench's recording handler) unless cfg.Workers asks for workers of the bench's own.
func startServer(ctx context.Context, cfg Config, handlers map[string]worker.Handler) (*benchServer, error) {
	dataDir, err := os.MkdirTemp("", "stint-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	cleanups := []func(){func() { os.RemoveAll(dataDir) }}
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	storeURL, storeName := "", "sqlite (synchronous=FULL, WAL)"
	switch {
	case cfg.Store == "" || cfg.Store == "sqlite":
	case strings.HasPrefix(cfg.Store, "sqlite://"):
		storeURL = cfg.Store
	case strings.HasPrefix(cfg.Store, "postgres://"), strings.HasPrefix(cfg.Store, "postgresql://"):
		u, drop, err := scratchDatabase(ctx, cfg.Store)
		if err != nil {
			cleanup()
			return nil, err
		}
		cleanups = append(cleanups, drop)
		storeURL, storeName = u, "postgres"
	default:
		cleanup()
		return nil, fmt.Errorf("--store %q: want sqlite, sqlite:///path or a postgres:// URL", cfg.Store)
	}
	srvCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.RunServer(srvCtx, app.ServerConfig{
			Addr:          "127.0.0.1:0",
			OpenAuth:      true, // a benchmark's own server on loopback
			DataDir:       dataDir,
			StoreURL:      storeURL,
			LocalWorker:   cfg.Workers == 0,
			LocalCapacity: apitype.Capacity{Slots: cfg.Slots},
			LocalHandlers: handlers,
			Logger:        cfg.Logger,
			Ready:         func(addr string) { ready <- addr },
			Retention:     benchRetention(cfg.Retention, cfg.RetentionPause),
		})
	}()
	select {
	case addr := <-ready:
		srv := &benchServer{url: "http://" + addr, storeName: storeName}
		if storeName == "postgres" {
			srv.storeURL = storeURL
		}
		cleanups = append(cleanups, func() { cancel(); <-done })
		srv.stop = cleanup
		return srv, nil
	case err := <-done:
		cancel()
		cleanup()
		return nil, fmt.Errorf("start server: %w", err)
	case <-time.After(60 * time.Second):
		cancel()
		cleanup()
		return nil, fmt.Errorf("start server: not ready after 60s")
	}
}

// benchRetention is the server's retention under --retention d: finished runs go d after
// they finished, every one of them (no run kept per job), in the server's default batches
// with pause between them (0: the server's default), looked for every 100 ms so that
// deleting starts as soon as there is history.
func benchRetention(d, pause time.Duration) app.Retention {
	if d <= 0 {
		return app.Retention{}
	}
	if pause <= 0 {
		pause = app.DefaultRetainPause
	}
	return app.Retention{Policy: engine.RetentionPolicy{Runs: d}, Batch: app.DefaultRetainBatch,
		Pause: pause, Interval: 100 * time.Millisecond}
}

// scratchDatabase creates an empty database on the PostgreSQL server of base and returns its
// URL and a function that drops it.
func scratchDatabase(ctx context.Context, base string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("connect to %s: %w", base, err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("stint_bench_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create scratch database: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("parse %s: %w", base, err)
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}
