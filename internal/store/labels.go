package store

import (
	"encoding/json"
	"fmt"
)

// LabelsColumn is how both stores keep a run's or job's requirement labels: a JSON object
// with its keys sorted (encoding/json sorts map keys), or "" when there are none, so that
// unconstrained rows are told apart without decoding anything.
func LabelsColumn(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	b, err := json.Marshal(labels)
	if err != nil { // a map of strings always encodes
		panic(fmt.Sprintf("encode labels: %v", err))
	}
	return string(b)
}

// LabelsFromColumn decodes what LabelsColumn made.
func LabelsFromColumn(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode requirement labels: %w", err)
	}
	return m, nil
}
