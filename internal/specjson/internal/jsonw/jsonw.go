// Package jsonw writes JSON values byte for byte as encoding/json's Marshal writes them
// (HTML-escaped, as Marshal does), for the spec encoders of internal/specjson. Each
// function appends to dst and returns the extended slice.
package jsonw

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// safe holds true for the ASCII bytes encoding/json copies into a string as they are: all
// but the control characters, '"', '\\', and the HTML-sensitive '<', '>' and '&'.
var safe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	t['"'], t['\\'], t['<'], t['>'], t['&'] = false, false, false, false, false
	return t
}()

// String appends s as a JSON string: <, > and & as \u003c, \u003e and \u0026, U+2028 and
// U+2029 as \u2028 and \u2029, control characters as \b, \f, \n, \r, \t or \u00XX, and
// each byte of invalid UTF-8 as \ufffd.
func String(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if safe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Strings appends a JSON array of strings (null for nil).
func Strings(dst []byte, ss []string) []byte {
	if ss == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = String(dst, s)
	}
	return append(dst, ']')
}

// Ints appends a JSON array of integers (null for nil).
func Ints(dst []byte, ns []int) []byte {
	if ns == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, n := range ns {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(n), 10)
	}
	return append(dst, ']')
}

// StringMap appends a JSON object of m's entries in the order of their keys (null for nil).
func StringMap(dst []byte, m map[string]string) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	var buf [16]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = String(dst, k)
		dst = append(dst, ':')
		dst = String(dst, m[k])
	}
	return append(dst, '}')
}

// Float appends f as encoding/json writes a float64: the shortest decimal that reads back
// as f, in 'f' form unless its magnitude is below 1e-6 or at least 1e21, and then in 'e'
// form with a one-digit negative exponent not padded ("1e-7"). ok is false for NaN and the
// infinities, which encoding/json refuses.
func Float(dst []byte, f float64) (_ []byte, ok bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}

// Duration appends d as a JSON string of its Go form ("1m30s"), as apitype.Duration's
// MarshalJSON writes it.
func Duration(dst []byte, d time.Duration) []byte {
	return String(dst, d.String()) // d.String is inlined: its string need not be on the heap
}

// Raw appends the JSON value raw as encoding/json writes a json.RawMessage: compacted
// (no space outside strings) and HTML-escaped (<, >, &, U+2028 and U+2029 inside strings
// as \u escapes); other bytes, invalid UTF-8 included, are copied. ok is false when raw is
// not valid JSON, which encoding/json refuses.
func Raw(dst []byte, raw []byte) (_ []byte, ok bool) {
	if !json.Valid(raw) {
		return dst, false
	}
	// raw is valid JSON: outside strings, space is dropped and '"' opens a string; inside
	// one, '\\' escapes the next byte, '"' closes it, and the rest is escaped or copied.
	start := 0
	for i := 0; i < len(raw); i++ {
		if !rawOutside[raw[i]] {
			continue
		}
		if raw[i] != '"' {
			dst = append(dst, raw[start:i]...)
			start = i + 1
			continue
		}
		for i++; i < len(raw); i++ {
			c := raw[i]
			if !rawInside[c] {
				continue
			}
			if c == '"' {
				break
			}
			switch c {
			case '\\':
				i++ // the escaped byte, which may be '"' or '\\'
			case '<', '>', '&':
				dst = append(dst, raw[start:i]...)
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
				start = i + 1
			case 0xE2:
				if i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8 {
					dst = append(dst, raw[start:i]...)
					dst = append(dst, '\\', 'u', '2', '0', '2', hex[raw[i+2]&0xF])
					i += 2
					start = i + 1
				}
			}
		}
	}
	return append(dst, raw[start:]...), true
}

// rawOutside marks the bytes Raw acts on outside strings (space, and '"' that opens a
// string), rawInside those it acts on inside one.
var rawOutside, rawInside = func() (out, in [256]bool) {
	for _, c := range []byte{' ', '\t', '\n', '\r', '"'} {
		out[c] = true
	}
	for _, c := range []byte{'"', '\\', '<', '>', '&', 0xE2} {
		in[c] = true
	}
	return out, in
}()

// Requirements appends the object of a job's requirements, whose four fields
// apitype.Requirements and model.Requirements share under the same tags, all omitempty;
// false when cpu is NaN or infinite.
func Requirements(dst []byte, cpu float64, memoryMB int64, gpu int, labels map[string]string) (_ []byte, ok bool) {
	o := Object(dst)
	if cpu != 0 {
		if o, ok = o.Float("cpu", cpu); !ok {
			return dst, false
		}
	}
	if memoryMB != 0 {
		o = o.Int("memory_mb", memoryMB)
	}
	if gpu != 0 {
		o = o.Int("gpu", int64(gpu))
	}
	if len(labels) > 0 {
		o = o.StringMap("labels", labels)
	}
	return o.End(), true
}

// Obj writes a JSON object member by member into B: start it with Object, add the members
// in the order encoding/json writes them (the struct's field order), then End it. Its
// methods take and return it by value (o = o.String(...)), so that a buffer on the
// caller's stack may stay there.
type Obj struct {
	B   []byte
	sep byte // '{' before the first member, ',' after it
}

// Object starts an object at the end of dst.
func Object(dst []byte) Obj { return Obj{B: dst, sep: '{'} }

// Key writes the name of the next member and its colon. k is written as it is: a struct
// tag's name, with nothing to escape.
func (o Obj) Key(k string) Obj {
	o.B = append(o.B, o.sep, '"')
	o.B = append(o.B, k...)
	o.B = append(o.B, '"', ':')
	o.sep = ','
	return o
}

// End closes the object and returns the whole buffer.
func (o Obj) End() []byte {
	if o.sep == '{' {
		return append(o.B, '{', '}')
	}
	return append(o.B, '}')
}

// String writes member k with string value v.
func (o Obj) String(k, v string) Obj { o = o.Key(k); o.B = String(o.B, v); return o }

// Strings writes member k with value Strings(v).
func (o Obj) Strings(k string, v []string) Obj { o = o.Key(k); o.B = Strings(o.B, v); return o }

// Ints writes member k with value Ints(v).
func (o Obj) Ints(k string, v []int) Obj { o = o.Key(k); o.B = Ints(o.B, v); return o }

// StringMap writes member k with value StringMap(v).
func (o Obj) StringMap(k string, v map[string]string) Obj {
	o = o.Key(k)
	o.B = StringMap(o.B, v)
	return o
}

// Int writes member k with integer value v.
func (o Obj) Int(k string, v int64) Obj { o = o.Key(k); o.B = strconv.AppendInt(o.B, v, 10); return o }

// Bool writes member k with value v.
func (o Obj) Bool(k string, v bool) Obj { o = o.Key(k); o.B = strconv.AppendBool(o.B, v); return o }

// Duration writes member k with value Duration(v).
func (o Obj) Duration(k string, v time.Duration) Obj { o = o.Key(k); o.B = Duration(o.B, v); return o }

// Float writes member k with value Float(v); false when v is NaN or infinite.
func (o Obj) Float(k string, v float64) (_ Obj, ok bool) {
	o = o.Key(k)
	o.B, ok = Float(o.B, v)
	return o, ok
}

// Raw writes member k with value Raw(v); false when v is not valid JSON.
func (o Obj) Raw(k string, v []byte) (_ Obj, ok bool) {
	o = o.Key(k)
	o.B, ok = Raw(o.B, v)
	return o, ok
}

// Marshal writes member k with value json.Marshal(v), the same bytes as encoding/json
// writes for v as a field; false when json.Marshal fails.
func (o Obj) Marshal(k string, v any) (_ Obj, ok bool) {
	b, err := json.Marshal(v)
	if err != nil {
		return o, false
	}
	o = o.Key(k)
	o.B = append(o.B, b...)
	return o, true
}
