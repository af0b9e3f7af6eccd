package worker

import (
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/stint-dev/stint/apitype"
)

// Output streams.
const (
	streamStdout = 0
	streamStderr = 1
)

var streamNames = [2]string{"stdout", "stderr"}

// streamWriter is an io.Writer onto one stream of an attempt's log.
type streamWriter struct {
	at     *attempt
	stream int
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.at.writeLog(w.stream, p)
	return len(p), nil
}

// readBuf takes a buffer for copying a process's output from the agent's pool (io.Copy
// would allocate one per stream per process); put it back in a.readBufs.
func (a *Agent) readBuf() *[]byte {
	if bp, _ := a.readBufs.Get().(*[]byte); bp != nil {
		return bp
	}
	b := make([]byte, readBufSize)
	return &b
}

// ReadFrom copies a process's output pipe into the log with a pooled buffer.
func (w *streamWriter) ReadFrom(r io.Reader) (int64, error) {
	bp := w.at.agent.readBuf()
	defer w.at.agent.readBufs.Put(bp)
	var n int64
	for {
		k, err := r.Read(*bp)
		if k > 0 {
			w.at.writeLog(w.stream, (*bp)[:k])
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

const readBufSize = 32 << 10

// attemptLog buffers an attempt's output and cuts it into chunks: when a stream's buffer
// reaches Config.LogChunkBytes, when the shipper's flush timer fires, and when the attempt
// ends. Chunks get their Seq when they are cut and are queued to the shipper in that order,
// under mu, so they are shipped in order.
type attemptLog struct {
	mu          sync.Mutex
	seq         int64
	total       int64 // bytes accepted
	dropped     int64 // bytes past the cap
	truncStream int   // the stream that hit the cap first
	buf         [2][]byte
	dirty       bool // queued for the shipper's timed flush
	closed      bool
}

// writeLog appends p to a stream of the attempt's log.
func (at *attempt) writeLog(stream int, p []byte) {
	l := &at.log
	a := at.agent
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if room := a.cfg.LogCap - l.total; int64(len(p)) > room {
		if l.dropped == 0 {
			l.truncStream = stream
		}
		l.dropped += int64(len(p)) - room
		p = p[:room]
	}
	if len(p) == 0 {
		return
	}
	l.total += int64(len(p))
	b := append(l.buf[stream], p...)
	size := a.cfg.LogChunkBytes
	off := 0
	for len(b)-off >= size {
		n := cutPoint(b[off:], size)
		if n == 0 {
			n = size
		}
		at.emitLocked(stream, b[off:off+n])
		off += n
	}
	l.buf[stream] = b[:copy(b, b[off:])]
	if !l.dirty && len(l.buf[stream]) > 0 {
		l.dirty = true
		a.ship.markDirty(at)
	}
}

// emitLocked queues data as the attempt's next chunk; at.log.mu held.
func (at *attempt) emitLocked(stream int, data []byte) {
	l := &at.log
	l.seq++
	at.agent.ship.addChunk(apitype.LogChunk{
		RunID:   at.lease.RunID,
		Attempt: at.lease.Attempt,
		Token:   at.lease.Token,
		Seq:     l.seq,
		Stream:  streamNames[stream],
		Data:    string(data),
	})
}

// flushLog queues the buffered output of a running attempt, holding back an incomplete UTF-8
// sequence at the end.
func (at *attempt) flushLog() {
	l := &at.log
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dirty = false
	if l.closed {
		return
	}
	for s, b := range l.buf {
		if n := cutPoint(b, len(b)); n > 0 {
			at.emitLocked(s, b[:n])
			b = b[:copy(b, b[n:])]
			l.buf[s] = b
		}
		if len(b) > 0 && !l.dirty {
			l.dirty = true
			at.agent.ship.markDirty(at)
		}
	}
}

// closeLog queues the rest of the attempt's output, and the truncation marker if output was
// dropped. Later writes are discarded.
func (at *attempt) closeLog() {
	l := &at.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	for s, b := range l.buf {
		if len(b) > 0 {
			at.emitLocked(s, b)
		}
	}
	if l.dropped > 0 {
		at.emitLocked(l.truncStream, fmt.Appendf(nil,
			"\n[stint: output truncated after %d bytes; %d more bytes dropped]\n", l.total, l.dropped))
	}
	l.buf = [2][]byte{}
}

// cutPoint returns where to cut the first n bytes (n <= len(b)) of b without splitting a
// UTF-8 sequence: n, or the start of a sequence that n would split. It returns n when that
// would leave nothing (a chunk always makes progress).
func cutPoint(b []byte, n int) int {
	for i := n - 1; i >= 0 && i >= n-utf8.UTFMax; i-- {
		if !utf8.RuneStart(b[i]) {
			continue
		}
		if utf8.FullRune(b[i:n]) {
			return n
		}
		if i == 0 {
			if n == len(b) {
				return 0 // a partial rune alone: wait for the rest
			}
			return n
		}
		return i
	}
	return n
}
