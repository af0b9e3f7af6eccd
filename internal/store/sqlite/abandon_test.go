package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A write whose caller stops waiting mid-transaction says so, not "transaction has already
// been committed or rolled back".
func TestAbandonedWriteNamesTheCallersEnd(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "a.db"), Synchronous: "OFF"})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	err = s.write(ctx, func(tx *wtx) error {
		cancel()
		for { // until database/sql has rolled the transaction back
			if _, err := tx.tx.ExecContext(tx.ctx, `UPDATE workers SET state = 'x'`); err != nil {
				return err
			}
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "transaction abandoned")
}
