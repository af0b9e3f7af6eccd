package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// TestRecordAuditWritesInOrderAndDrainsAtStop: entries queued by RecordAudit reach the
// store in the order they were recorded, with their time and an id; those still queued
// when the engine stops are written before Stop returns.
func TestRecordAuditWritesInOrderAndDrainsAtStop(t *testing.T) {
	t.Parallel()
	e, b := setup(t)
	const n = 500
	for i := range n {
		b.clk.Advance(time.Millisecond) // ids order by millisecond, then at random
		require.NoError(t, e.RecordAudit(t.Context(), &model.AuditEntry{Actor: "dev", Action: "job.update", Target: fmt.Sprintf("job:%d", i)}))
	}
	e.Stop()
	entries, err := e.store.ListAudit(t.Context(), &store.ListAuditParams{Limit: 2 * n})
	require.NoError(t, err)
	require.Len(t, entries, n)
	for i, entry := range entries { // newest first
		require.Equal(t, fmt.Sprintf("job:%d", n-1-i), entry.Target)
		require.Equal(t, t0.Add(time.Duration(n-i)*time.Millisecond), entry.At)
		require.NotEmpty(t, entry.ID)
	}
	require.Error(t, e.RecordAudit(t.Context(), &model.AuditEntry{Action: "job.update"}), "a stopped engine records nothing")
}
