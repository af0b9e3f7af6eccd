package api

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/stint-dev/stint/internal/model"
)

// lastLines is the rule of tail=n, naively: the text's lines (each with its newline, the
// last piece without one being a line too), the last n of them.
func lastLines(text string, n int) string {
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines[max(len(lines)-n, 0):], "")
}

// stamped is the rule of timestamps=true, naively: each line led by the time of the chunk
// its first byte came in.
func stamped(chunks []model.LogChunk) string {
	var out strings.Builder
	mid := false
	for _, c := range chunks {
		for _, b := range c.Data {
			if !mid {
				out.WriteString(c.CreatedAt.UTC().Format(stampFormat) + " ")
			}
			out.WriteByte(b)
			mid = b != '\n'
		}
	}
	return out.String()
}

func chunksOf(at time.Time, data ...string) []model.LogChunk {
	out := make([]model.LogChunk, len(data))
	for i, d := range data {
		out[i] = model.LogChunk{Seq: int64(i + 1), Data: []byte(d), CreatedAt: at.Add(time.Duration(i) * time.Second)}
	}
	return out
}

func writeAll(t *testing.T, stamps bool, chunks []model.LogChunk) string {
	t.Helper()
	var buf bytes.Buffer
	lw := &logWriter{w: &buf, stamps: stamps}
	for i := range chunks {
		require.NoError(t, lw.write(&chunks[i]))
	}
	return buf.String()
}

func tailOf(chunks []model.LogChunk, n int) []model.LogChunk {
	tl := &logTail{n: n}
	for _, c := range chunks {
		tl.add(c)
	}
	return tl.lines()
}

func TestLogWriterStamps(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 12, 0, 0, 5000, time.FixedZone("CET", 3600))
	chunks := chunksOf(at, "one\ntw", "o\nthree\n", "", "four")
	require.Equal(t, "one\ntwo\nthree\nfour", writeAll(t, false, chunks), "without stamps the data as it is")
	require.Equal(t,
		"2030-01-02T11:00:00.000005000Z one\n"+
			"2030-01-02T11:00:00.000005000Z two\n"+ // began in the first chunk
			"2030-01-02T11:00:01.000005000Z three\n"+
			"2030-01-02T11:00:03.000005000Z four", // in UTC, nine fraction digits
		writeAll(t, true, chunks))
}

func TestLogTail(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		data []string
		n    int
		want string
	}{
		{[]string{"1\n2\n3\nno newline"}, 2, "3\nno newline"},
		{[]string{"1\n2\n"}, 5, "1\n2\n"},
		{[]string{"a\nb\n", "c\n"}, 2, "b\nc\n"},
		{[]string{"a\nb", "c\nd\n"}, 2, "bc\nd\n"},
		{[]string{"a\n", "b\n", "c\n", "d\n"}, 1, "d\n"},
		{[]string{"a\n", "b\n"}, 0, ""},
		{nil, 3, ""},
	} {
		got := writeAll(t, false, tailOf(chunksOf(at, tt.data...), tt.n))
		require.Equal(t, tt.want, got, "%q tail %d", tt.data, tt.n)
	}
	// The first line of a tail is stamped with the time of the chunk it began in.
	got := writeAll(t, true, tailOf(chunksOf(at, "a\nb", "c\nd\n"), 2))
	require.Equal(t, "2030-01-02T12:00:00.000000000Z bc\n2030-01-02T12:00:01.000000000Z d\n", got)
}

// TestLogTailBounded: the tail holds the chunks of its lines and one more, not the whole
// output.
func TestLogTailBounded(t *testing.T) {
	t.Parallel()
	tl := &logTail{n: 3}
	for i := range 10000 {
		tl.add(model.LogChunk{Data: fmt.Appendf(nil, "line %d\n", i)})
	}
	require.LessOrEqual(t, len(tl.chunks), 5)
	require.Equal(t, "line 9997\nline 9998\nline 9999\n", writeAll(t, false, tl.lines()))
}

// TestLogTextRules checks logWriter and logTail against the naive rules on any chunks.
func TestLogTextRules(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		data := rapid.SliceOf(rapid.StringOfN(rapid.SampledFrom([]rune("ab\n")), 0, 12, -1)).Draw(rt, "chunks")
		n := rapid.IntRange(0, 8).Draw(rt, "n")
		checkLogText(rt, data, n)
	})
}

func FuzzLogText(f *testing.F) {
	f.Add([]byte("one\ntw|o\nthree\n||four"), uint8(2))
	f.Add([]byte("\n\n|\n"), uint8(1))
	f.Add([]byte(""), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		checkLogText(t, strings.Split(string(b), "|"), int(n%16))
	})
}

func checkLogText(t require.TestingT, data []string, n int) {
	chunks := chunksOf(time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC), data...)
	var buf bytes.Buffer
	lw := &logWriter{w: &buf, stamps: true}
	for i := range chunks {
		require.NoError(t, lw.write(&chunks[i]))
	}
	require.Equal(t, stamped(chunks), buf.String(), "stamps")

	text := strings.Join(data, "")
	buf.Reset()
	lw = &logWriter{w: &buf}
	tail := tailOf(chunks, n)
	for i := range tail {
		require.NoError(t, lw.write(&tail[i]))
	}
	require.Equal(t, lastLines(text, n), buf.String(), "tail %d of %q", n, text)
}
