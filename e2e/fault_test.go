package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// This file holds what the fault suite (the TestFault... tests, issue 12) shares: a record of
// the error answers the rig's clients got, the check that they were clear, and a TCP proxy
// that can cut a connection the way a network partition does. Each fault test runs the rig
// (rig_test.go) under load, does one thing to it, and then requires that every accepted job
// ended succeeded, that no other run failed, and that every error a client saw said what
// happened. docs/reliability.md has the table of what each one measured.

// answerLog is the transport of the rig's clients: it records every answer that was not a
// success (status, Retry-After, Content-Type, the problem's detail) and every request that
// got no answer, while its caller still wanted one. GET /readyz is not recorded: its 503 is
// what a test asks it for.
type answerLog struct {
	next http.RoundTripper

	mu   sync.Mutex
	seen []seenAnswer
}

// seenAnswer is one error answer, or a request with no answer (status 0).
type seenAnswer struct {
	at           time.Time
	method, path string
	status       int
	retryAfter   string
	contentType  string // its media type
	detail       string // the problem's detail, else the body's start, else the transport error
}

func (a seenAnswer) String() string {
	return fmt.Sprintf("%s %s %s: %d (Retry-After %q, %s) %s", a.at.UTC().Format("15:04:05.000"), a.method, a.path,
		a.status, a.retryAfter, a.contentType, a.detail)
}

func newAnswerLog() *answerLog {
	return &answerLog{next: http.DefaultTransport.(*http.Transport).Clone()}
}

// client is an HTTP client that records into l.
func (l *answerLog) client() *http.Client { return &http.Client{Transport: l} }

func (l *answerLog) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if req.URL.Path == "/readyz" {
		return resp, err
	}
	a := seenAnswer{at: time.Now(), method: req.Method, path: req.URL.Path}
	switch {
	case err != nil:
		if req.Context().Err() != nil {
			return resp, err // its caller gave up: not an answer the server gave
		}
		a.detail = err.Error()
	case resp.StatusCode >= 400:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		a.status, a.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
		a.contentType, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
		var p apitype.Problem
		if json.Unmarshal(body, &p) == nil && p.Detail != "" {
			a.detail = p.Detail
		} else {
			a.detail = strings.TrimSpace(string(body[:min(len(body), 200)]))
		}
	default:
		return resp, err
	}
	l.mu.Lock()
	l.seen = append(l.seen, a)
	l.mu.Unlock()
	return resp, err
}

// all returns what l recorded, oldest first.
func (l *answerLog) all() []seenAnswer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// requireClear checks that every error answer l recorded is a 503 with Retry-After and a
// problem document whose detail matches detail, and that every request was answered. It
// returns how many there were and the time from the first to the last.
func (l *answerLog) requireClear(t *testing.T, detail string) (n int, span time.Duration) {
	t.Helper()
	re := regexp.MustCompile(detail)
	var unclear []string
	seen := l.all()
	for _, a := range seen {
		if a.status != http.StatusServiceUnavailable || a.retryAfter == "" || a.contentType != "application/problem+json" ||
			!re.MatchString(a.detail) {
			unclear = append(unclear, a.String())
		}
	}
	require.Empty(t, unclear, "answers that are not a 503 with Retry-After and a problem document matching %q", detail)
	if len(seen) == 0 {
		return 0, 0
	}
	return len(seen), seen[len(seen)-1].at.Sub(seen[0].at)
}

// requireNone checks that the rig's clients got no error answer and no request went
// unanswered.
func (l *answerLog) requireNone(t *testing.T) {
	t.Helper()
	var lines []string
	for _, a := range l.all() {
		lines = append(lines, a.String())
	}
	require.Empty(t, lines, "error answers, or requests with no answer")
}

// serverErrorRe matches a request a server answered with a 500 (its log's "request failed"
// line), and a panic.
var serverErrorRe = regexp.MustCompile(`request failed.*status=5\d\d|panic`)

// endLoad stops the producer of a fault test and checks what every fault test asks of the
// load it held: no submission was refused or left unaccepted, every accepted run succeeded
// (it waits up to a minute for them), and the clients saw no error answer. It returns the
// accepted runs (by id) and every run of the rig.
func (r *rig) endLoad(t *testing.T, p *producer) (accepted map[string]string, runs []*apitype.Run) {
	t.Helper()
	p.stop()
	accepted, _, _, abandoned, refused := p.results()
	require.Empty(t, refused, "submissions answered 4xx")
	require.Empty(t, abandoned, "submissions no server accepted within a minute")
	runs = r.quiesce(nil, time.Minute)
	requireSucceeded(t, runs, accepted)
	r.answers.requireNone(t)
	return accepted, runs
}

// requireServersUp checks that the rig's servers still run and that none answered a request
// with a 500 or panicked: a fault may make a server answer 503, never fail unexpectedly. It
// returns how many requests they answered 503.
func (r *rig) requireServersUp(t *testing.T) (unavailable int) {
	t.Helper()
	for i, s := range r.servers {
		select {
		case <-s.p.done:
			t.Fatalf("server %s exited:\n%s", serverName(i), s.p.stderr.String())
		default:
		}
		for line := range strings.Lines(s.p.stderr.String()) {
			if !serverErrorRe.MatchString(line) {
				continue
			}
			require.Contains(t, line, "status=503", "server %s failed a request other than as unavailable", serverName(i))
			unavailable++
		}
	}
	return unavailable
}

// leaseKillLog is what a worker logs as it kills an attempt whose lease it could not renew.
const leaseKillLog = `msg="lease about to expire without a successful heartbeat: killing attempt"`

// workerLogged reports whether a worker of the rig logged a line that matches the regular
// expression re.
func (r *rig) workerLogged(re string) bool {
	rx := regexp.MustCompile(re)
	for _, w := range r.workers {
		if rx.MatchString(w.w.out.String()) {
			return true
		}
	}
	return false
}

// acceptedSince waits until the servers accepted n one-off runs created after at: the load
// goes on after a fault.
func (r *rig) acceptedSince(at time.Time, n int, what string) {
	r.t.Helper()
	waitFor(r.t, time.Minute, fmt.Sprintf("%d one-off runs accepted %s", n, what), func() bool {
		page, err := r.all.ListRuns(context.Background(), client.ListRunsOptions{Limit: 200})
		if err != nil {
			return false
		}
		k := 0
		for _, run := range page.Items {
			if run.Trigger != "cron" && run.CreatedAt.After(at) {
				k++
			}
		}
		return k >= n
	})
}

// cutProxy forwards TCP connections to target until it is cut: then the connections it
// carries go silent (nothing more is forwarded either way, nothing is closed) and new ones
// are accepted and held with nothing forwarded, as behind a network that drops every packet.
// heal makes it forward new connections again and closes the silenced ones.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	gen   int // incremented by heal: connections of an older generation stay silent
	conns map[net.Conn]int
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]int{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *cutProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		gen, ok := p.track(in)
		if !ok {
			continue // cut: held, silent, until heal closes it
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[out] = gen
		p.mu.Unlock()
		go p.pipe(out, in, gen)
		go p.pipe(in, out, gen)
	}
}

// track registers a new connection and reports whether it may be forwarded.
func (p *cutProxy) track(c net.Conn) (gen int, forward bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = p.gen
	return p.gen, !p.cut
}

// pipe copies from src to dst while the proxy forwards connections of generation gen. Cut,
// it stops and leaves both open: heal, or the test's end, closes them.
func (p *cutProxy) pipe(dst, src net.Conn, gen int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			pass := !p.cut && p.gen == gen
			p.mu.Unlock()
			if !pass {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range []net.Conn{src, dst} {
		c.Close()
		delete(p.conns, c)
	}
}

// cutOff silences every connection and holds new ones.
func (p *cutProxy) cutOff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// heal forwards new connections again and closes the silenced ones.
func (p *cutProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, g := range p.conns {
		if g == p.gen {
			c.Close()
			delete(p.conns, c)
		}
	}
	p.cut = false
	p.gen++
}
