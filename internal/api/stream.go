package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/store"
)

// POST /v1/jobs/stream takes any number of jobs as newline-delimited JSON, one JobSpec per
// line, the way a data pipeline produces them.
//
// A reader goroutine reads the body as it arrives, decodes and checks each line as POST
// /v1/jobs checks its body (decodeJSON, buildJob, the token's namespaces) and hands the
// lines on in chunks. The handler's goroutine takes whatever lines have arrived, up to
// about streamBatchLines (or streamBatchBytes of input), and submits their valid jobs in
// one group commit (engine.SubmitJobs) while the reader goes on, up to streamInFlight
// batches at once; as each batch commits, in order, it writes the batch's results and
// flushes them. Memory holds a few batches whatever the length of the stream (the queued
// chunks and the batches in flight: at most about 20 MiB of input), and a slow client holds
// nothing of the store: a batch is submitted only once its lines are read.
//
// What the client can rely on (docs/api.md says it too):
//
//   - Each line stands alone. A bad line (malformed JSON, an unknown or invalid field, a
//     namespace the token may not use, a name already taken, an upstream run that does not
//     exist, a line longer than Limits.MaxBodyBytes) is answered with its line number and a
//     problem naming the field, and creates nothing; the lines around it are unaffected.
//   - A line's result is written only after its batch committed: an accepted line is
//     durable. Every batch commits whole or not at all.
//   - When the store fails a batch, that batch's lines are answered with the error (none
//     of them committed), the batches already submitted are answered as they end, and no
//     other is started: the summary has complete false and the last line answered, so the
//     client resends the lines answered with a 5xx and those after it. A body over
//     Limits.MaxStreamBodyBytes, a read that times out or a broken body also stop it, after
//     the lines read whole before were committed and answered.
//   - If the connection breaks, the lines the client saw no result for may or may not have
//     committed: resending them with idempotency keys makes that safe.
//   - The answer is 200 once the first batch is answered. An error before that (the body
//     empty, the store failing the first batch) is a problem document, and then nothing
//     was created.

const (
	// streamBatchLines and streamBatchBytes (of input lines) bound one commit of a stream:
	// a batch ends with the chunk that reaches either.
	streamBatchLines = 1000
	streamBatchBytes = 4 << 20
	// streamChunkLines and streamChunkBytes bound what the reader hands on at once. It hands
	// on less when it has used up the input read so far, so that a line never waits for
	// later ones.
	streamChunkLines = 64
	streamChunkBytes = 256 << 10
	// streamQueuedChunks is how many chunks may wait for the handler: about a batch.
	streamQueuedChunks = streamBatchLines / streamChunkLines
	// streamReadBuffer is the reader's buffer; a longer line is gathered apart, up to
	// Limits.MaxBodyBytes.
	streamReadBuffer = 64 << 10
)

// streamItem is a line of a stream, checked.
type streamItem struct {
	line int
	job  store.NewJob // Job is nil when the line was rejected
	err  error        // why it was rejected
}

// createJobStream serves POST /v1/jobs/stream.
func (a *API) createJobStream(w http.ResponseWriter, r *http.Request) error {
	if err := streamMediaType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	ctx := r.Context()
	rc := http.NewResponseController(w)
	// Read while writing. HTTP/2 always does; a writer that cannot (a test's recorder) reads
	// whatever the client sent meanwhile, which a body already whole is.
	_ = rc.EnableFullDuplex()

	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	rd := &streamReader{a: a, ctx: readCtx, rc: rc, body: r.Body, timeout: a.cfg.ReadTimeout,
		lines: lineReader{max: int(a.lim.MaxBodyBytes)}}
	rd.lines.br = bufio.NewReaderSize(deadlineReader{rd}, streamReadBuffer)
	chunks := make(chan streamChunk, streamQueuedChunks)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rd.run(chunks)
	}()

	sw := &streamAnswer{a: a, w: w, r: r, rc: rc, minimal: preferMinimal(r)}
	sw.enc = json.NewEncoder(&sw.buf)
	stopErr := sw.commitAll(ctx, chunks)
	gone := ctx.Err() != nil // the client went away
	if stopErr != nil {
		// Answer at once, then read the rest of the body without checking it, so that the
		// connection stays in step (a client reading the answer stops sending).
		stopReading()
		err := sw.finish(stopErr, gone)
		for range chunks {
		}
		<-done
		closeBody(r)
		return err
	}
	<-done
	closeBody(r)
	return sw.finish(rd.err, gone)
}

// closeBody closes the body of a request read by a handler that enabled full duplex, once
// it is done reading: the server then finds what is left of it while the handler runs, not
// after (golang/go#68560: after, an HTTP/1 connection can panic on its next request).
func closeBody(r *http.Request) { _ = r.Body.Close() }

// streamMediaType refuses (415) a body that is not newline-delimited JSON.
func streamMediaType(contentType string) error {
	mt, _, err := mime.ParseMediaType(contentType)
	if err == nil && (mt == apitype.JobStreamMediaType || mt == "application/jsonl") {
		return nil
	}
	return &httpError{status: http.StatusUnsupportedMediaType,
		detail: fmt.Sprintf("Content-Type must be %s (one job spec per line), got %q", apitype.JobStreamMediaType, contentType),
		fields: []apitype.FieldError{{Field: "Content-Type", Message: "must be " + apitype.JobStreamMediaType}}}
}

// streamReader reads a stream's lines and checks them, in its own goroutine.
type streamReader struct {
	a       *API
	ctx     context.Context // ends when the handler stops reading
	rc      *http.ResponseController
	body    io.Reader     // the request's, read by this goroutine alone
	timeout time.Duration // each read of the body gets this long (0: no deadline)
	lines   lineReader
	dec     lineDecoder
	spec    apitype.JobSpec // the line being checked
	line    int             // the number of the last line read
	err     error           // why reading stopped before the end of the body; read after run returns
}

// deadlineReader gives each read of the body the read timeout from when it starts, so that
// a stream may last as long as its client keeps sending, and a client that stops is cut off.
type deadlineReader struct{ s *streamReader }

func (d deadlineReader) Read(p []byte) (int, error) {
	if d.s.timeout > 0 {
		_ = d.s.rc.SetReadDeadline(time.Now().Add(d.s.timeout)) // not supported: the server's own deadline holds
	}
	return d.s.body.Read(p)
}

// streamChunk is lines the reader hands on at once, and their size in the body.
type streamChunk struct {
	items []streamItem
	bytes int
}

// run reads lines until the body ends, sending them on in chunks; it closes out when done.
// Once its context ends it reads on to the end of the body, checking and sending nothing.
func (s *streamReader) run(out chan<- streamChunk) {
	defer close(out)
	chunk := streamChunk{items: make([]streamItem, 0, streamChunkLines)}
	for {
		line, tooLong, err := s.lines.next()
		if err != nil && !errors.Is(err, io.EOF) {
			line, tooLong = nil, false // a line the body broke off is no line
		}
		if s.ctx.Err() != nil {
			line, tooLong = nil, false // stopped: read on to the end, checking nothing
		}
		if len(line) > 0 || tooLong {
			s.line++
			if tooLong {
				chunk.items = append(chunk.items, streamItem{line: s.line, err: &httpError{status: http.StatusRequestEntityTooLarge,
					detail: fmt.Sprintf("the line is longer than %d bytes", s.lines.max)}})
			} else if len(bytes.TrimSpace(line)) > 0 {
				chunk.items = append(chunk.items, s.check(line))
				chunk.bytes += len(line)
			}
		}
		last := err != nil
		full := len(chunk.items) == streamChunkLines || chunk.bytes >= streamChunkBytes
		if len(chunk.items) > 0 && (last || full || s.lines.br.Buffered() == 0) {
			select {
			case out <- chunk:
			case <-s.ctx.Done():
			}
			chunk = streamChunk{items: make([]streamItem, 0, streamChunkLines)}
		}
		if last {
			if !errors.Is(err, io.EOF) && s.ctx.Err() == nil {
				s.err = bodyError(err)
			}
			return
		}
	}
}

// check decodes and validates one line, as POST /v1/jobs its body.
func (s *streamReader) check(line []byte) streamItem {
	it := streamItem{line: s.line}
	s.spec = apitype.JobSpec{} // the job keeps what the spec's fields point to, not the spec
	if !readSpec(line, &s.spec) {
		s.spec = apitype.JobSpec{}
		if err := s.dec.decode(line, &s.spec); err != nil {
			it.err = err
			return it
		}
	}
	vj, errs := buildJob(&s.spec, "", s.a.clock.Now(), s.a.lim, sealing{keys: s.a.keys})
	if len(errs) > 0 {
		it.err = invalidFields(errs)
		return it
	}
	if err := actIn(s.ctx, "namespace", vj.Job.Namespace); err != nil {
		it.err = err
		return it
	}
	it.job = store.NewJob{Job: vj.Job, Run: vj.Run}
	return it
}

// lineReader splits a body into lines without copying those that fit its buffer.
type lineReader struct {
	br   *bufio.Reader
	max  int    // the longest line kept, its newline not counted
	long []byte // a line longer than the buffer, gathered (up to just past max)
}

// next returns the next line, its newline included (valid until the next call), and the
// error that ended the body after it (io.EOF at its end). A line over max is consumed and
// reported by tooLong instead.
func (l *lineReader) next() (line []byte, tooLong bool, err error) {
	b, err := l.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		l.long = append(l.long[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			b, err = l.br.ReadSlice('\n')
			if len(l.long) <= l.max { // past max it is too long whatever follows
				l.long = append(l.long, b...)
			}
		}
		b = l.long
	}
	if len(bytes.TrimSuffix(b, []byte{'\n'})) > l.max {
		return nil, true, err
	}
	return b, false, err
}

// streamAnswer commits a stream's batches and writes their results.
type streamAnswer struct {
	a       *API
	w       http.ResponseWriter
	r       *http.Request
	rc      *http.ResponseController
	minimal bool

	started bool // the header is written
	batches int  // submitted
	sum     apitype.JobStreamSummary
	buf     bytes.Buffer
	enc     *json.Encoder // into buf
}

// commitAll commits batches until the reader is done, up to streamInFlight of them at once
// (the first alone), and answers them in order as they commit. It returns why it stopped
// early: the error of a batch the store failed (the batches already submitted are answered
// first; no other is), or of the request's context.
func (s *streamAnswer) commitAll(ctx context.Context, chunks <-chan streamChunk) error {
	var inFlight []*streamBatch // in line order
	var stopErr error
	for {
		var oldest <-chan struct{} // nil: nothing in flight
		if len(inFlight) > 0 {
			oldest = inFlight[0].done
		}
		depth := streamInFlight
		if !s.started {
			depth = 1 // the first batch alone: its failure is still the whole answer
		}
		if stopErr != nil || len(inFlight) >= depth {
			if oldest == nil {
				return stopErr
			}
			<-oldest
		} else {
			select {
			case chunk, ok := <-chunks:
				if !ok {
					for _, b := range inFlight {
						<-b.done
						if err := s.answer(ctx, b); stopErr == nil {
							stopErr = err
						}
					}
					return stopErr
				}
				b, err := s.start(ctx, gather(chunk, chunks))
				if err != nil { // the request's context ended waiting for a turn
					stopErr = err
					continue
				}
				inFlight = append(inFlight, b)
				continue
			case <-oldest:
			}
		}
		if err := s.answer(ctx, inFlight[0]); stopErr == nil {
			stopErr = err
		}
		inFlight = inFlight[1:]
	}
}

// streamInFlight is how many batches of one stream may be committing at once: while one
// commits the next is sent, so that the store is never idle waiting for the stream's own
// round trips (PostgreSQL runs them side by side; SQLite's group commit takes the next as
// soon as the first is done).
const streamInFlight = 3

// gather takes first and whatever more chunks have arrived, up to about streamBatchLines
// lines or streamBatchBytes.
func gather(first streamChunk, chunks <-chan streamChunk) []streamItem {
	batch, size := first.items, first.bytes
	for len(batch) < streamBatchLines && size < streamBatchBytes {
		select {
		case chunk, ok := <-chunks:
			if !ok {
				return batch
			}
			batch, size = append(batch, chunk.items...), size+chunk.bytes
		default:
			return batch
		}
	}
	return batch
}

// streamBatch is a batch of a stream being committed.
type streamBatch struct {
	items []streamItem
	slots []int // the index in items of each job submitted
	res   []store.CreateJobResult
	err   error         // the store's
	done  chan struct{} // closed when res or err is set
}

// start submits the valid jobs of a batch in one group commit, in its own goroutine. Every
// batch but the first takes a turn of the client's submission rate first (the first took
// the request's), waiting for it: the error is then ctx's.
func (s *streamAnswer) start(ctx context.Context, items []streamItem) (*streamBatch, error) {
	b := &streamBatch{items: items, done: make(chan struct{})}
	if s.batches > 0 {
		if err := s.a.awaitTurn(ctx, s.r); err != nil {
			return nil, err
		}
	}
	s.batches++
	go func() {
		defer close(b.done)
		b.res, b.err = s.submit(ctx, b)
	}()
	return b, nil
}

// submit checks the upstream runs of the batch's valid jobs (a line naming one that does
// not exist is rejected) and submits the rest, noting in b.slots where each is.
func (s *streamAnswer) submit(ctx context.Context, b *streamBatch) ([]store.CreateJobResult, error) {
	jobs := make([]store.NewJob, 0, len(b.items))
	for i := range b.items {
		it := &b.items[i]
		if it.job.Job == nil {
			continue
		}
		if ups := upstreamOf(it.job.Run, ""); len(ups) > 0 {
			errs, err := s.a.missingUpstream(ctx, ups)
			if err != nil {
				return nil, err
			}
			if len(errs) > 0 {
				it.err = invalidFields(errs)
				continue
			}
		}
		jobs = append(jobs, it.job)
		b.slots = append(b.slots, i)
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	res, err := s.a.eng.SubmitJobs(ctx, jobs)
	if err != nil {
		return nil, err
	}
	if len(res) != len(jobs) {
		return nil, fmt.Errorf("stream jobs: %d results for %d jobs", len(res), len(jobs))
	}
	return res, nil
}

// answer writes the results of a batch that has committed (or failed) and records its audit
// entry. It returns the error that stops the stream: the store's, which the batch's lines
// are answered with (unless nothing was answered yet: then it is the answer), or the
// request's context's.
func (s *streamAnswer) answer(ctx context.Context, b *streamBatch) error {
	err := b.err
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil && !s.started:
		return err
	case err != nil:
		for i := range b.items {
			if b.items[i].err == nil {
				b.items[i].err = err
			}
		}
		b.slots = nil
	}
	audit := streamAudit{FirstLine: b.items[0].line, LastLine: b.items[len(b.items)-1].line}
	k := 0
	for i := range b.items {
		it := &b.items[i]
		out := apitype.JobStreamLine{Line: it.line}
		if k < len(b.slots) && b.slots[k] == i {
			switch rr := b.res[k]; {
			case rr.Err != nil || rr.Conflict:
				_, _, it.err = createResult(rr, "", it.job.Job)
			default:
				out.JobID, out.Existing = rr.Job.ID, rr.Existing
				if rr.Run != nil {
					out.RunID = rr.Run.ID
				}
			}
			k++
		}
		if it.err != nil {
			out.Error = problemFor(it.err)
			if out.Error.Status >= 500 && err == nil {
				s.a.log.ErrorContext(ctx, "create job in stream", "line", it.line, "err", it.err)
			}
			s.sum.Rejected++
		} else {
			s.sum.Accepted++
			if out.Existing {
				s.sum.Existing++
			} else {
				audit.JobIDs = append(audit.JobIDs, out.JobID)
			}
		}
		s.sum.LastLine = it.line
		if it.err != nil || !s.minimal {
			if err := s.encode(out); err != nil {
				return err
			}
		}
	}
	if len(audit.JobIDs) > 0 {
		noteCommit(ctx, &audit)
	}
	if ferr := s.flush(); ferr != nil {
		return ferr
	}
	return err
}

// streamAudit is the After of the audit entry of a batch of a stream: its lines and the
// jobs it created.
type streamAudit struct {
	FirstLine int      `json:"first_line"`
	LastLine  int      `json:"last_line"`
	JobIDs    []string `json:"job_ids"`
}

// encode adds a line to the answer.
func (s *streamAnswer) encode(line apitype.JobStreamLine) error {
	if err := s.enc.Encode(&line); err != nil {
		return fmt.Errorf("encode stream answer: %w", err)
	}
	return nil
}

// flush writes the results held, starting the answer if it is not yet.
func (s *streamAnswer) flush() error {
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", apitype.JobStreamMediaType)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no") // tell proxies not to buffer the stream
		if s.minimal {
			h.Set("Preference-Applied", "return=minimal")
		}
		s.w.WriteHeader(http.StatusOK)
	}
	s.a.writeWindow(s.w)
	if s.buf.Len() > 0 {
		_, err := s.w.Write(s.buf.Bytes())
		s.buf.Reset()
		if err != nil {
			return fmt.Errorf("write stream results: %w", err)
		}
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("flush stream results: %w", err)
	}
	return nil
}

// finish ends the answer with its summary; stopErr is why the stream stopped early (nil:
// it did not), gone that the client went away. Before the answer started, an error is the
// answer (a problem document).
func (s *streamAnswer) finish(stopErr error, gone bool) error {
	if stopErr != nil {
		s.a.ready.noteWrite(stopErr, s.a.clock.Now()) // now, not once the rest of the body is read
	}
	if !s.started {
		switch {
		case stopErr != nil && !gone:
			s.a.writeError(s.w, s.r, stopErr) // now, not once the rest of the body is read
			return &answeredError{err: stopErr}
		case stopErr != nil:
			return stopErr
		case s.sum.LastLine == 0:
			return badRequest("request body is empty: want one job spec per line")
		}
	}
	ctx := s.r.Context()
	s.sum.Complete = stopErr == nil
	if stopErr != nil {
		if gone {
			return &answeredError{err: stopErr} // no one to tell
		}
		s.sum.Error = problemFor(stopErr)
		if s.sum.Error.Status >= 500 {
			s.a.log.ErrorContext(ctx, "job stream stopped", "last_line", s.sum.LastLine, "err", stopErr)
		}
	}
	if err := s.encode(apitype.JobStreamLine{Summary: &s.sum}); err != nil {
		return err
	}
	if err := s.flush(); err != nil {
		return &answeredError{err: err}
	}
	if stopErr != nil {
		return &answeredError{err: stopErr}
	}
	return nil
}

// answeredError is a handler's error that its answer already reported (in a stream's
// summary): the endpoint counts it (readiness) but writes nothing more.
type answeredError struct{ err error }

func (e *answeredError) Error() string { return e.err.Error() }
func (e *answeredError) Unwrap() error { return e.err }
