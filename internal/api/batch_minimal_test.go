package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stint-dev/stint/apitype"
	"github.com/stretchr/testify/require"
)

// minimalAnswer is the answer of POST /v1/jobs/batch under "Prefer: return=minimal".
type minimalAnswer struct {
	Items []struct {
		JobID    string          `json:"job_id"`
		RunID    string          `json:"run_id"`
		Existing bool            `json:"existing"`
		Error    json.RawMessage `json:"error"`
	} `json:"items"`
}

func TestCreateJobsBatchMinimal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	minimal := http.Header{"Prefer": {"respond-async, return=minimal"}}
	batch := `{"jobs": [
		{"name": "a", "command": ["a"]},
		{"name": "b", "shell": "b", "enabled": false},
		{"handler": "c", "idempotency_key": "kc"}
	]}`
	r := b.doCtx(t, context.Background(), "POST", "/v1/jobs/batch", batch, minimal)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Equal(t, "return=minimal", r.header.Get("Preference-Applied"))
	var out minimalAnswer
	r.decode(t, &out)
	require.Len(t, out.Items, 3)
	for i, it := range out.Items {
		require.NotEmpty(t, it.JobID, "item %d", i)
		require.False(t, it.Existing, "item %d", i)
		require.Nil(t, it.Error, "item %d", i)
	}
	require.NotEmpty(t, out.Items[0].RunID)
	require.Empty(t, out.Items[1].RunID, "a disabled job has no run")

	// The ids are those of the stored jobs and runs.
	got := b.do(t, "GET", "/v1/jobs/a", nil)
	require.Equal(t, http.StatusOK, got.status, "body: %s", got.body)
	var job struct {
		ID string `json:"id"`
	}
	got.decode(t, &job)
	require.Equal(t, out.Items[0].JobID, job.ID)
	got = b.do(t, "GET", "/v1/runs/"+out.Items[2].RunID, nil)
	require.Equal(t, http.StatusOK, got.status, "body: %s", got.body)

	// A replay by key is 200 and says existing; the ids are the first answer's.
	r = b.doCtx(t, context.Background(), "POST", "/v1/jobs/batch", `{"jobs": [{"handler": "c", "idempotency_key": "kc"}]}`, minimal)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var replay minimalAnswer
	r.decode(t, &replay)
	require.Len(t, replay.Items, 1)
	require.True(t, replay.Items[0].Existing)
	require.Equal(t, out.Items[2].JobID, replay.Items[0].JobID)
	require.Equal(t, out.Items[2].RunID, replay.Items[0].RunID)

	// Without the preference the answer is the full one.
	r = b.do(t, "POST", "/v1/jobs/batch", `{"jobs": [{"command": ["d"]}]}`)
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.Empty(t, r.header.Get("Preference-Applied"))
	require.Contains(t, string(r.body), `"job":{`)
}

func TestPreferMinimal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		header []string
		want   bool
	}{
		{nil, false},
		{[]string{"return=minimal"}, true},
		{[]string{"Return = \"minimal\""}, true},
		{[]string{"wait=5, return=minimal"}, true},
		{[]string{"wait=5", "return=minimal"}, true},
		{[]string{"return=representation"}, false},
		{[]string{"minimal"}, false},
	} {
		r, err := http.NewRequest("POST", "/v1/jobs/batch", nil)
		require.NoError(t, err)
		r.Header["Prefer"] = c.header
		require.Equal(t, c.want, preferMinimal(r), "%q", c.header)
	}
}

// TestAppendMinimal: the hand-written minimal answer is byte for byte what encoding/json
// writes, and gives way to it where an entry has an error or an id it would escape.
func TestAppendMinimal(t *testing.T) {
	t.Parallel()
	want := func(items []apitype.CreatedIDs) string {
		var buf bytes.Buffer
		require.NoError(t, json.NewEncoder(&buf).Encode(apitype.BatchCreateJobsMinimalResponse{Items: items}))
		return buf.String()
	}
	for _, items := range [][]apitype.CreatedIDs{
		{},
		{{JobID: "01j0000000000000000000000a", RunID: "01j0000000000000000000000b"}},
		{{JobID: "j1", RunID: "r1"}, {JobID: "j2", Existing: true}, {RunID: "r3"}, {}, {Existing: true}, {JobID: "A-b_9"}},
	} {
		got, ok := appendMinimal(nil, items)
		require.True(t, ok, "%+v", items)
		require.Equal(t, want(items), string(got))
	}
	for _, items := range [][]apitype.CreatedIDs{
		{{JobID: "j1"}, {Error: &apitype.Problem{Status: 409, Title: "Conflict"}}},
		{{JobID: `j"1`}},
		{{RunID: "r<1"}},
		{{JobID: "é"}},
	} {
		_, ok := appendMinimal(nil, items)
		require.False(t, ok, "%+v", items)
	}
}
