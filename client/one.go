package client

import (
	"bytes"
	"encoding/json"
)

// one reads a single object that the server answers either bare ({"id": ...}) or wrapped
// under a key ({"run": {...}}): API.md wraps the answers of some actions (trigger) and leaves
// the shape of others open, and the SDK should not break on either.
type one[T any] struct {
	key string
	v   *T // nil until an answer body is read
}

func (o *one[T]) UnmarshalJSON(b []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	if raw, ok := fields[o.key]; ok && bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		b = raw
	}
	o.v = new(T)
	return json.Unmarshal(b, o.v)
}
