package client_test

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

const ndjson = apitype.JobStreamMediaType

func TestStreamJobs(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, answer{ContentType: ndjson, Body: `{"line":1,"job_id":"j1","run_id":"r1"}
{"line":3,"error":{"title":"Bad Request","status":400,"errors":[{"field":"command","message":"must not be empty"}]}}
{"line":4,"job_id":"j0","existing":true}
{"summary":{"accepted":2,"existing":1,"rejected":1,"last_line":4,"complete":true}}
`})
	c := newClient(t, srv.URL)
	body := "{\"command\":[\"a\"]}\n\n{\"command\":[]}\n{\"shell\":\"b\",\"idempotency_key\":\"k\"}\n"
	var lines []apitype.JobStreamLine
	sum, err := c.StreamJobs(t.Context(), strings.NewReader(body), client.StreamOptions{
		OnLine: func(l apitype.JobStreamLine) { lines = append(lines, l) },
	})
	require.NoError(t, err)
	require.Equal(t, &apitype.JobStreamSummary{Accepted: 2, Existing: 1, Rejected: 1, LastLine: 4, Complete: true}, sum)
	require.Len(t, lines, 3)
	require.Equal(t, []int{1, 3, 4}, []int{lines[0].Line, lines[1].Line, lines[2].Line})
	require.Equal(t, "r1", lines[0].RunID)
	require.Equal(t, "command", lines[1].Error.Errors[0].Field)
	require.True(t, lines[2].Existing)

	req := srv.seen()[0]
	require.Equal(t, "POST /v1/jobs/stream", req.Method+" "+req.Path)
	require.Equal(t, ndjson, req.Header.Get("Content-Type"))
	require.Empty(t, req.Header.Get("Prefer"))
	require.Equal(t, body, req.Body, "the body goes as it is")
}

func TestStreamJobsAnswers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		answer    answer
		wantSum   *apitype.JobStreamSummary
		wantErr   string
		wantCode  int
		wantLines int
	}{
		{
			name: "stopped early: the summary and its error",
			answer: answer{ContentType: ndjson, Body: `{"line":1,"job_id":"j1"}
{"summary":{"accepted":1,"existing":0,"rejected":0,"last_line":1,"complete":false,"error":{"title":"Service Unavailable","status":503,"detail":"the store is unavailable"}}}
`},
			wantSum: &apitype.JobStreamSummary{Accepted: 1, LastLine: 1,
				Error: &apitype.Problem{Title: "Service Unavailable", Status: 503, Detail: "the store is unavailable"}},
			wantErr: "the store is unavailable", wantCode: 503, wantLines: 1,
		},
		{
			name:    "broken off before the summary",
			answer:  answer{ContentType: ndjson, Body: "{\"line\":1,\"job_id\":\"j1\"}\n{\"line\":2,\"job"},
			wantErr: "the answer broke off after line 1", wantLines: 1,
		},
		{
			name:    "refused whole",
			answer:  answer{Status: 415, ContentType: "application/problem+json", Body: `{"title":"Unsupported Media Type","status":415}`},
			wantErr: "Unsupported Media Type", wantCode: 415,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newFakeServer(t, tt.answer)
			n := 0
			sum, err := newClient(t, srv.URL).StreamJobs(t.Context(), strings.NewReader("{\"command\":[\"a\"]}\n"),
				client.StreamOptions{Minimal: true, OnLine: func(apitype.JobStreamLine) { n++ }})
			require.ErrorContains(t, err, tt.wantErr)
			require.Equal(t, tt.wantCode, client.StatusCode(err))
			require.Equal(t, tt.wantSum, sum)
			require.Equal(t, tt.wantLines, n)
			require.Equal(t, "return=minimal", srv.seen()[0].Header.Get("Prefer"))
		})
	}
}

func TestCreateJobsStream(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, answer{ContentType: ndjson, Body: `{"summary":{"accepted":3,"existing":0,"rejected":0,"last_line":3,"complete":true}}` + "\n"})
	specs := []apitype.JobSpec{{Command: []string{"a"}}, {Shell: "b", Queue: "q"}, {Handler: "h", Args: json.RawMessage(`{"k": 1}`)}}
	sum, err := newClient(t, srv.URL).CreateJobsStream(t.Context(), slices.Values(specs), client.StreamOptions{Minimal: true})
	require.NoError(t, err)
	require.True(t, sum.Complete)
	var got []apitype.JobSpec
	for line := range strings.Lines(srv.seen()[0].Body) {
		var s apitype.JobSpec
		require.NoError(t, json.Unmarshal([]byte(line), &s))
		got = append(got, s)
	}
	specs[2].Args = json.RawMessage(`{"k":1}`) // compacted
	require.Equal(t, specs, got, "one spec per line, in order")

	// A spec that does not encode ends the call with its error, and the specs stop there.
	pulled := 0
	bad := func(yield func(apitype.JobSpec) bool) {
		for _, s := range []apitype.JobSpec{{Command: []string{"a"}}, {Name: "bad", Shell: "b", Args: json.RawMessage(`{`)}, {Shell: "c"}} {
			pulled++
			if !yield(s) {
				return
			}
		}
	}
	_, err = newClient(t, srv.URL).CreateJobsStream(t.Context(), bad, client.StreamOptions{})
	require.ErrorContains(t, err, `encode job spec "bad"`)
	require.Equal(t, 2, pulled)
}

// TestCreateJobsStreamStopsWhenTheServerDoes: once the server has answered (its stream
// stopped), the specs are read no further, however many are left.
func TestCreateJobsStreamStopsWhenTheServerDoes(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		buf := make([]byte, 1)
		_, _ = r.Body.Read(buf) // the stream began
		w.Header().Set("Content-Type", ndjson)
		_, _ = io.WriteString(w, `{"summary":{"accepted":0,"existing":0,"rejected":0,"last_line":0,"complete":false,"error":{"title":"Service Unavailable","status":503}}}`+"\n")
	}))
	t.Cleanup(srv.Close)
	var ended atomic.Bool
	endless := iter.Seq[apitype.JobSpec](func(yield func(apitype.JobSpec) bool) {
		for yield(apitype.JobSpec{Command: []string{"a"}}) {
		}
		ended.Store(true)
	})
	sum, err := newClient(t, srv.URL).CreateJobsStream(t.Context(), endless, client.StreamOptions{})
	require.Equal(t, 503, client.StatusCode(err))
	require.False(t, sum.Complete)
	require.True(t, ended.Load(), "the specs were stopped before the call returned")
}

// TestConnectionsAreKept: the client's own transport keeps an idle connection for each of
// many concurrent calls, so a second round of them opens none; a client given its own
// http.Client keeps that client's settings.
func TestConnectionsAreKept(t *testing.T) {
	t.Parallel()
	const calls = 16
	round := func(t *testing.T, c *client.Client, opened *atomic.Int32) int32 {
		t.Helper()
		before := opened.Load()
		var wg sync.WaitGroup
		errs := make(chan error, calls)
		for range calls {
			wg.Go(func() { errs <- c.Health(context.Background()) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		return opened.Load() - before
	}
	serve := func(t *testing.T) (*httptest.Server, *atomic.Int32) {
		var opened atomic.Int32
		var mu sync.Mutex
		allCame := sync.NewCond(&mu)
		arrived := 0
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A round's calls are held until all of it has come: they are open at once.
			mu.Lock()
			arrived++
			end := (arrived + calls - 1) / calls * calls
			allCame.Broadcast()
			for arrived < end {
				allCame.Wait()
			}
			mu.Unlock()
			_, _ = io.WriteString(w, `{"status":"ok"}`)
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				opened.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		return srv, &opened
	}

	srv, opened := serve(t)
	c := newClient(t, srv.URL)
	require.EqualValues(t, calls, round(t, c, opened), "the first round opens a connection per call")
	require.Zero(t, round(t, c, opened), "the second reuses them")

	srv, opened = serve(t)
	own := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	c = newClient(t, srv.URL, client.WithHTTPClient(own))
	require.EqualValues(t, calls, round(t, c, opened))
	require.EqualValues(t, calls-1, round(t, c, opened), "the given client keeps one idle connection, as told")
}
