package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// appendLogs appends chunks and requires every one accepted.
func (f *fx) appendLogs(chunks ...model.LogChunk) {
	f.t.Helper()
	refused, err := f.s.AppendLogs(f.ctx, &store.AppendLogsParams{Chunks: chunks})
	require.NoError(f.t, err)
	require.Len(f.t, refused, len(chunks))
	for i, e := range refused {
		require.NoError(f.t, e, "chunk %d", i)
	}
}

func testLogs(t *testing.T, open OpenFunc) {
	// chunk is a chunk of lease l's attempt, written by its worker.
	chunk := func(l *model.Lease, seq int64, stream model.LogStream, data string) model.LogChunk {
		return model.LogChunk{RunID: l.Run.ID, Attempt: l.Run.Attempt, Seq: seq, Stream: stream, Data: []byte(data),
			CreatedAt: at(time.Duration(seq) * time.Second), Token: l.Token}
	}
	read := func(f *fx, p store.ReadLogsParams) []model.LogChunk {
		f.t.Helper()
		cs, err := f.s.ReadLogs(f.ctx, &p)
		require.NoError(f.t, err)
		return cs
	}

	t.Run("AppendAndRead", func(t *testing.T) {
		f := setup(t, open)
		f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 2 })
		f.submit("b")
		l1 := f.leaseOne("w", t0)
		other := f.leaseOne("w", t0)
		f.appendLogs(
			chunk(l1, 2, model.Stderr, "two"),
			chunk(l1, 1, model.Stdout, "one\n"),
			chunk(other, 1, model.Stdout, "other"),
		)
		f.appendLogs(
			chunk(l1, 4, model.Stdout, "\x00\xffbinary"),
			chunk(l1, 3, model.Stdout, ""),
		)
		refused, err := f.s.AppendLogs(f.ctx, &store.AppendLogsParams{})
		require.NoError(t, err)
		require.Empty(t, refused)
		// The attempt fails and is retried at once: attempt 2 writes its own log.
		f.finish(l1, model.AttemptFailed, intp(1), at(time.Second))
		l2 := f.leaseOne("w", at(2*time.Second))
		require.Equal(t, l1.Run.ID, l2.Run.ID)
		require.Equal(t, 2, l2.Run.Attempt)
		f.appendLogs(chunk(l2, 1, model.Stdout, "attempt two"))

		r := l1.Run
		all := read(f, store.ReadLogsParams{RunID: r.ID, Attempt: 1})
		require.Len(t, all, 4)
		for i, c := range all {
			require.Equal(t, int64(i+1), c.Seq)
			require.Equal(t, r.ID, c.RunID)
			require.Equal(t, 1, c.Attempt)
			require.Equal(t, at(time.Duration(i+1)*time.Second), c.CreatedAt)
			require.Equal(t, time.UTC, c.CreatedAt.Location())
		}
		first := chunk(l1, 1, model.Stdout, "one\n")
		first.Token = ""
		require.Equal(t, first, all[0], "read back without the writer's token")
		require.Equal(t, model.Stderr, all[1].Stream)
		require.Empty(t, all[2].Data)
		require.Equal(t, []byte("\x00\xffbinary"), all[3].Data)

		after := read(f, store.ReadLogsParams{RunID: r.ID, Attempt: 1, AfterSeq: 2})
		require.Equal(t, []int64{3, 4}, seqs(after))
		require.Equal(t, []int64{2, 3}, seqs(read(f, store.ReadLogsParams{RunID: r.ID, Attempt: 1, AfterSeq: 1, Limit: 2})))
		require.Empty(t, read(f, store.ReadLogsParams{RunID: r.ID, Attempt: 1, AfterSeq: 4}))
		two := read(f, store.ReadLogsParams{RunID: r.ID, Attempt: 2})
		require.Len(t, two, 1)
		require.Equal(t, "attempt two", string(two[0].Data))
		require.Empty(t, read(f, store.ReadLogsParams{RunID: r.ID, Attempt: 3}))
		require.Equal(t, "other", string(read(f, store.ReadLogsParams{RunID: other.Run.ID, Attempt: 1})[0].Data))
	})

	t.Run("ResendIsIgnored", func(t *testing.T) {
		f := setup(t, open)
		f.submit("a")
		l := f.leaseOne("w", t0)
		c := chunk(l, 1, model.Stdout, "first")
		f.appendLogs(c)
		resent := c
		resent.Data = []byte("second")
		next := c
		next.Seq = 2
		f.appendLogs(resent, next)
		cs := read(f, store.ReadLogsParams{RunID: l.Run.ID, Attempt: 1})
		require.Equal(t, []int64{1, 2}, seqs(cs))
		require.Equal(t, "first", string(cs[0].Data), "the first write of a chunk stands")
	})

	t.Run("CapPerAttempt", func(t *testing.T) {
		f := setup(t, open)
		f.submit("a", func(j *model.Job) { j.Spec.Retry.MaxAttempts = 2 })
		f.submit("b")
		l1 := f.leaseOne("w", t0)
		other := f.leaseOne("w", t0)
		sized := func(l *model.Lease, seq int64, n int) model.LogChunk {
			return chunk(l, seq, model.Stdout, strings.Repeat("x", n))
		}
		appendCapped := func(cs ...model.LogChunk) []error {
			t.Helper()
			refused, err := f.s.AppendLogs(f.ctx, &store.AppendLogsParams{Chunks: cs, MaxAttemptBytes: 100})
			require.NoError(t, err)
			require.Len(t, refused, len(cs))
			return refused
		}
		stored := func(l *model.Lease) []int64 {
			t.Helper()
			return seqs(read(f, store.ReadLogsParams{RunID: l.Run.ID, Attempt: l.Run.Attempt}))
		}
		forged := sized(l1, 99, 1000)
		forged.Token = "guess"
		refused := appendCapped(forged, sized(l1, 1, 60), sized(l1, 2, 30), sized(l1, 3, 30), sized(l1, 4, 5), sized(other, 1, 100))
		require.ErrorIs(t, refused[0], model.ErrLeaseLost, "the lease is checked before the cap")
		for i, e := range refused[1:] {
			require.NoError(t, e, "chunk %d: a chunk dropped for the cap is not refused", i+1)
		}
		require.Equal(t, []int64{1, 2}, stored(l1), "past the cap a chunk and the ones after it are dropped; a refused chunk counts for nothing")
		require.Equal(t, []int64{1}, stored(other), "each run has its own cap")
		appendCapped(sized(l1, 5, 10))
		require.Equal(t, []int64{1, 2, 5}, stored(l1), "up to the cap exactly")
		for i, e := range appendCapped(sized(l1, 6, 1), sized(other, 2, 1)) {
			require.NoError(t, e, "chunk %d", i)
		}
		require.Equal(t, []int64{1, 2, 5}, stored(l1))
		require.Equal(t, []int64{1}, stored(other))

		// The attempt fails and is retried at once: attempt 2 has a cap of its own.
		f.finish(l1, model.AttemptFailed, intp(1), at(time.Second))
		l2 := f.leaseOne("w", at(2*time.Second))
		require.Equal(t, l1.Run.ID, l2.Run.ID)
		require.Equal(t, 2, l2.Run.Attempt)
		appendCapped(sized(l2, 1, 100))
		require.Equal(t, []int64{1}, stored(l2), "each attempt has its own cap")
		f.appendLogs(sized(l2, 2, 1000))
		require.Equal(t, []int64{1, 2}, stored(l2), "no cap without MaxAttemptBytes")
	})

	t.Run("OnlyTheLeaseHolderWrites", func(t *testing.T) {
		f := setup(t, open)
		f.submit("a")
		_, queued := f.submit("b")
		l := f.leaseOne("w", t0)
		good := chunk(l, 1, model.Stdout, "mine")
		forged := chunk(l, 2, model.Stdout, "forged")
		forged.Token = "guess"
		noToken := chunk(l, 3, model.Stdout, "no token")
		noToken.Token = ""
		wrongAttempt := chunk(l, 4, model.Stdout, "attempt 2")
		wrongAttempt.Attempt = 2
		otherWorker := chunk(l, 5, model.Stdout, "as w2")
		otherWorker.WorkerID = "w2"
		sameWorker := chunk(l, 6, model.Stdout, "as w")
		sameWorker.WorkerID = "w"
		notRunning := model.LogChunk{RunID: queued.ID, Attempt: 1, Seq: 1, Stream: model.Stdout, Data: []byte("early"), CreatedAt: t0, Token: l.Token}
		missing := chunk(l, 1, model.Stdout, "x")
		missing.RunID = "missing"

		refused, err := f.s.AppendLogs(f.ctx, &store.AppendLogsParams{Chunks: []model.LogChunk{
			good, forged, noToken, wrongAttempt, otherWorker, sameWorker, notRunning, missing,
		}})
		require.NoError(t, err)
		require.Len(t, refused, 8)
		require.NoError(t, refused[0])
		for _, i := range []int{1, 2, 3, 4, 6} {
			require.ErrorIs(t, refused[i], model.ErrLeaseLost, "chunk %d", i)
		}
		require.NoError(t, refused[5])
		require.ErrorIs(t, refused[7], model.ErrNotFound)
		require.Equal(t, []int64{1, 6}, seqs(read(f, store.ReadLogsParams{RunID: l.Run.ID, Attempt: 1})),
			"the holder's chunks are stored, the others are not")
		require.Empty(t, read(f, store.ReadLogsParams{RunID: queued.ID, Attempt: 1}), "nobody writes a run's log before its worker")

		// Once the attempt has ended its lease writes nothing more.
		f.finish(l, model.AttemptSucceeded, intp(0), at(time.Second))
		late := chunk(l, 7, model.Stdout, "late")
		refused, err = f.s.AppendLogs(f.ctx, &store.AppendLogsParams{Chunks: []model.LogChunk{late}})
		require.NoError(t, err)
		require.ErrorIs(t, refused[0], model.ErrLeaseLost)
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
