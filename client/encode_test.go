package client_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// oddSpecs need every escape encoding/json makes, in every kind of field.
var oddSpecs = []apitype.JobSpec{
	{Handler: "noop", Queue: "bench"},
	{},
	{
		Name: "<a&b>\u2028", Command: []string{"sh", "-c", "echo \"hi\"\n\t\x01\xff"},
		Args: json.RawMessage(" {\"k\" : [1, 2.50, \"<\u2029>\"] }\n"),
		Env:  map[string]string{"b": "2", "a": "1", "é": "\x00"}, SecretEnv: map[string]string{},
		Priority: ptr(-1), Requirements: &apitype.Requirements{CPU: 1e-7, Labels: map[string]string{"z": "<"}},
		Timeout:  ptr(apitype.Duration(1500 * time.Microsecond)),
		Retry:    &apitype.RetryPolicy{MaxAttempts: 3, Multiplier: 1e21, Jitter: ptr(0.0), RetryExitCodes: []int{75}},
		Schedule: &apitype.Schedule{Cron: "@hourly"}, RunAt: ptr(time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("", 3600))),
		Concurrency: &apitype.Concurrency{Key: "&"}, DependsOn: []apitype.Dependency{{Run: "r"}},
		Enabled: ptr(true), Tags: []string{}, Alerts: &apitype.JobAlerts{LateAfter: ptr(apitype.Duration(time.Minute))},
	},
}

// TestSpecBodiesAreJSONMarshal: the batch bodies are json.Marshal's bytes of the request,
// and each line of a stream a json.Encoder's of its spec, exactly.
func TestSpecBodiesAreJSONMarshal(t *testing.T) {
	t.Parallel()
	req := &apitype.BatchCreateJobsRequest{Jobs: oddSpecs}
	want, err := json.Marshal(req)
	require.NoError(t, err)

	srv := newFakeServer(t, answer{Status: http.StatusCreated, Body: `{"items":[]}`}, answer{Status: http.StatusCreated, Body: `{"items":[]}`},
		answer{ContentType: ndjson, Body: `{"summary":{"accepted":3,"last_line":3,"complete":true}}` + "\n"})
	c := newClient(t, srv.URL)
	_, err = c.CreateJobs(t.Context(), req)
	require.NoError(t, err)
	_, err = c.CreateJobsMinimal(t.Context(), req)
	require.NoError(t, err)
	_, err = c.CreateJobsStream(t.Context(), slices.Values(oddSpecs), client.StreamOptions{})
	require.NoError(t, err)

	seen := srv.seen()
	require.Equal(t, string(want), seen[0].Body)
	require.Equal(t, string(want), seen[1].Body)
	require.Equal(t, "return=minimal", seen[1].Header.Get("Prefer"))
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines)
	for i := range oddSpecs {
		require.NoError(t, enc.Encode(&oddSpecs[i]))
	}
	require.Equal(t, lines.String(), seen[2].Body)
}

// TestSpecBodyErrors: a spec json.Marshal refuses fails the call with json.Marshal's error:
// a batch before anything is sent, a stream after the lines before it.
func TestSpecBodyErrors(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t)
	c := newClient(t, srv.URL)
	for _, bad := range []apitype.JobSpec{
		{Args: json.RawMessage(`{"a":`)},
		{Retry: &apitype.RetryPolicy{Jitter: ptr(-1 / zero())}},
		{RunAt: ptr(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC))},
	} {
		req := &apitype.BatchCreateJobsRequest{Jobs: []apitype.JobSpec{{Handler: "ok"}, bad}}
		_, marshalErr := json.Marshal(req)
		require.Error(t, marshalErr)
		_, err := c.CreateJobs(t.Context(), req)
		require.EqualError(t, err, "POST /v1/jobs/batch: encode request: "+marshalErr.Error())
		_, err = c.CreateJobsMinimal(t.Context(), req)
		require.EqualError(t, err, "POST /v1/jobs/batch: encode request: "+marshalErr.Error())
		_, err = c.CreateJobsStream(t.Context(), slices.Values(req.Jobs), client.StreamOptions{})
		require.EqualError(t, err, `encode job spec "": `+marshalErr.Error())
	}
	for _, r := range srv.seen() {
		require.Equal(t, "/v1/jobs/stream", r.Path)
	}
}

func zero() float64 { return 0 }
