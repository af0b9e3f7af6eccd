package postgres

import (
	"encoding/binary"
	"math"
	"time"
)

// copyBuf builds the data of a COPY ... FROM STDIN (FORMAT binary): a header, tuples of
// length-prefixed fields in PostgreSQL's binary send formats, and a trailer. Writing it by
// hand instead of through pgx's generic encoders takes a fraction of the CPU, and the
// statement needs no describe round trip.
type copyBuf struct{ b []byte }

// pgEpochMicros is 2000-01-01 UTC, where timestamptz's binary form counts from, in
// microseconds since the Unix epoch.
const pgEpochMicros = 946_684_800 * 1_000_000

func newCopyBuf(size int) *copyBuf {
	c := &copyBuf{b: make([]byte, 0, size)}
	c.b = append(c.b, "PGCOPY\n\xff\r\n\x00"...)
	c.b = binary.BigEndian.AppendUint32(c.b, 0) // flags
	c.b = binary.BigEndian.AppendUint32(c.b, 0) // header extension length
	return c
}

// tuple starts a tuple of n fields.
func (c *copyBuf) tuple(n int) { c.b = binary.BigEndian.AppendUint16(c.b, uint16(n)) }

func (c *copyBuf) null() { c.b = binary.BigEndian.AppendUint32(c.b, math.MaxUint32) } // length -1

func (c *copyBuf) text(s string) {
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(s)))
	c.b = append(c.b, s...)
}

// textOrNull writes NULL for the empty string.
func (c *copyBuf) textOrNull(s string) {
	if s == "" {
		c.null()
		return
	}
	c.text(s)
}

// jsonb writes a JSON document (NULL when empty).
func (c *copyBuf) jsonb(doc []byte) {
	if len(doc) == 0 {
		c.null()
		return
	}
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(doc)+1))
	c.b = append(c.b, 1) // jsonb binary format version
	c.b = append(c.b, doc...)
}

func (c *copyBuf) float8(f float64) {
	c.b = binary.BigEndian.AppendUint32(c.b, 8)
	c.b = binary.BigEndian.AppendUint64(c.b, math.Float64bits(f))
}

func (c *copyBuf) int8(v int64) {
	c.b = binary.BigEndian.AppendUint32(c.b, 8)
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(v))
}

func (c *copyBuf) int4(v int32) {
	c.b = binary.BigEndian.AppendUint32(c.b, 4)
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(v))
}

func (c *copyBuf) bool(v bool) {
	c.b = binary.BigEndian.AppendUint32(c.b, 1)
	if v {
		c.b = append(c.b, 1)
	} else {
		c.b = append(c.b, 0)
	}
}

// time writes a timestamptz: microseconds since 2000-01-01 UTC (the time is truncated to
// the microsecond, as everywhere at the boundary).
func (c *copyBuf) time(t time.Time) {
	us := t.Unix()*1_000_000 + int64(t.Nanosecond()/1000) - pgEpochMicros
	c.int8(us)
}

func (c *copyBuf) timeOrNull(t *time.Time) {
	if t == nil {
		c.null()
		return
	}
	c.time(*t)
}

// end writes the trailer and returns the data.
func (c *copyBuf) end() []byte {
	c.b = binary.BigEndian.AppendUint16(c.b, math.MaxUint16) // -1
	return c.b
}
