package api

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
)

func TestRunLogs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.register(t, "w1")
	created := b.createJob(t, `{"command": ["sh", "-c", "echo"]}`)
	runID := created.Run.ID

	// Before any attempt: empty.
	r := b.do(t, "GET", "/v1/runs/"+runID+"/logs", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Empty(t, r.body)

	l := b.lease(t, "w1", 1).Leases[0]
	appendLogs := func(chunks ...apitype.LogChunk) {
		t.Helper()
		r := b.do(t, "POST", "/v1/attempts/logs", apitype.LogChunksRequest{Chunks: chunks})
		require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	}
	appendLogs(
		apitype.LogChunk{RunID: runID, Attempt: 1, Token: l.Token, Seq: 1, Stream: "stdout", Data: "hello\n"},
		apitype.LogChunk{RunID: runID, Attempt: 1, Token: l.Token, Seq: 2, Stream: "stderr", Data: "oops\n"},
	)

	tests := []struct {
		query string
		want  string
	}{
		{"", "hello\noops\n"},
		{"?attempt=1", "hello\noops\n"},
		{"?stream=stdout", "hello\n"},
		{"?stream=stderr", "oops\n"},
		{"?attempt=2", ""},
	}
	for _, tt := range tests {
		r := b.do(t, "GET", "/v1/runs/"+runID+"/logs"+tt.query, nil)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", tt.query, r.body)
		require.Equal(t, "text/plain; charset=utf-8", r.header.Get("Content-Type"))
		require.Equal(t, tt.want, string(r.body), tt.query)
	}
	for query, field := range map[string]string{"?attempt=0": "attempt", "?attempt=x": "attempt", "?stream=stdin": "stream", "?follow=perhaps": "follow"} {
		r := b.do(t, "GET", "/v1/runs/"+runID+"/logs"+query, nil)
		require.Equal(t, http.StatusBadRequest, r.status, query)
		require.Equal(t, []string{field}, r.fields(t), query)
	}

	// Follow: what is there, then what comes, until the attempt ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/v1/runs/"+runID+"/logs?follow=true", nil)
	require.NoError(t, err)
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	readLine := func() string {
		t.Helper()
		s, err := rd.ReadString('\n')
		require.NoError(t, err)
		return s
	}
	require.Equal(t, "hello\n", readLine())
	require.Equal(t, "oops\n", readLine())
	appendLogs(apitype.LogChunk{RunID: runID, Attempt: 1, Token: l.Token, Seq: 3, Stream: "stdout", Data: "more\n"})
	require.Equal(t, "more\n", readLine())
	appendLogs(apitype.LogChunk{RunID: runID, Attempt: 1, Token: l.Token, Seq: 4, Stream: "stdout", Data: "last\n"})
	res := b.complete(t, apitype.Completion{RunID: runID, Token: l.Token, Status: "succeeded"})
	require.True(t, res.Accepted)
	rest, err := io.ReadAll(rd)
	require.NoError(t, err, "the stream ends when the attempt has ended")
	require.Equal(t, "last\n", string(rest))

	// Following an attempt that has ended answers at once.
	r = b.do(t, "GET", "/v1/runs/"+runID+"/logs?follow=true&stream=stdout", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "hello\nmore\nlast\n", string(r.body))
}

// TestRunLogsTailAndTimestamps: tail=N starts with the last N lines of what is stored,
// then follows; timestamps=true leads each line with the time its chunk came in.
func TestRunLogsTailAndTimestamps(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC))
	b := setupOn(t, clk, nil)
	b.register(t, "w1")
	runID := b.createJob(t, `{"command": ["true"]}`).Run.ID
	l := b.lease(t, "w1", 1).Leases[0]
	seq := int64(0)
	appendLogs := func(stream, data string) {
		t.Helper()
		seq++
		r := b.do(t, "POST", "/v1/attempts/logs", apitype.LogChunksRequest{Chunks: []apitype.LogChunk{
			{RunID: runID, Attempt: 1, Token: l.Token, Seq: seq, Stream: stream, Data: data}}})
		require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
		clk.Advance(1500 * time.Millisecond)
	}
	appendLogs("stdout", "one\ntw")
	appendLogs("stderr", "oops\n")
	appendLogs("stdout", "o\nthree\n")

	for _, tt := range []struct{ query, want string }{
		{"?tail=2", "o\nthree\n"},
		{"?tail=3", "twoops\no\nthree\n"}, // the lines of the text as it is, streams interleaved
		{"?tail=9", "one\ntwoops\no\nthree\n"},
		{"?tail=0", ""},
		{"?tail=1&stream=stdout", "three\n"},
		{"?tail=2&stream=stdout", "two\n" + "three\n"},
		{"?timestamps=true", "2030-01-02T12:00:00.000000000Z one\n" +
			"2030-01-02T12:00:00.000000000Z twoops\n" + // the line began in the first chunk
			"2030-01-02T12:00:03.000000000Z o\n" +
			"2030-01-02T12:00:03.000000000Z three\n"},
		{"?timestamps=true&stream=stderr", "2030-01-02T12:00:01.500000000Z oops\n"},
		{"?timestamps=true&tail=1", "2030-01-02T12:00:03.000000000Z three\n"},
		{"?timestamps=false", "one\ntwoops\no\nthree\n"},
	} {
		r := b.do(t, "GET", "/v1/runs/"+runID+"/logs"+tt.query, nil)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", tt.query, r.body)
		require.Equal(t, tt.want, string(r.body), tt.query)
	}
	for query, field := range map[string]string{"?tail=-1": "tail", "?tail=x": "tail", "?timestamps=maybe": "timestamps"} {
		r := b.do(t, "GET", "/v1/runs/"+runID+"/logs"+query, nil)
		require.Equal(t, http.StatusBadRequest, r.status, query)
		require.Equal(t, []string{field}, r.fields(t), query)
	}

	// Follow from the last line: it, then what comes, stamped, until the attempt ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/v1/runs/"+runID+"/logs?follow=true&tail=1&timestamps=true", nil)
	require.NoError(t, err)
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "2030-01-02T12:00:03.000000000Z three\n", line)
	appendLogs("stdout", "four\n")
	line, err = rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "2030-01-02T12:00:04.500000000Z four\n", line)
	res := b.complete(t, apitype.Completion{RunID: runID, Token: l.Token, Status: "succeeded"})
	require.True(t, res.Accepted)
	rest, err := io.ReadAll(rd)
	require.NoError(t, err, "the stream ends when the attempt has ended")
	require.Empty(t, string(rest))
}

// TestRunLogsFollowEndsWhenClientLeaves follows a run that never starts and hangs up.
func TestRunLogsFollowEndsWhenClientLeaves(t *testing.T) {
	t.Parallel()
	entered, left := make(chan struct{}, 1), make(chan struct{}, 1)
	b := setupWrapped(t, watch("/logs", entered, left))
	created := b.createJob(t, `{"command": ["true"]}`)

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		req, err := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/v1/runs/"+created.Run.ID+"/logs?follow=true", nil)
		if err != nil {
			return
		}
		if resp, err := b.srv.Client().Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	within(t, entered, 10*time.Second, "the follow request")
	cancel()
	within(t, left, 10*time.Second, "the follow handler to notice the client left")
}

func TestAttemptEnded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  model.RunStatus
		attempt int
		n       int
		want    bool
	}{
		{"not started", model.RunQueued, 0, 1, false},
		{"running", model.RunRunning, 1, 1, false},
		{"waiting to retry", model.RunScheduled, 1, 1, true},
		{"a later attempt runs", model.RunRunning, 2, 1, true},
		{"next attempt not started", model.RunQueued, 1, 2, false},
		{"final", model.RunSucceeded, 1, 1, true},
		{"cancelled before starting", model.RunCancelled, 0, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, attemptEnded(&model.Run{Status: tt.status, Attempt: tt.attempt}, tt.n))
		})
	}
}
