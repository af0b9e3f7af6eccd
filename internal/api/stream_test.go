package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/clock"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/sqlite"
)

// streamHeader is the header of a stream of jobs; minimal adds Prefer: return=minimal.
func streamHeader(minimal bool) http.Header {
	h := http.Header{"Content-Type": {apitype.JobStreamMediaType}}
	if minimal {
		h.Set("Prefer", "return=minimal")
	}
	return h
}

// postStream posts body to POST /v1/jobs/stream.
func (b *testBundle) postStream(t *testing.T, body string, minimal bool) *response {
	t.Helper()
	return b.doCtx(t, context.Background(), "POST", "/v1/jobs/stream", body, streamHeader(minimal))
}

// streamLines decodes an NDJSON answer: the result lines, then the summary (which must be
// its last line, and the only one).
func streamLines(t *testing.T, r *response) ([]apitype.JobStreamLine, apitype.JobStreamSummary) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, apitype.JobStreamMediaType, r.header.Get("Content-Type"))
	var lines []apitype.JobStreamLine
	var sum *apitype.JobStreamSummary
	sc := bufio.NewScanner(strings.NewReader(string(r.body)))
	for sc.Scan() {
		require.Nil(t, sum, "a line after the summary: %s", sc.Text())
		var l apitype.JobStreamLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), "line %q", sc.Text())
		if l.Summary != nil {
			require.Zero(t, l.Line, "the summary line names no input line")
			sum = l.Summary
			continue
		}
		lines = append(lines, l)
	}
	require.NotNil(t, sum, "no summary: %s", r.body)
	return lines, *sum
}

// errorFields names the fields of a line's error.
func errorFields(l apitype.JobStreamLine) []string {
	if l.Error == nil {
		return nil
	}
	return fieldNames(l.Error.Errors)
}

func TestJobStreamAnswersEveryLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	taken := b.createJob(t, `{"name": "taken", "command": ["x"]}`)
	body := strings.Join([]string{
		`{"command": ["a"]}`,                                  // 1
		``,                                                    // 2: blank, skipped
		`{"command": [""]}`,                                   // 3: invalid field
		`{"command": ["b"], "bogus": 1}`,                      // 4: unknown field
		`{"command": `,                                        // 5: broken JSON
		`{"name": "n1", "shell": "echo"}`,                     // 6
		`{"name": "n1", "shell": "echo again"}`,               // 7: the name of line 6
		`{"name": "taken", "handler": "h"}`,                   // 8: a name taken before
		`{"handler": "h", "idempotency_key": "k"}`,            // 9
		`{"handler": "h", "idempotency_key": "k"}`,            // 10: a replay of 9
		`{"handler": "other", "idempotency_key": "k"}`,        // 11: the key of 9 for another request
		`{"command": ["c"], "depends_on": [{"run": "nope"}]}`, // 12: no such upstream run
		`  `,                                   // 13: blank
		`{"command": ["d"], "enabled": false}`, // 14: no run
		`{} {}`,                                // 15: data after the value
	}, "\n") // no newline after the last line
	lines, sum := streamLines(t, b.postStream(t, body, false))

	want := map[int][]string{3: {"command[0]"}, 4: {"bogus"}, 5: nil, 7: {"name"}, 8: {"name"}, 11: {"idempotency_key"},
		12: {"depends_on[0].run"}, 15: nil}
	var numbers []int
	for _, l := range lines {
		numbers = append(numbers, l.Line)
		fields, bad := want[l.Line]
		if !bad {
			require.Nil(t, l.Error, "line %d", l.Line)
			require.NotEmpty(t, l.JobID, "line %d", l.Line)
			continue
		}
		require.NotNil(t, l.Error, "line %d", l.Line)
		require.Empty(t, l.JobID, "line %d", l.Line)
		if fields != nil {
			require.Equal(t, fields, errorFields(l), "line %d: %+v", l.Line, l.Error)
		}
	}
	require.Equal(t, []int{1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15}, numbers, "every line but the blank ones, in order")
	byLine := map[int]apitype.JobStreamLine{}
	for _, l := range lines {
		byLine[l.Line] = l
	}
	require.Contains(t, byLine[5].Error.Detail, "malformed JSON")
	require.Contains(t, byLine[15].Error.Detail, "unexpected data after the JSON value")
	require.Equal(t, http.StatusConflict, byLine[8].Error.Status)
	require.True(t, byLine[10].Existing, "a replay of the key")
	require.Equal(t, byLine[9].JobID, byLine[10].JobID)
	require.Equal(t, byLine[9].RunID, byLine[10].RunID)
	require.NotEmpty(t, byLine[1].RunID)
	require.Empty(t, byLine[14].RunID, "a disabled job has no run")

	require.Equal(t, apitype.JobStreamSummary{Accepted: 5, Existing: 1, Rejected: 8, LastLine: 15, Complete: true}, sum)

	// What the answer accepted is stored; nothing of what it rejected is.
	jobs, runs := b.counts(t)
	// Line 1 is an unnamed one-off job, stored as its run alone: no definition to list.
	require.Equal(t, 1+3, jobs, "taken, and lines 6, 9, 14")
	require.Equal(t, http.StatusOK, b.do(t, "GET", "/v1/jobs/"+byLine[1].JobID, nil).status, "line 1's job is read from its run")
	require.Equal(t, 1+3, runs, "taken's, and those of lines 1, 6, 9")
	got := b.do(t, "GET", "/v1/jobs/n1", nil)
	require.Equal(t, http.StatusOK, got.status)
	require.Contains(t, string(got.body), `"shell":"echo"`)
	require.Contains(t, string(got.body), byLine[6].JobID)
	require.NotEqual(t, taken.Job.ID, byLine[8].JobID)
}

func TestJobStreamMinimalAnswersRejectedLinesOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.postStream(t, "{\"command\": [\"a\"]}\n{\"command\": []}\n{\"shell\": \"b\"}\n", true)
	require.Equal(t, "return=minimal", r.header.Get("Preference-Applied"))
	lines, sum := streamLines(t, r)
	require.Len(t, lines, 1)
	require.Equal(t, 2, lines[0].Line)
	require.Equal(t, []string{"command"}, errorFields(lines[0]))
	require.Equal(t, apitype.JobStreamSummary{Accepted: 2, Rejected: 1, LastLine: 3, Complete: true}, sum)
	_, runs := b.counts(t)
	require.Equal(t, 2, runs, "one run per accepted line")
}

func TestJobStreamRefusesWhatIsNoStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.doCtx(t, context.Background(), "POST", "/v1/jobs/stream", `{"command": ["a"]}`, http.Header{"Content-Type": {"application/json"}})
	require.Equal(t, http.StatusUnsupportedMediaType, r.status)
	require.Equal(t, []string{"Content-Type"}, r.fields(t))
	for _, body := range []string{"", "\n\n  \n"} {
		r = b.postStream(t, body, false)
		require.Equal(t, http.StatusBadRequest, r.status, "%q", body)
		require.Contains(t, r.problem(t).Detail, "empty")
	}
	jobs, _ := b.counts(t)
	require.Zero(t, jobs)
}

// TestJobStreamCommitsInBatches: a stream longer than a batch is committed in several, each
// with an audit entry of the jobs it created, and every job is answered.
func TestJobStreamCommitsInBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 2*streamBatchLines + 500
	var body strings.Builder
	for i := range n {
		fmt.Fprintf(&body, "{\"command\": [\"c%d\"]}\n", i)
	}
	lines, sum := streamLines(t, b.postStream(t, body.String(), false))
	require.Len(t, lines, n)
	require.Equal(t, apitype.JobStreamSummary{Accepted: n, LastLine: n, Complete: true}, sum)
	ids := map[string]bool{}
	for i, l := range lines {
		require.Equal(t, i+1, l.Line)
		ids[l.JobID] = true
	}
	require.Len(t, ids, n)

	// One audit entry per committed batch, holding its jobs; together they are every job.
	var entries []*model.AuditEntry
	require.Eventually(t, func() bool {
		var err error
		entries, err = b.store.ListAudit(t.Context(), &store.ListAuditParams{Limit: 100})
		require.NoError(t, err)
		total := 0
		for _, e := range entries {
			var after streamAudit
			require.NoError(t, json.Unmarshal(e.After, &after))
			total += len(after.JobIDs)
		}
		return total == n
	}, 10*time.Second, 10*time.Millisecond, "the audit entries of the stream")
	require.GreaterOrEqual(t, len(entries), 3, "n is more than two batches")
	seen := 0
	for _, e := range entries {
		require.Equal(t, "job.create_stream", e.Action)
		require.Equal(t, "dev", e.Actor)
		var after streamAudit
		require.NoError(t, json.Unmarshal(e.After, &after))
		require.LessOrEqual(t, len(after.JobIDs), streamBatchLines+streamChunkLines, "a batch is bounded")
		require.Equal(t, after.LastLine-after.FirstLine+1, len(after.JobIDs), "every line of the batch created its job")
		for _, id := range after.JobIDs {
			require.True(t, ids[id], "job %s of the audit log is in the answer", id)
			seen++
		}
	}
	require.Equal(t, n, seen)
}

// streamSession is a stream whose body the test writes as it goes, reading the answer
// meanwhile.
type streamSession struct {
	t    *testing.T
	body *io.PipeWriter
	resp chan *http.Response
	sc   *bufio.Scanner
}

func (b *testBundle) openStream(t *testing.T, minimal bool) *streamSession {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), "POST", b.srv.URL+"/v1/jobs/stream", pr)
	require.NoError(t, err)
	req.Header = streamHeader(minimal)
	s := &streamSession{t: t, body: pw, resp: make(chan *http.Response, 1)}
	go func() {
		resp, err := b.srv.Client().Do(req)
		if err != nil {
			_ = pr.CloseWithError(err)
			close(s.resp)
			return
		}
		s.resp <- resp
	}()
	t.Cleanup(func() { _ = pw.Close() })
	return s
}

// send writes lines to the body.
func (s *streamSession) send(lines ...string) {
	s.t.Helper()
	_, err := io.WriteString(s.body, strings.Join(lines, "\n")+"\n")
	require.NoError(s.t, err)
}

// next reads the next line of the answer (the first waits for the answer to start).
func (s *streamSession) next() apitype.JobStreamLine {
	s.t.Helper()
	if s.sc == nil {
		resp, ok := <-s.resp
		require.True(s.t, ok, "the request failed")
		require.Equal(s.t, http.StatusOK, resp.StatusCode)
		s.t.Cleanup(func() { _ = resp.Body.Close() })
		s.sc = bufio.NewScanner(resp.Body)
	}
	require.True(s.t, s.sc.Scan(), "the answer ended: %v", s.sc.Err())
	var l apitype.JobStreamLine
	require.NoError(s.t, json.Unmarshal(s.sc.Bytes(), &l), "%s", s.sc.Text())
	return l
}

// TestJobStreamAnswersAsItGoes: each line is committed and answered while the client is
// still sending (a pipeline's stream never ends), and a line's result comes once its job is
// stored.
func TestJobStreamAnswersAsItGoes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.openStream(t, false)
	for i := 1; i <= 3; i++ {
		s.send(fmt.Sprintf(`{"name": "j%d", "command": ["x"]}`, i))
		l := s.next()
		require.Equal(t, i, l.Line)
		require.Nil(t, l.Error)
		job, err := b.store.GetJob(t.Context(), &store.GetJobParams{IDOrName: l.JobID})
		require.NoError(t, err, "line %d is stored once answered", i)
		require.Equal(t, fmt.Sprintf("j%d", i), job.Name)
	}
	require.NoError(t, s.body.Close())
	l := s.next()
	require.Equal(t, &apitype.JobStreamSummary{Accepted: 3, LastLine: 3, Complete: true}, l.Summary)
}

// failingCreates fails CreateJobs as unavailable while fail is set.
type failingCreates struct {
	*sqlite.Store
	fail atomic.Bool
}

func (f *failingCreates) CreateJobs(ctx context.Context, p *store.CreateJobsParams) ([]store.CreateJobResult, error) {
	if f.fail.Load() {
		return nil, model.Unavailable("disk full", errors.New("no space left on device"))
	}
	return f.Store.CreateJobs(ctx, p)
}

// TestJobStreamStopsWhenTheStoreFails: a batch the store fails is answered line by line with
// the error and ends the stream, whose summary says where; the batches before it stay.
// When the first batch fails, nothing was answered yet: the answer is the problem.
func TestJobStreamStopsWhenTheStoreFails(t *testing.T) {
	t.Parallel()
	var st *failingCreates
	b := setupStore(t, clock.Real{}, func(s *sqlite.Store) store.Store { st = &failingCreates{Store: s}; return st }, nil)

	s := b.openStream(t, false)
	s.send(`{"name": "ok", "command": ["x"]}`)
	require.Nil(t, s.next().Error)
	st.fail.Store(true)
	s.send(`{"command": []}`, `{"name": "lost", "command": ["x"]}`)
	var lines []apitype.JobStreamLine
	for {
		l := s.next()
		if l.Summary != nil {
			require.False(t, l.Summary.Complete)
			require.Equal(t, http.StatusServiceUnavailable, l.Summary.Error.Status)
			require.Equal(t, 3, l.Summary.LastLine)
			require.Equal(t, 1, l.Summary.Accepted)
			require.Equal(t, 2, l.Summary.Rejected)
			break
		}
		lines = append(lines, l)
	}
	require.Len(t, lines, 2)
	require.Equal(t, []string{"command"}, errorFields(lines[0]), "a bad line keeps its own error")
	require.Equal(t, http.StatusServiceUnavailable, lines[1].Error.Status)
	_, err := b.store.GetJob(t.Context(), &store.GetJobParams{IDOrName: "lost"})
	require.ErrorIs(t, err, model.ErrNotFound)
	_, err = b.store.GetJob(t.Context(), &store.GetJobParams{IDOrName: "ok"})
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, b.do(t, "GET", "/readyz", nil).status,
		"the failed write counts against readiness as any request's")

	r := b.postStream(t, `{"command": ["x"]}`, false)
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	require.Contains(t, r.problem(t).Detail, "disk full")
}

// TestJobStreamLimits: a line longer than the body limit of one job is rejected alone; a
// stream over its own limit stops there, keeping what it committed.
func TestJobStreamLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.Limits.MaxBodyBytes, c.Limits.MaxStreamBodyBytes = 200, 1000 })
	long := `{"command": ["` + strings.Repeat("x", 300) + `"]}`
	lines, sum := streamLines(t, b.postStream(t, `{"command": ["a"]}`+"\n"+long+"\n"+`{"command": ["b"]}`+"\n", false))
	require.Len(t, lines, 3)
	require.Nil(t, lines[0].Error)
	require.Equal(t, http.StatusRequestEntityTooLarge, lines[1].Error.Status)
	require.Contains(t, lines[1].Error.Detail, "longer than 200 bytes")
	require.Nil(t, lines[2].Error, "the line after a long one is read as usual")
	require.True(t, sum.Complete)

	var body strings.Builder
	var ends []int // where each line ends in the body
	for i := 0; body.Len() < 2000; i++ {
		fmt.Fprintf(&body, "{\"command\": [\"c%d\"]}\n", i)
		ends = append(ends, body.Len())
	}
	lines, sum = streamLines(t, b.postStream(t, body.String(), true))
	require.Empty(t, lines, "every line answered was accepted")
	require.False(t, sum.Complete)
	require.Equal(t, http.StatusRequestEntityTooLarge, sum.Error.Status)
	require.Contains(t, sum.Error.Detail, "larger than 1000 bytes")
	require.Positive(t, sum.Accepted)
	require.Equal(t, sum.LastLine, sum.Accepted)
	// The lines committed are those read whole within the limit.
	require.LessOrEqual(t, ends[sum.Accepted-1], 1000)
	require.Greater(t, ends[sum.Accepted], 1000)
	_, runs := b.counts(t)
	require.Equal(t, 2+sum.Accepted, runs, "one run per accepted line")
}

// TestJobStreamScopedToken: a line in a namespace the token may not act in is refused
// alone (403, naming namespace); the token's own namespace is accepted.
func TestJobStreamScopedToken(t *testing.T) {
	t.Parallel()
	b := secureSetup(t)
	etl := b.as(b.mint(t, "etl", model.RoleOperator, []string{"etl"}, ""))
	lines, sum := streamLines(t, etl.postStream(t, `{"namespace": "etl", "command": ["a"]}`+"\n"+`{"namespace": "ops", "command": ["a"]}`+"\n"+`{"command": ["a"]}`, false))
	require.Nil(t, lines[0].Error)
	for _, l := range lines[1:] {
		require.Equal(t, http.StatusForbidden, l.Error.Status, "line %d", l.Line)
		require.Equal(t, []string{"namespace"}, errorFields(l))
	}
	require.Equal(t, 1, sum.Accepted)
	viewer := b.as(b.mint(t, "viewer", model.RoleViewer, nil, ""))
	require.Equal(t, http.StatusForbidden, viewer.postStream(t, `{"command": ["a"]}`, false).status)
}

// TestJobStreamWaitsForItsTurn: under a submission rate, a stream's first batch uses the
// request's turn and each later batch waits for one, instead of failing.
func TestJobStreamWaitsForItsTurn(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	b := setupOn(t, clk, nil, func(c *Config) { c.SubmitRate = &model.RateLimit{Rate: 1, Per: time.Minute} })
	s := b.openStream(t, false)
	s.send(`{"command": ["a"]}`)
	require.Nil(t, s.next().Error)
	s.send(`{"command": ["b"]}`)
	require.Eventually(t, func() bool { return len(clk.Pending()) > 0 }, 10*time.Second, time.Millisecond,
		"the second batch waits for a turn")
	_, runs := b.counts(t)
	require.Equal(t, 1, runs, "nothing committed while waiting")
	clk.Advance(time.Minute)
	l := s.next()
	require.Equal(t, 2, l.Line)
	require.Nil(t, l.Error)
	require.NoError(t, s.body.Close())
	require.True(t, s.next().Summary.Complete)
}

// TestJobStreamOutlivesTheReadTimeout: a stream may last longer than the server's read
// timeout as long as each read comes within it.
func TestJobStreamOutlivesTheReadTimeout(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	b := setup(t, func(c *Config) { c.ReadTimeout = timeout })
	srv := httptest.NewUnstartedServer(b.handler)
	srv.Config.ReadTimeout = timeout
	srv.Start()
	t.Cleanup(srv.Close)
	b.srv = srv
	s := b.openStream(t, false)
	start := time.Now()
	for i := 1; time.Since(start) < 2*timeout; i++ {
		s.send(`{"command": ["a"]}`)
		require.Nil(t, s.next().Error, "line %d, %s after the start", i, time.Since(start))
		time.Sleep(timeout / 4) // the client's pace, not a wait for the server
	}
	require.NoError(t, s.body.Close())
	require.True(t, s.next().Summary.Complete)
}

// TestJobStreamBoundsItsMemory: the reader's chunks and the handler's batches end at their
// number of lines or their size, whichever comes first, so a stream of big specs holds
// no more than a stream of small ones.
func TestJobStreamBoundsItsMemory(t *testing.T) {
	t.Parallel()
	lim := DefaultLimits()
	a := &API{clock: clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), lim: &lim}
	for _, tt := range []struct{ size, n int }{{100, 1500}, {60 << 10, 100}} { // small lines; lines of a 60 KiB shell
		size, n := tt.size, tt.n
		line := `{"shell": "` + strings.Repeat("x", size-len(`{"shell": ""}`)) + `"}` + "\n"
		rd := &streamReader{a: a, ctx: t.Context(), body: strings.NewReader(strings.Repeat(line, n)), lines: lineReader{max: 1 << 20}}
		rd.lines.br = bufio.NewReaderSize(deadlineReader{rd}, streamReadBuffer)
		out := make(chan streamChunk, n)
		rd.run(out)
		var all []streamChunk
		for c := range out {
			require.LessOrEqual(t, len(c.items), streamChunkLines)
			require.Less(t, c.bytes-len(line), streamChunkBytes, "a chunk ends with the line that fills it")
			require.Equal(t, len(c.items)*len(line), c.bytes)
			all = append(all, c)
		}
		queued := make(chan streamChunk, len(all))
		for _, c := range all[1:] {
			queued <- c
		}
		close(queued)
		batch := gather(all[0], queued)
		lines, bytes := len(batch), len(batch)*len(line)
		if size < 1000 {
			require.GreaterOrEqual(t, lines, streamBatchLines, "small lines: the batch is cut by lines")
			require.Less(t, lines, streamBatchLines+streamChunkLines)
		} else {
			require.GreaterOrEqual(t, bytes, streamBatchBytes, "big lines: the batch is cut by size")
			require.Less(t, bytes, streamBatchBytes+streamChunkBytes+len(line))
		}
	}
}
