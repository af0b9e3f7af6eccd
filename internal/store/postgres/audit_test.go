package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// TestBigAuditEntriesUseLZ4: an audit entry too big to keep inline (a batch's answer) is
// compressed with lz4 (migration 18), where the server has it.
func TestBigAuditEntriesUseLZ4(t *testing.T) {
	s := openTest(t)
	t.Parallel()
	ctx := context.Background()
	var lz4 bool
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT 'lz4' = ANY(enumvals) FROM pg_settings
		WHERE name = 'default_toast_compression'`).Scan(&lz4))
	if !lz4 {
		t.Skip("this PostgreSQL has no lz4: migration 18 leaves pglz")
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	items := make([]string, 1000)
	for i := range items {
		items[i] = fmt.Sprintf(`{"job_id":%q,"run_id":%q}`, id.New(now), id.New(now))
	}
	after := json.RawMessage(`{"items":[` + strings.Join(items, ",") + `]}`)
	e := &model.AuditEntry{ID: id.New(now), At: now, Actor: "dev", Action: "job.create_batch", Target: "job", After: after}
	require.NoError(t, s.AppendAudit(ctx, &store.AppendAuditParams{Entries: []*model.AuditEntry{e}}))
	var method *string
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT pg_column_compression(after) FROM audit_log WHERE id = $1`, e.ID).Scan(&method))
	require.NotNil(t, method, "an entry of %d bytes is compressed", len(after))
	require.Equal(t, "lz4", *method)
}
