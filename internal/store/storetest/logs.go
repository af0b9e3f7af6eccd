package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

func testLogs(t *testing.T, open OpenFunc) {
	t.Run("AppendAndRead", func(t *testing.T) {
		f := setup(t, open)
		_, r := f.submit("a")
		_, other := f.submit("b")
		chunk := func(runID string, attempt int, seq int64, stream model.LogStream, data string) model.LogChunk {
			return model.LogChunk{RunID: runID, Attempt: attempt, Seq: seq, Stream: stream, Data: []byte(data), CreatedAt: at(time.Duration(seq) * time.Second)}
		}
		require.NoError(t, f.s.AppendLogs(f.ctx, &store.AppendLogsParams{Chunks: []model.LogChunk{
			chunk(r.ID, 1, 2, model.Stderr, "two"),
			chunk(r.ID, 1, 1, model.Stdout, "one\n"),
			chunk(r.ID, 2, 1, model.Stdout, "attempt two"),
			chunk(other.ID, 1, 1, model.Stdout, "other"),
		}}))
		require.NoError(t, f.s.AppendLogs(f.ctx, &store.AppendLogsParams{Chunks: []model.LogChunk{
			chunk(r.ID, 1, 4, model.Stdout, "\x00\xffbinary"),
			chunk(r.ID, 1, 3, model.Stdout, ""),
		}}))
		require.NoError(t, f.s.AppendLogs(f.ctx, &store.AppendLogsParams{}))

		read := func(p store.ReadLogsParams) []model.LogChunk {
			t.Helper()
			cs, err := f.s.ReadLogs(f.ctx, &p)
			require.NoError(t, err)
			return cs
		}
		all := read(store.ReadLogsParams{RunID: r.ID, Attempt: 1})
		require.Len(t, all, 4)
		for i, c := range all {
			require.Equal(t, int64(i+1), c.Seq)
			require.Equal(t, r.ID, c.RunID)
			require.Equal(t, 1, c.Attempt)
			require.Equal(t, at(time.Duration(i+1)*time.Second), c.CreatedAt)
			require.Equal(t, time.UTC, c.CreatedAt.Location())
		}
		require.Equal(t, chunk(r.ID, 1, 1, model.Stdout, "one\n"), all[0])
		require.Equal(t, model.Stderr, all[1].Stream)
		require.Empty(t, all[2].Data)
		require.Equal(t, []byte("\x00\xffbinary"), all[3].Data)

		after := read(store.ReadLogsParams{RunID: r.ID, Attempt: 1, AfterSeq: 2})
		require.Equal(t, []int64{3, 4}, seqs(after))
		require.Equal(t, []int64{2, 3}, seqs(read(store.ReadLogsParams{RunID: r.ID, Attempt: 1, AfterSeq: 1, Limit: 2})))
		require.Empty(t, read(store.ReadLogsParams{RunID: r.ID, Attempt: 1, AfterSeq: 4}))
		require.Equal(t, []model.LogChunk{chunk(r.ID, 2, 1, model.Stdout, "attempt two")}, read(store.ReadLogsParams{RunID: r.ID, Attempt: 2}))
		require.Empty(t, read(store.ReadLogsParams{RunID: r.ID, Attempt: 3}))
		require.Equal(t, "other", string(read(store.ReadLogsParams{RunID: other.ID, Attempt: 1})[0].Data))
	})

	t.Run("ResendIsIgnored", func(t *testing.T) {
		f := setup(t, open)
		_, r := f.submit("a")
		c := model.LogChunk{RunID: r.ID, Attempt: 1, Seq: 1, Stream: model.Stdout, Data: []byte("first"), CreatedAt: t0}
		require.NoError(t, f.s.AppendLogs(f.ctx, &store.AppendLogsParams{Chunks: []model.LogChunk{c}}))
		resent := c
		resent.Data = []byte("second")
		next := c
		next.Seq = 2
		require.NoError(t, f.s.AppendLogs(f.ctx, &store.AppendLogsParams{Chunks: []model.LogChunk{resent, next}}))
		cs, err := f.s.ReadLogs(f.ctx, &store.ReadLogsParams{RunID: r.ID, Attempt: 1})
		require.NoError(t, err)
		require.Equal(t, []int64{1, 2}, seqs(cs))
		require.Equal(t, "first", string(cs[0].Data), "the first write of a chunk stands")
	})

	t.Run("CapPerAttempt", func(t *testing.T) {
		f := setup(t, open)
		_, r := f.submit("a")
		chunk := func(attempt int, seq int64, n int) model.LogChunk {
			return model.LogChunk{RunID: r.ID, Attempt: attempt, Seq: seq, Stream: model.Stdout, Data: make([]byte, n), CreatedAt: t0}
		}
		appendCapped := func(cs ...model.LogChunk) {
			t.Helper()
			require.NoError(t, f.s.AppendLogs(f.ctx, &store.AppendLogsParams{Chunks: cs, MaxAttemptBytes: 100}))
		}
		stored := func(attempt int) []int64 {
			t.Helper()
			cs, err := f.s.ReadLogs(f.ctx, &store.ReadLogsParams{RunID: r.ID, Attempt: attempt})
			require.NoError(t, err)
			return seqs(cs)
		}
		appendCapped(chunk(1, 1, 60), chunk(1, 2, 30), chunk(1, 3, 30), chunk(1, 4, 5), chunk(2, 1, 100))
		require.Equal(t, []int64{1, 2}, stored(1), "past the cap a chunk and the ones after it are dropped")
		require.Equal(t, []int64{1}, stored(2), "each attempt has its own cap")
		appendCapped(chunk(1, 5, 10))
		require.Equal(t, []int64{1, 2, 5}, stored(1), "up to the cap exactly")
		appendCapped(chunk(1, 6, 1), chunk(2, 2, 1))
		require.Equal(t, []int64{1, 2, 5}, stored(1))
		require.Equal(t, []int64{1}, stored(2))
		require.NoError(t, f.s.AppendLogs(f.ctx, &store.AppendLogsParams{Chunks: []model.LogChunk{chunk(1, 7, 1000)}}))
		require.Equal(t, []int64{1, 2, 5, 7}, stored(1), "no cap without MaxAttemptBytes")
	})

	t.Run("UnknownRun", func(t *testing.T) {
		f := setup(t, open)
		_, r := f.submit("a")
		err := f.s.AppendLogs(f.ctx, &store.AppendLogsParams{Chunks: []model.LogChunk{
			{RunID: r.ID, Attempt: 1, Seq: 1, Stream: model.Stdout, Data: []byte("x"), CreatedAt: t0},
			{RunID: "missing", Attempt: 1, Seq: 1, Stream: model.Stdout, Data: []byte("x"), CreatedAt: t0},
		}})
		require.ErrorIs(t, err, model.ErrNotFound)
		cs, err := f.s.ReadLogs(f.ctx, &store.ReadLogsParams{RunID: r.ID, Attempt: 1})
		require.NoError(t, err)
		require.Empty(t, cs, "the batch is one transaction")
		_, err = f.s.ReadLogs(f.ctx, &store.ReadLogsParams{RunID: "missing", Attempt: 1})
		require.ErrorIs(t, err, model.ErrNotFound)
	})
}

func seqs(cs []model.LogChunk) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Seq
	}
	return out
}
