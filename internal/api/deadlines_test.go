package api

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
)

// TestLongRequestsOutliveServerTimeouts: with read and write timeouts on the server far
// shorter than a long poll and a followed log, both still answer: the long poll after its
// wait, the follower with output written after a long quiet spell. (Without writeWindow the
// server's write deadline has passed when they write.)
func TestLongRequestsOutliveServerTimeouts(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	b := setup(t, func(c *Config) { c.WriteTimeout = timeout })
	ts := httptest.NewUnstartedServer(b.handler)
	ts.Config.ReadHeaderTimeout, ts.Config.ReadTimeout, ts.Config.WriteTimeout = timeout, timeout, timeout
	ts.Start()
	t.Cleanup(ts.Close)
	b.srv = ts

	created := b.createJob(t, `{"command": ["true"]}`)
	b.register(t, "w1")
	b.register(t, "w2")
	leases := b.lease(t, "w1", 1).Leases
	require.Len(t, leases, 1)
	lease := leases[0]

	// Follow the run's output.
	req, err := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/v1/runs/"+created.Run.ID+"/logs?follow=true", nil)
	require.NoError(t, err)
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// A long poll that waits four times the timeouts: the follower is quiet all along.
	start := time.Now()
	r := b.do(t, "POST", "/v1/workers/w2/lease", `{"max": 1, "wait": "1200ms"}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.GreaterOrEqual(t, time.Since(start), 4*timeout, "the poll waited")

	// Output and the end of the attempt, after the quiet spell, reach the follower.
	r = b.do(t, "POST", "/v1/attempts/logs", apitype.LogChunksRequest{Chunks: []apitype.LogChunk{
		{RunID: lease.RunID, Attempt: lease.Attempt, Token: lease.Token, Seq: 1, Stream: "stdout", Data: "late line\n"}}})
	require.Equal(t, http.StatusNoContent, r.status, "body: %s", r.body)
	require.True(t, b.complete(t, apitype.Completion{RunID: lease.RunID, Token: lease.Token, Status: "succeeded"}).Accepted)
	out, err := io.ReadAll(bufio.NewReader(resp.Body))
	require.NoError(t, err, "the stream ended cleanly")
	require.Equal(t, "late line\n", string(out))
}
