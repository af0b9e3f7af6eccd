package api

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		into   func() any
		fields []string // fields named in the problem
		detail string   // a part of the problem's detail
	}{
		{name: "unknown top-level field", body: `{"command": ["a"], "nmae": "x"}`, fields: []string{"nmae"}},
		{name: "unknown nested field", body: `{"command": ["a"], "retry": {"max_attempt": 3}}`, fields: []string{"retry.max_attempt"}},
		{name: "all unknown fields", body: `{"zz": 1, "retry": {"a": 1}, "requirements": {"b": 2}}`,
			fields: []string{"requirements.b", "retry.a", "zz"}},
		{name: "wrong type", body: `{"priority": "high"}`, fields: []string{"priority"}},
		{name: "float for int", body: `{"priority": 1.5}`, fields: []string{"priority"}},
		{name: "wrong element type", body: `{"command": ["a", 1]}`, fields: []string{"command[1]"}},
		{name: "bad duration", body: `{"timeout": "soon"}`, fields: []string{"timeout"}},
		{name: "bad nested duration", body: `{"retry": {"initial_delay": 5}}`, fields: []string{"retry.initial_delay"}},
		{name: "bad time", body: `{"run_at": "tomorrow"}`, fields: []string{"run_at"}},
		{name: "not an object", body: `[1]`, fields: []string{"body"}},
		{name: "malformed", body: `{"command": ["a",]}`, detail: "byte offset 17"},
		{name: "truncated", body: `{"command": ["a"`, detail: "byte offset 16"},
		{name: "trailing data", body: `{"command": ["a"]} {"x": 1}`, detail: "byte offset 19"},
		{name: "trailing garbage", body: `{"command": ["a"]}x`, detail: "byte offset 18"},
		{name: "batch entry", body: `{"jobs": [{"command": ["a"]}, {"command": "a"}]}`,
			into: func() any { return &apitype.BatchCreateJobsRequest{} }, fields: []string{"jobs[1].command"}},
		{name: "batch unknown", body: `{"jobs": [{}, {}, {}, {"comand": ["a"]}]}`,
			into: func() any { return &apitype.BatchCreateJobsRequest{} }, fields: []string{"jobs[3].comand"}},
		{name: "map values", body: `{"env": {"A": 1}}`, fields: []string{"env.A"}},
		{name: "case-insensitive match is not unknown", body: `{"Command": ["a"], "bad": 1}`, fields: []string{"bad"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var v any = &apitype.JobSpec{}
			if tt.into != nil {
				v = tt.into()
			}
			err := decodeJSON([]byte(tt.body), v)
			require.Error(t, err)
			var he *httpError
			require.True(t, errors.As(err, &he), "%T %v", err, err)
			require.Equal(t, 400, he.status)
			require.Equal(t, tt.fields, fieldNames(he.fields))
			require.Contains(t, he.detail, tt.detail)
		})
	}
}

// batchRoom guesses at least the entries a batch lists, whatever else opens a brace, and
// never more than one past the most a batch may list.
func TestBatchRoom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body      string
		most, out int
	}{
		{`{"jobs":[]}`, 10, 0},
		{`{"jobs":[{"handler":"a"},{"handler":"b"}]}`, 10, 2},
		{`{"jobs":[{"handler":"a","args":{"x":{}}},{"command":["{"]}]}`, 10, 5},
		{`{"jobs":[{},{},{},{}]}`, 2, 3},
		{``, 10, 0},
	} {
		require.Equal(t, tc.out, batchRoom([]byte(tc.body), tc.most), tc.body)
	}
}
