package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"sync"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/specjson"
)

// StreamOptions tune StreamJobs and CreateJobsStream.
type StreamOptions struct {
	// Minimal asks for the minimal answer: the lines of rejected specs only (and the summary).
	Minimal bool
	// OnLine, when set, is called with each line of the answer but the summary, in order, as
	// the server commits the batches: a line with an Error was rejected and created nothing;
	// any other is durable. It runs on the calling goroutine.
	OnLine func(apitype.JobStreamLine)
}

// maxStreamAnswerLine bounds a line of a stream's answer (a rejected line's problem lists its
// fields).
const maxStreamAnswerLine = 1 << 20

// StreamJobs sends body, job specs as newline-delimited JSON (one JobSpec per line, as a data
// pipeline writes them; blank lines are skipped but counted), to POST /v1/jobs/stream, and
// reads the answer as the server commits the lines in batches: OnLine gets each line's
// result. It returns the summary once the server has answered every line, and then also,
// when the stream stopped early (the summary is not Complete), its Error: the lines after
// Summary.LastLine were not committed. Rejected lines are no error: they are counted in the
// summary and passed to OnLine.
//
// body is read as it is sent; a client Timeout does not cut the stream short (ctx bounds
// it). Sent to a cluster, the stream goes to another server only when the first could not
// be reached. If the call fails midway, lines without a result may or may not have been
// committed: give specs idempotency keys to send them again safely.
func (c *Client) StreamJobs(ctx context.Context, body io.Reader, opts StreamOptions) (*apitype.JobStreamSummary, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops sending the body when the server stopped reading it
	header := http.Header{
		"Content-Type": {apitype.JobStreamMediaType},
		"Accept":       {apitype.JobStreamMediaType + ", application/problem+json"},
	}
	if opts.Minimal {
		header.Set("Prefer", "return=minimal")
	}
	resp, err := c.sendWith(ctx, c.noTimeout(), http.MethodPost, "/v1/jobs/stream", nil,
		func() io.Reader { return io.NopCloser(body) }, header) // each server tried gets it unread
	if err != nil {
		return nil, err
	}
	defer closeBody(resp.Body)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxStreamAnswerLine)
	sc.Split(wholeLines)
	last := 0
	for sc.Scan() {
		var l apitype.JobStreamLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("POST /v1/jobs/stream: decode answer after line %d: %w", last, err)
		}
		if l.Summary != nil {
			if !l.Summary.Complete && l.Summary.Error != nil {
				return l.Summary, l.Summary.Error
			}
			return l.Summary, nil
		}
		last = l.Line
		if opts.OnLine != nil {
			opts.OnLine(l)
		}
	}
	err = sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, fmt.Errorf("POST /v1/jobs/stream: the answer broke off after line %d, before its summary: %w", last, err)
}

// wholeLines splits an answer into its lines, each ended by a newline: a last line without
// one was broken off.
func wholeLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return 0, nil, io.ErrUnexpectedEOF
	}
	return 0, nil, nil
}

// CreateJobsStream creates the jobs of specs through one stream (StreamJobs): spec n is line
// n of the stream. specs is read as the stream is sent, on another goroutine, and no
// further once the server stops reading; an error encoding a spec ends the call.
func (c *Client) CreateJobsStream(ctx context.Context, specs iter.Seq[apitype.JobSpec], opts StreamOptions) (*apitype.JobStreamSummary, error) {
	r := newSpecReader(specs)
	sum, err := c.StreamJobs(ctx, r, opts)
	r.Close()
	if encErr := r.failed(); encErr != nil {
		return nil, encErr
	}
	return sum, err
}

// specReader encodes job specs, one per line, as its Read asks for them.
type specReader struct {
	mu   sync.Mutex
	next func() (apitype.JobSpec, bool)
	stop func()
	buf  bytes.Buffer // specs encoded, each ended by a newline, not read yet
	err  error        // an encoding error, or io.EOF at the end
}

func newSpecReader(specs iter.Seq[apitype.JobSpec]) *specReader {
	r := &specReader{}
	r.next, r.stop = iter.Pull(specs)
	return r
}

// Read encodes specs until it has p's worth, or they end.
func (r *specReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.err == nil && r.buf.Len() < len(p) {
		spec, ok := r.next()
		if !ok {
			r.err = io.EOF
			break
		}
		// The bytes a json.Encoder writes: json.Marshal's and a newline.
		b, err := specjson.AppendJobSpec(r.buf.AvailableBuffer(), &spec)
		if err != nil {
			r.err = fmt.Errorf("encode job spec %q: %w", spec.Name, err)
			break
		}
		r.buf.Write(append(b, '\n'))
	}
	if r.buf.Len() > 0 {
		return r.buf.Read(p)
	}
	return 0, r.err
}

// Close stops reading specs.
func (r *specReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stop()
	if r.err == nil {
		r.err = io.EOF
	}
	return nil
}

// failed returns the error encoding a spec, if there was one.
func (r *specReader) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if errors.Is(r.err, io.EOF) {
		return nil
	}
	return r.err
}
