package api

import (
	"bytes"
	"io"

	"github.com/stint-dev/stint/internal/model"
)

// stampFormat is the time before each line of GET /v1/runs/{id}/logs?timestamps=true:
// RFC 3339 in UTC with nine fraction digits, so that every stamp has the same width.
const stampFormat = "2006-01-02T15:04:05.000000000Z07:00"

// logWriter writes an attempt's chunks as the text of GET /v1/runs/{id}/logs: their data
// as it is, or, with stamps, each line led by the time the server received the chunk that
// began it (stampFormat) and a space. A line is what ends with a newline, or the last
// piece of the output without one.
type logWriter struct {
	w      io.Writer
	stamps bool
	mid    bool // what was written so far ends in the middle of a line
}

func (lw *logWriter) write(c *model.LogChunk) error {
	data := c.Data
	if !lw.stamps || len(data) == 0 {
		_, err := lw.w.Write(data)
		return err
	}
	stamp := c.CreatedAt.UTC().Format(stampFormat) + " "
	buf := make([]byte, 0, len(data)+len(stamp)*(1+bytes.Count(data, []byte{'\n'})))
	for len(data) > 0 {
		if !lw.mid {
			buf = append(buf, stamp...)
		}
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			buf = append(buf, data...)
			lw.mid = true
			break
		}
		buf = append(buf, data[:i+1]...)
		lw.mid = false
		data = data[i+1:]
	}
	_, err := lw.w.Write(buf)
	return err
}

// logTail keeps, of the chunks added to it in order, those that hold their last n lines:
// GET /v1/runs/{id}/logs?tail=n. It holds no more than those lines and a chunk.
type logTail struct {
	n        int
	chunks   []model.LogChunk
	newlines []int // of each chunk
	total    int   // newlines in chunks[1:]
}

func (t *logTail) add(c model.LogChunk) {
	if t.n == 0 || len(c.Data) == 0 {
		return
	}
	nl := bytes.Count(c.Data, []byte{'\n'})
	if len(t.chunks) > 0 {
		t.total += nl
	}
	t.chunks, t.newlines = append(t.chunks, c), append(t.newlines, nl)
	// The first chunk is not needed once the others hold n+1 newlines: the line before
	// the last n (or n-1, then a piece without a newline) ends after it.
	for len(t.chunks) > 1 && t.total-t.newlines[1] >= t.n+1 {
		t.total -= t.newlines[1]
		t.chunks, t.newlines = t.chunks[1:], t.newlines[1:]
	}
}

// lines returns the chunks of the last n lines, the first cut to start where its line does.
func (t *logTail) lines() []model.LogChunk {
	if t.n == 0 {
		return nil
	}
	need, atEnd := t.n, true
	for i := len(t.chunks) - 1; i >= 0; i-- {
		d := t.chunks[i].Data
		for j := len(d) - 1; j >= 0; j-- {
			// A newline that is the output's last byte ends the last line, it does not
			// start one.
			if d[j] == '\n' && !atEnd {
				if need--; need == 0 {
					out := append([]model.LogChunk(nil), t.chunks[i:]...)
					out[0].Data = d[j+1:]
					return out
				}
			}
			atEnd = false
		}
	}
	return t.chunks
}
