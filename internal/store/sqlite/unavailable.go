package sqlite

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/stint-dev/stint/internal/model"
)

// classify returns err as a model.UnavailableError when it says the database cannot take
// the request now: the disk is full (SQLITE_FULL, ENOSPC, a quota), the disk failed or went
// read-only (SQLITE_IOERR, SQLITE_READONLY, EIO, EROFS), the file cannot be opened, memory
// ran out, or the database stayed locked past the busy timeout. Other errors, and the end
// of the caller's context, are returned as they are.
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
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary code of an extended one
		case sqlite3.SQLITE_FULL:
			return "disk full"
		case sqlite3.SQLITE_IOERR:
			return "disk I/O error"
		case sqlite3.SQLITE_READONLY:
			return "database is read-only"
		case sqlite3.SQLITE_CANTOPEN:
			return "database cannot be opened"
		case sqlite3.SQLITE_NOMEM:
			return "out of memory"
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return "database busy"
		}
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "disk full"
	case errors.Is(err, syscall.EIO):
		return "disk I/O error"
	case errors.Is(err, syscall.EROFS):
		return "database is read-only"
	}
	return ""
}

// ProbeWrite commits a transaction that sets the database header's user version (unused by
// stint, set to the 0 it holds): one page written to the write-ahead log, through the writer,
// as every write goes. A disk that cannot take it is a model.ErrUnavailable (disk full).
func (s *Store) ProbeWrite(ctx context.Context) error {
	err := s.write(ctx, func(t *wtx) error {
		_, err := t.tx.ExecContext(t.ctx, `PRAGMA user_version = 0`)
		return err
	})
	if err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	return nil
}
