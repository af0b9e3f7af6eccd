package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// readBody reads the request body, which endpoint capped with http.MaxBytesReader; a longer
// body is a 413.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, bodyError(err)
	}
	return b, nil
}

// bodyError words a failure to read a request body: a body over its cap is a 413, one that
// did not come in time (the read timeout) a 408.
func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return &httpError{
			status: http.StatusRequestEntityTooLarge,
			detail: fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit),
		}
	case errors.As(err, &netErr) && netErr.Timeout():
		return &httpError{status: http.StatusRequestTimeout, detail: "the request body did not come within the server's read timeout"}
	}
	return fmt.Errorf("read request body: %w", err)
}

// decodeBody reads a JSON body into v. An empty body is an error unless optional is set, in
// which case v is left as it is.
func decodeBody(r *http.Request, v any, optional bool) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeRead(b, v, optional)
}

// decodeRead is decodeBody of a body already read.
func decodeRead(b []byte, v any, optional bool) error {
	if len(bytes.TrimSpace(b)) == 0 {
		if optional {
			return nil
		}
		return badRequest("request body is empty: want a JSON object")
	}
	return decodeJSON(b, v)
}

// decodeJSON decodes exactly one JSON value from b into v. Unknown fields, wrong types,
// malformed JSON and trailing data are 400s that name the field or the byte offset.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(b, v, err)
	}
	end := dec.InputOffset()
	rest := bytes.TrimLeft(b[end:], " \t\r\n")
	if len(rest) > 0 {
		off := len(b) - len(rest)
		return badRequest(fmt.Sprintf("unexpected data after the JSON value at byte offset %d", off))
	}
	return nil
}

// lineDecoder decodes one JSON value per line, as decodeJSON does, with one json.Decoder
// whose buffer and scanner serve every line: a stream of many small values spares their
// allocations. A line it cannot take whole (an error, data after the value) goes to
// decodeJSON, which words the error, and the next line gets a fresh decoder.
type lineDecoder struct {
	dec  *json.Decoder
	src  lineSource // what dec reads: the current line
	read int64      // the bytes dec has read, all lines together
}

// lineSource hands a json.Decoder one line; it is at its end (io.EOF) until the next.
type lineSource struct{ b []byte }

func (s *lineSource) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

// decode decodes line into v.
func (d *lineDecoder) decode(line []byte, v any) error {
	if d.dec == nil {
		d.src, d.read = lineSource{}, 0
		d.dec = json.NewDecoder(&d.src)
		d.dec.DisallowUnknownFields()
	}
	d.src.b = line
	err := d.dec.Decode(v)
	fed := len(line) - len(d.src.b)
	d.read += int64(fed)
	// The line after its value: what dec holds beyond the value, and what it did not read.
	held := int(d.read - d.dec.InputOffset())
	if err == nil && len(bytes.TrimLeft(line[fed-held:], " \t\r\n")) == 0 {
		return nil
	}
	d.dec = nil
	reflect.ValueOf(v).Elem().SetZero() // drop what the failed decode left
	return decodeJSON(line, v)
}

// decodeError turns an encoding/json error into a 400 problem.
func decodeError(b []byte, v any, err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		// Offset counts the bytes read, the bad one included; name the bad one (0-based).
		return badRequest(fmt.Sprintf("malformed JSON at byte offset %d: %s", max(syn.Offset-1, 0), strings.TrimPrefix(syn.Error(), "json: ")))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest(fmt.Sprintf("malformed JSON at byte offset %d: unexpected end of input", len(b)))
	}
	// The JSON is well formed but does not fit the type: walk it beside the type to name
	// every field that does not fit, with its full path (the decoder names only the first, and
	// unknown fields without their parent).
	var generic any
	gd := json.NewDecoder(bytes.NewReader(b))
	gd.UseNumber()
	if gd.Decode(&generic) == nil {
		var fe fieldErrors
		checkShape(generic, reflect.TypeOf(v), "", &fe)
		if len(fe.errs) > 0 {
			return invalidFields(fe.errs)
		}
	}
	// Fall back on the decoder's own words.
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return invalidFields([]apitype.FieldError{{Field: field, Message: "must be " + article(typ.Type)}})
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if uq, err := strconv.Unquote(name); err == nil {
			name = uq
		}
		return invalidFields([]apitype.FieldError{{Field: name, Message: "unknown field"}})
	}
	return badRequest("invalid request body: " + strings.TrimPrefix(err.Error(), "json: "))
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	timeType        = reflect.TypeFor[time.Time]()
)

// checkShape compares a generic JSON value (decoded with UseNumber) with the Go type it is
// meant for, recording every unknown field and every value of the wrong type under its JSON
// path. It follows encoding/json's rules: null fits anything, object keys match field names
// case-insensitively, and types with their own UnmarshalJSON decide for themselves.
func checkShape(v any, t reflect.Type, path string, fe *fieldErrors) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		raw, err := json.Marshal(v)
		if err != nil {
			return
		}
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			msg := strings.TrimPrefix(err.Error(), "json: ")
			if t == timeType {
				msg = "must be an RFC 3339 time such as \"2030-01-02T15:04:05Z\""
			}
			fe.add(orBody(path), "%s", msg)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			fe.add(orBody(path), "must be an object")
			return
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(obj) {
			f, ok := fields[k]
			if !ok {
				for name, ff := range fields {
					if strings.EqualFold(name, k) {
						f, ok = ff, true
						break
					}
				}
			}
			if !ok {
				fe.add(join(path, k), "unknown field")
				continue
			}
			checkShape(obj[k], f.Type, join(path, k), fe)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			fe.add(orBody(path), "must be an object")
			return
		}
		for _, k := range sortedKeys(obj) {
			checkShape(obj[k], t.Elem(), mapPath(path, k), fe)
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			fe.add(orBody(path), "must be an array")
			return
		}
		for i, e := range arr {
			checkShape(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), fe)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			fe.add(orBody(path), "must be a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			fe.add(orBody(path), "must be a boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			fe.add(orBody(path), "must be an integer")
			return
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			fe.add(orBody(path), "must be an integer that fits in %d bits", t.Bits())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			fe.add(orBody(path), "must be a non-negative integer")
			return
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			fe.add(orBody(path), "must be a non-negative integer that fits in %d bits", t.Bits())
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			fe.add(orBody(path), "must be a number")
			return
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			fe.add(orBody(path), "must be a number that fits in %d bits", t.Bits())
		}
	}
}

// jsonFields maps the JSON names of a struct's fields to the fields.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := make(map[string]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// article words a Go type for "must be ...".
func article(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil // without the iterator's allocations: most specs have no env, no labels
	}
	return slices.Sorted(maps.Keys(m))
}
