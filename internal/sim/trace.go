package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
)

// tracer keeps the trace of a run: every line goes into a hash (two runs of one seed must
// write the same lines), the last few are kept to show when a check fails, and all of them
// go to an optional writer.
type tracer struct {
	h     hash.Hash
	w     io.Writer
	tail  []string
	next  int // where the next line goes in tail, once it is full
	lines int
}

func newTracer(w io.Writer, tail int) tracer {
	return tracer{h: sha256.New(), w: w, tail: make([]string, 0, tail)}
}

func (t *tracer) line(l string) {
	t.lines++
	t.h.Write([]byte(l))
	t.h.Write([]byte{'\n'})
	if t.w != nil {
		_, _ = io.WriteString(t.w, l+"\n")
	}
	if len(t.tail) < cap(t.tail) {
		t.tail = append(t.tail, l)
		return
	}
	t.tail[t.next] = l
	t.next = (t.next + 1) % len(t.tail)
}

// sum is the hash of every line so far.
func (t *tracer) sum() string { return hex.EncodeToString(t.h.Sum(nil)) }

// tailLines returns the last lines, oldest first.
func (t *tracer) tailLines() []string {
	out := make([]string, 0, len(t.tail))
	out = append(out, t.tail[t.next:]...)
	return append(out, t.tail[:t.next]...)
}
