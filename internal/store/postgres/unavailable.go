package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stint-dev/stint/internal/model"
)

// classify returns err as a model.UnavailableError when it says the database cannot serve
// now: the server is unreachable or refused the connection, a connection broke, the server
// is shutting down or starting, it is out of disk space, memory or connections, or it is a
// read-only standby (after a failover). Other errors, and the end of the caller's context,
// are returned as they are.
func classify(err error) error {
	if err == nil || errors.Is(err, model.ErrUnavailable) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if what := unavailable(err); what != "" {
		return model.Unavailable(what, err)
	}
	return err
}

// unavailable says what made the database unavailable, or "" when err is not such an error.
func unavailable(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch code := pgErr.Code; {
		case code == "53100":
			return "database disk full"
		case strings.HasPrefix(code, "53"): // out of memory, too many connections
			return "database out of resources"
		case strings.HasPrefix(code, "08"): // connection exception
			return "database unreachable"
		case strings.HasPrefix(code, "57P"): // admin shutdown, crash shutdown, cannot connect now
			return "database shutting down or starting"
		case code == "25006": // read-only transaction: a standby
			return "database is read-only"
		case code == "58030":
			return "database disk I/O error"
		}
		return ""
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.Is(err, syscall.ECONNREFUSED):
		return "database unreachable"
	case errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.As(err, &netErr),
		pgconn.SafeToRetry(err):
		return "database connection lost"
	}
	return ""
}

// classifiedPool is a connection pool with every error it returns classified: the
// statements the store runs on the pool directly report an unreachable database as
// model.ErrUnavailable. (Transactions are classified as a whole, by inTx.)
type classifiedPool struct{ *pgxpool.Pool }

func (p classifiedPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := p.Pool.Exec(ctx, sql, args...)
	return tag, classify(err)
}

func (p classifiedPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := p.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, classify(err)
	}
	return classifiedRows{rows}, nil
}

func (p classifiedPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return classifiedRow{p.Pool.QueryRow(ctx, sql, args...)}
}

func (p classifiedPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return classifiedBatch{p.Pool.SendBatch(ctx, b)}
}

func (p classifiedPool) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := p.Pool.Begin(ctx)
	return tx, classify(err)
}

func (p classifiedPool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := p.Pool.BeginTx(ctx, opts)
	return tx, classify(err)
}

func (p classifiedPool) Ping(ctx context.Context) error { return classify(p.Pool.Ping(ctx)) }

type classifiedRows struct{ pgx.Rows }

func (r classifiedRows) Err() error             { return classify(r.Rows.Err()) }
func (r classifiedRows) Scan(dest ...any) error { return classify(r.Rows.Scan(dest...)) }
func (r classifiedRows) Values() ([]any, error) { v, err := r.Rows.Values(); return v, classify(err) }

type classifiedRow struct{ pgx.Row }

func (r classifiedRow) Scan(dest ...any) error { return classify(r.Row.Scan(dest...)) }

type classifiedBatch struct{ pgx.BatchResults }

func (b classifiedBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, classify(err)
}

func (b classifiedBatch) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	if err != nil {
		return nil, classify(err)
	}
	return classifiedRows{rows}, nil
}

func (b classifiedBatch) QueryRow() pgx.Row { return classifiedRow{b.BatchResults.QueryRow()} }
func (b classifiedBatch) Close() error      { return classify(b.BatchResults.Close()) }

// ProbeWrite commits a transaction that takes a transaction id, which a commit must write
// to the WAL: a database that cannot write (disk full, a read-only standby, unreachable)
// answers a model.ErrUnavailable.
func (s *Store) ProbeWrite(ctx context.Context) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT txid_current()`)
		return err
	})
	if err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	return nil
}
