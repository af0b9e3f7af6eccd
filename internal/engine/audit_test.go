package engine

import (
	"context"
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

// auditWrites is a store that reports the targets of each AppendAudit call.
type auditWrites struct {
	store.Store
	writes chan []string
}

func (s *auditWrites) AppendAudit(ctx context.Context, p *store.AppendAuditParams) error {
	targets := make([]string, len(p.Entries))
	for i, entry := range p.Entries {
		targets[i] = entry.Target
	}
	s.writes <- targets
	return s.Store.AppendAudit(ctx, p)
}

// TestAuditLinger: with AuditLinger, an entry after a quiet spell is written at once; the
// entries that come within AuditLinger of a write wait for it to pass and go in one write;
// Stop does not wait for the linger.
func TestAuditLinger(t *testing.T) {
	t.Parallel()
	const linger = 20 * time.Millisecond
	st := &auditWrites{writes: make(chan []string, 10)}
	e, b := setup(t, func(c *Config) {
		c.AuditLinger = linger
		st.Store = c.Store
		c.Store = st
	})
	record := func(target string) {
		t.Helper()
		require.NoError(t, e.RecordAudit(t.Context(), &model.AuditEntry{Actor: "dev", Action: "job.update", Target: target}))
	}
	written := func() []string {
		t.Helper()
		select {
		case w := <-st.writes:
			return w
		case <-time.After(10 * time.Second):
			t.Fatal("no audit write within 10s")
			return nil
		}
	}
	record("a")
	require.Equal(t, []string{"a"}, written(), "the first entry is written at once")

	record("b")
	waitTimer(t, b, t0.Add(linger)) // the writer waits for the linger to pass
	record("c")
	require.Empty(t, st.writes, "nothing is written before the linger passed")
	b.clk.Set(t0.Add(linger))
	require.Equal(t, []string{"b", "c"}, written(), "what came meanwhile goes in one write")

	record("d")
	waitTimer(t, b, t0.Add(2*linger))
	e.Stop()
	require.Equal(t, []string{"d"}, written(), "Stop writes what waits without waiting for the linger")
}
