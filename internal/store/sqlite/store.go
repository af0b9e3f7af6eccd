package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

var _ store.Store = (*Store)(nil)

// ErrLocked is returned by Open when another Store, in this process or another, has the
// database open.
var ErrLocked = errors.New("database locked by another stint process")

// Config says where the database is and how hard to sync it.
type Config struct {
	// Path is the database file; it is created when missing. It must not contain '?'.
	Path string
	// Synchronous is SQLite's synchronous setting: FULL (default: a commit survives power
	// loss), NORMAL (a commit may be lost on power loss, never on a process crash), OFF or
	// EXTRA.
	Synchronous string
	// Logger receives migration and maintenance messages; nil discards them.
	Logger *slog.Logger
	// Readers is the size of the read pool; 0 means 4.
	Readers int
}

// Store is store.Store on SQLite. It is safe for concurrent use.
type Store struct {
	w   *sql.DB // the one writer connection
	r   *sql.DB // query-only readers
	log *slog.Logger
	ws  *writeStmts
	rs  *readStmts
	// lock is held from Open to Close: one Store per database.
	lock *dirLock
}

// ParseURL turns a store URL into a Config: sqlite:///abs/path.db or sqlite://rel/path.db,
// with an optional ?synchronous=full|normal|off|extra.
func ParseURL(u string) (Config, error) {
	p, err := url.Parse(u)
	if err != nil {
		return Config{}, fmt.Errorf("parse sqlite url: %w", err)
	}
	if p.Scheme != "sqlite" {
		return Config{}, fmt.Errorf("parse sqlite url: scheme %q is not sqlite", p.Scheme)
	}
	var cfg Config
	switch {
	case p.Opaque != "": // sqlite:rel.db
		cfg.Path = p.Opaque
	default:
		cfg.Path = p.Host + p.Path
	}
	if cfg.Path == "" {
		return Config{}, errors.New("parse sqlite url: no path")
	}
	for k, vs := range p.Query() {
		switch k {
		case "synchronous":
			s, err := syncMode(vs[len(vs)-1])
			if err != nil {
				return Config{}, fmt.Errorf("parse sqlite url: %w", err)
			}
			cfg.Synchronous = s
		default:
			return Config{}, fmt.Errorf("parse sqlite url: unknown parameter %q", k)
		}
	}
	return cfg, nil
}

func syncMode(s string) (string, error) {
	switch u := strings.ToUpper(s); u {
	case "":
		return "FULL", nil
	case "OFF", "NORMAL", "FULL", "EXTRA":
		return u, nil
	}
	return "", fmt.Errorf("synchronous %q is not one of off, normal, full, extra", s)
}

// Open opens (creating if needed) the database at cfg.Path and migrates it to the newest
// schema. It first locks the database (flock on cfg.Path + ".lock", held until Close): a
// database another Store has open, in this process or another, is refused with ErrLocked,
// naming its directory and, when known, the holder's pid.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("open sqlite: no path")
	}
	if strings.ContainsRune(cfg.Path, '?') {
		return nil, fmt.Errorf("open sqlite: path %q contains '?'", cfg.Path)
	}
	syncm, err := syncMode(cfg.Synchronous)
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	lk, err := lock(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	s, err := open(ctx, cfg, syncm)
	if err != nil {
		return nil, errors.Join(err, lk.release())
	}
	s.lock = lk
	return s, nil
}

// open opens the locked database.
func open(ctx context.Context, cfg Config, syncm string) (*Store, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	readers := cfg.Readers
	if readers <= 0 {
		readers = 4
	}

	common := "_pragma=busy_timeout(10000)&_pragma=temp_store(memory)"
	w, err := sql.Open("sqlite", cfg.Path+"?"+common+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous("+syncm+")&_pragma=cache_size(-65536)"+
		"&_pragma=wal_autocheckpoint(4000)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open sqlite writer: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Store{w: w, log: log}
	if err := s.migrate(ctx); err != nil {
		_ = w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", cfg.Path+"?"+common+"&_pragma=cache_size(-16384)&_pragma=query_only(1)")
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open sqlite readers: %w", err)
	}
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	r.SetConnMaxIdleTime(0)
	r.SetConnMaxLifetime(0)
	s.r = r
	if s.ws, err = prepareWrite(ctx, w); err != nil {
		_ = s.Close()
		return nil, err
	}
	if s.rs, err = prepareRead(ctx, r); err != nil {
		_ = s.Close()
		return nil, err
	}
	var slots int
	if err := w.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM run_slots)`).Scan(&slots); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	s.ws.slotsUsed.Store(slots != 0)
	return s, nil
}

// Ping checks both pools answer.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite readers: %w", classify(err))
	}
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite writer: %w", classify(err))
	}
	return nil
}

// Close closes the statements and both pools.
func (s *Store) Close() error {
	var errs []error
	if s.ws != nil {
		errs = append(errs, s.ws.close())
	}
	if s.rs != nil {
		errs = append(errs, s.rs.close())
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close(), s.lock.release())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sqlite: %w", err)
	}
	return nil
}

// wtx is one writer transaction with the prepared statements bound to it.
type wtx struct {
	ctx    context.Context
	tx     *sql.Tx
	ws     *writeStmts
	later  [][2]string // statements to prepare on the writer after the transaction
	queues []string    // queues this transaction created or found (known once it commits)
}

// stmt binds a prepared writer statement to the transaction. The writer has one
// connection, so database/sql reuses the statement prepared on it.
func (t *wtx) stmt(s *sql.Stmt) *sql.Stmt { return t.tx.StmtContext(t.ctx, s) }

// write runs fn in one writer transaction (BEGIN IMMEDIATE) and commits it. An error that
// says the database cannot take writes (disk full, ...) is a model.ErrUnavailable
// (classify), whatever in fn returned it.
func (s *Store) write(ctx context.Context, fn func(t *wtx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", classify(err))
	}
	// Statements inside the transaction run without cancellation: the driver would start a
	// watcher goroutine for each one, and the transaction as a whole still ends when ctx
	// does (database/sql rolls it back).
	t := &wtx{ctx: context.WithoutCancel(ctx), tx: tx, ws: s.ws}
	defer func() {
		if len(t.later) > 0 {
			s.ws.prepareLater(t.ctx, t.later)
		}
	}()
	if err := fn(t); err != nil {
		_ = tx.Rollback()
		return classify(abandoned(ctx, err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", mapErr(abandoned(ctx, err)))
	}
	if len(t.queues) > 0 {
		s.ws.queuesExist(t.queues)
	}
	return nil
}

// abandoned words err, from a write transaction, as the end of ctx when ctx ended: database/sql
// rolls a transaction back when its context ends, and the statements after that fail with
// sql.ErrTxDone ("transaction has already been committed or rolled back"), which reads like
// a bug in the store rather than a caller that stopped waiting.
func abandoned(ctx context.Context, err error) error {
	if errors.Is(err, sql.ErrTxDone) && ctx.Err() != nil {
		return fmt.Errorf("transaction abandoned: %w", context.Cause(ctx))
	}
	return err
}

// mapErr translates driver errors into the model's sentinels (classify included).
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	err = classify(err)
	if errors.Is(err, sql.ErrNoRows) {
		return model.ErrNotFound
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %s", model.ErrConflict, se.Error())
		}
	}
	return err
}

// Times are INTEGER microseconds since the epoch, UTC.

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// norm returns t as stored: UTC, truncated to the microsecond.
func norm(t time.Time) time.Time { return fromMicros(micros(t)) }

func normp(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	n := norm(*t)
	return &n
}

// nullStr stores "" as NULL (optional keys, so that partial unique indexes skip them).
func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

var _ store.WriteProber = (*Store)(nil)
