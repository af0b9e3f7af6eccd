package engine

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

// wakeProbe is a SQLite store that records, when a queue change commits, whether the
// engine's workers were woken by then and whether the change was visible to readers.
type wakeProbe struct {
	*sqlite.Store
	work      func() <-chan struct{} // the channel a sleeping worker waits on
	woken     bool
	committed bool
}

func (p *wakeProbe) UpdateQueue(ctx context.Context, up *store.UpdateQueueParams) (*model.Queue, error) {
	committed := up.Committed
	up.Committed = func() {
		wait := p.work()
		committed()
		select {
		case <-wait:
			p.woken = true
		default:
		}
		q, err := p.GetQueue(ctx, &store.GetQueueParams{Name: up.Name})
		p.committed = err == nil && !q.Paused
	}
	return p.Store.UpdateQueue(ctx, up)
}

// TestResumeWakesWorkersBeforeDepth checks that resuming a queue wakes the workers as soon
// as the change is committed, before the store counts the depth of the answer.
func TestResumeWakesWorkersBeforeDepth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "stint.db")})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	probe := &wakeProbe{Store: st}
	clk := clock.NewFake(t0)
	e := New(Config{Store: probe, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	probe.work = e.work.Wait
	require.NoError(t, e.Start(ctx))
	t.Cleanup(e.Stop)

	paused := true
	_, err = e.UpdateQueue(ctx, &store.UpdateQueueParams{Name: model.DefaultQueue, Paused: &paused})
	require.NoError(t, err)
	submit(t, e, &testBundle{clk: clk, store: st}, t0, model.RetryPolicy{})

	paused = false
	q, err := e.UpdateQueue(ctx, &store.UpdateQueueParams{Name: model.DefaultQueue, Paused: &paused})
	require.NoError(t, err)
	require.True(t, probe.committed, "the callback came after the commit")
	require.True(t, probe.woken, "workers were woken in the callback")
	require.False(t, q.Paused)
	require.Equal(t, 1, q.Depth[model.RunQueued], "the answer still counts the depth")
}
