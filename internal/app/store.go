package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/postgres"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

// Engine names a store engine.
type Engine string

// Store engines.
const (
	EngineSQLite   Engine = "sqlite"
	EnginePostgres Engine = "postgres"
)

// OpenStore opens the store that url names: postgres:// or postgresql:// for PostgreSQL,
// sqlite:///path.db for SQLite, and empty for SQLite in dataDir/stint.db. Migrations are
// applied before it returns.
func OpenStore(ctx context.Context, url, dataDir string, log *slog.Logger) (store.Store, Engine, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		s, err := postgres.Open(ctx, postgres.Config{URL: url, Logger: log})
		if err != nil {
			return nil, "", fmt.Errorf("open postgres store: %w", err)
		}
		return s, EnginePostgres, nil
	case url == "":
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, "", fmt.Errorf("create data directory: %w", err)
		}
		url = "sqlite://" + filepath.Join(dataDir, "stint.db")
		fallthrough
	case strings.HasPrefix(url, "sqlite://"):
		cfg, err := sqlite.ParseURL(url)
		if err != nil {
			return nil, "", fmt.Errorf("store url: %w", err)
		}
		if dir := filepath.Dir(cfg.Path); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, "", fmt.Errorf("create store directory: %w", err)
			}
		}
		cfg.Logger = log
		s, err := sqlite.Open(ctx, cfg)
		if err != nil {
			return nil, "", fmt.Errorf("open sqlite store: %w", err)
		}
		return s, EngineSQLite, nil
	}
	return nil, "", fmt.Errorf("store url %q: want sqlite:///path/file.db or a postgres:// URL", url)
}

// newNotifier returns the notifier that carries wake-ups between the servers sharing st,
// or nil when st is one server's own (SQLite).
func newNotifier(ctx context.Context, st store.Store) (engine.Notifier, error) {
	pg, ok := st.(*postgres.Store)
	if !ok {
		return nil, nil
	}
	n, err := pg.NewNotifier(ctx, postgres.NotifierConfig{})
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	return n, nil
}
