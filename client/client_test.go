package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/client"
)

// request is what the fake server saw.
type request struct {
	Method string
	Path   string // escaped path
	Query  url.Values
	Body   string
	Header http.Header
}

// answer is what the fake server says; ContentType defaults to application/json.
type answer struct {
	Status      int
	ContentType string
	Body        string
}

// fakeServer records requests and answers them in order with canned answers.
type fakeServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
	answers  []answer
}

func newFakeServer(t testing.TB, answers ...answer) *fakeServer {
	t.Helper()
	f := &fakeServer{answers: answers}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, request{
		Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Body: string(body), Header: r.Header.Clone(),
	})
	a := answer{Status: http.StatusTeapot, ContentType: "text/plain", Body: "no answer left"}
	if n < len(f.answers) {
		a = f.answers[n]
	}
	f.mu.Unlock()
	if a.ContentType == "" {
		a.ContentType = "application/json"
	}
	if a.Status == 0 {
		a.Status = http.StatusOK
	}
	w.Header().Set("Content-Type", a.ContentType)
	w.WriteHeader(a.Status)
	_, _ = io.WriteString(w, a.Body)
}

func (f *fakeServer) seen() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.requests...)
}

func newClient(t testing.TB, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, opts...)
	require.NoError(t, err)
	return c
}

// deadAddr returns an address that refuses connections.
func deadAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{name: "one", in: "http://a:8080", want: []string{"http://a:8080"}},
		{name: "trailing slash and prefix", in: "https://a/stint/", want: []string{"https://a/stint"}},
		{name: "no scheme", in: "localhost:8080", want: []string{"http://localhost:8080"}},
		{name: "list", in: "http://a:1, http://b:2,,", want: []string{"http://a:1", "http://b:2"}},
		{name: "empty", in: " , ", wantErr: "no server URL"},
		{name: "bad scheme", in: "ftp://a", wantErr: "scheme must be http or https"},
		{name: "query", in: "http://a/?x=1", wantErr: "no query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := client.New(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, c.Servers())
		})
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, answer{Body: `{"items":[]}`}, answer{Body: `{"items":[]}`})

	c := newClient(t, f.URL, client.WithToken("s3cret"), client.WithUserAgent("test-agent/1"))
	_, err := c.ListQueues(context.Background())
	require.NoError(t, err)
	_, err = newClient(t, f.URL).ListQueues(context.Background())
	require.NoError(t, err)

	seen := f.seen()
	require.Equal(t, "Bearer s3cret", seen[0].Header.Get("Authorization"))
	require.Equal(t, "test-agent/1", seen[0].Header.Get("User-Agent"))
	require.Empty(t, seen[0].Header.Get("Content-Type"), "a GET has no body")
	require.Empty(t, seen[1].Header.Get("Authorization"))
	require.Equal(t, "stint-go-client", seen[1].Header.Get("User-Agent"))
}

func TestErrorAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer answer
		check  func(t *testing.T, err error)
	}{
		{
			name: "problem with field errors",
			answer: answer{Status: 400, ContentType: "application/problem+json", Body: `{"type":"about:blank",
				"title":"invalid job","status":400,"detail":"2 fields are wrong",
				"errors":[{"field":"command","message":"give one of command, shell, handler"},{"field":"priority","message":"too big"}]}`},
			check: func(t *testing.T, err error) {
				var p *apitype.Problem
				require.ErrorAs(t, err, &p)
				require.Equal(t, "invalid job", p.Title)
				require.Equal(t, 400, p.Status)
				require.Equal(t, "2 fields are wrong", p.Detail)
				require.Equal(t, []apitype.FieldError{
					{Field: "command", Message: "give one of command, shell, handler"},
					{Field: "priority", Message: "too big"},
				}, p.Errors)
				require.Equal(t, 400, client.StatusCode(err))
			},
		},
		{
			name:   "not found problem without status",
			answer: answer{Status: 404, ContentType: "application/problem+json; charset=utf-8", Body: `{"title":"run not found"}`},
			check: func(t *testing.T, err error) {
				var p *apitype.Problem
				require.ErrorAs(t, err, &p)
				require.Equal(t, 404, p.Status, "status filled from the answer")
				require.True(t, client.IsNotFound(err))
			},
		},
		{
			name:   "problem without title",
			answer: answer{Status: 409, ContentType: "application/problem+json", Body: `{"status":409,"detail":"run is final"}`},
			check: func(t *testing.T, err error) {
				var p *apitype.Problem
				require.ErrorAs(t, err, &p)
				require.Equal(t, "Conflict", p.Title)
				require.Equal(t, "Conflict: run is final", err.Error())
			},
		},
		{
			name:   "not a problem",
			answer: answer{Status: 502, ContentType: "text/html", Body: "<html>bad gateway</html>\n"},
			check: func(t *testing.T, err error) {
				var p *apitype.Problem
				require.False(t, errors.As(err, &p))
				var h *client.HTTPError
				require.ErrorAs(t, err, &h)
				require.Equal(t, 502, h.StatusCode)
				require.Equal(t, "GET /v1/runs/r1: 502 Bad Gateway: <html>bad gateway</html>", err.Error())
				require.Equal(t, 502, client.StatusCode(err))
			},
		},
		{
			name:   "json that is not a problem",
			answer: answer{Status: 500, Body: `["x"]`},
			check: func(t *testing.T, err error) {
				var h *client.HTTPError
				require.ErrorAs(t, err, &h)
				require.Equal(t, 500, h.StatusCode)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeServer(t, tt.answer)
			_, err := newClient(t, f.URL).GetRun(context.Background(), "r1")
			require.Error(t, err)
			tt.check(t, err)
		})
	}
}

func TestBadAnswerBody(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, answer{Body: `{"items": 3}`})
	_, err := newClient(t, f.URL).ListRuns(context.Background(), client.ListRunsOptions{})
	require.ErrorContains(t, err, "GET /v1/runs: decode answer")
}

func TestEmptyID(t *testing.T) {
	t.Parallel()
	c := newClient(t, "http://127.0.0.1:1")
	_, err := c.GetRun(context.Background(), "")
	require.EqualError(t, err, "get run: empty id")
	_, err = c.DeleteJob(context.Background(), "")
	require.EqualError(t, err, "delete job: empty id")
}

func TestTransportError(t *testing.T) {
	t.Parallel()
	addr := deadAddr(t)
	c := newClient(t, "http://"+addr)
	err := c.Health(context.Background())
	require.ErrorContains(t, err, "GET http://"+addr+"/healthz: dial tcp")
	require.Equal(t, 0, client.StatusCode(err))
}

// countingClient counts the dials to addr.
func countingClient(addr string, dials *atomic.Int32) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, a string) (net.Conn, error) {
		if a == addr {
			dials.Add(1)
		}
		return d.DialContext(ctx, network, a)
	}
	return &http.Client{Transport: tr}
}

func TestFailOver(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t,
		answer{Status: 201, Body: `{"job":{"id":"j1"},"run":{"id":"r1"}}`},
		answer{Body: `{"id":"r1","status":"queued"}`},
	)
	dead := deadAddr(t)
	var dials atomic.Int32
	c := newClient(t, "http://"+dead+","+f.URL, client.WithHTTPClient(countingClient(dead, &dials)))

	// A POST whose connection could not be made is safe to send to the next server.
	resp, created, err := c.CreateJob(context.Background(), &apitype.JobSpec{Shell: "true"})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "r1", resp.Run.ID)

	// The client now sticks to the server that answered.
	_, err = c.GetRun(context.Background(), "r1")
	require.NoError(t, err)
	require.Equal(t, int32(1), dials.Load())
	require.Len(t, f.seen(), 2)
}

func TestNoFailOverOfSentWrite(t *testing.T) {
	t.Parallel()
	// The first server takes the request and drops the connection: the write may have
	// happened, so it must not be sent to the second.
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(drop.Close)
	f := newFakeServer(t, answer{Status: 201, Body: `{}`})

	c := newClient(t, drop.URL+","+f.URL)
	_, _, err := c.CreateJob(context.Background(), &apitype.JobSpec{Shell: "true"})
	require.ErrorContains(t, err, "POST "+drop.URL+"/v1/jobs")
	require.Empty(t, f.seen())
}

// The worker protocol's calls may be sent again: they move to the next server when the
// first drops them or answers 5xx; an ordinary write that a server saw does not.
func TestWorkerCallsFailOver(t *testing.T) {
	t.Parallel()
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(drop.Close)
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(unavailable.Close)
	for _, tc := range []struct {
		name  string
		first string
	}{
		{"connection dropped", drop.URL},
		{"503", unavailable.URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeServer(t, answer{Body: `{"lost":["r1"]}`}, answer{Status: 201, Body: `{}`})
			c := newClient(t, tc.first+","+f.URL)
			hb, err := c.Heartbeat(context.Background(), "w1", &apitype.HeartbeatRequest{Session: "s"})
			require.NoError(t, err)
			require.Equal(t, []string{"r1"}, hb.Lost)

			c = newClient(t, tc.first+","+f.URL)
			_, _, err = c.CreateJob(context.Background(), &apitype.JobSpec{Shell: "true"})
			require.Error(t, err, "a job submission is not sent twice")
			require.Len(t, f.seen(), 1)
		})
	}
}

func TestLongCallsIgnoreClientTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 20 * time.Millisecond
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/lease") {
			// Any other call is answered never: only the client's Timeout ends it, however
			// late a busy machine runs its timers.
			<-r.Context().Done()
			return
		}
		// Longer than the client's Timeout: a long poll the server holds.
		select {
		case <-time.After(5 * timeout):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"leases":[]}`)
	}))
	t.Cleanup(slow.Close)
	c := newClient(t, slow.URL, client.WithHTTPClient(&http.Client{Timeout: timeout}))

	wait := apitype.Duration(time.Second)
	_, err := c.Lease(context.Background(), "w1", &apitype.LeaseRequest{Max: 1, Wait: &wait})
	require.NoError(t, err)

	_, err = c.ListWorkers(context.Background())
	require.ErrorContains(t, err, "Client.Timeout")
}

func TestHealth(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t,
		answer{ContentType: "text/plain", Body: "ok"},
		answer{Status: 503, ContentType: "application/problem+json", Body: `{"title":"not ready","status":503,"detail":"migrations running"}`},
	)
	c := newClient(t, f.URL)
	require.NoError(t, c.Health(context.Background()))
	err := c.Ready(context.Background())
	require.EqualError(t, err, "not ready: migrations running")
	seen := f.seen()
	require.Equal(t, "/healthz", seen[0].Path)
	require.Equal(t, "/readyz", seen[1].Path)
}

func TestContextCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := newFakeServer(t)
	_, err := newClient(t, f.URL).GetRun(ctx, "r1")
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, strings.HasPrefix(err.Error(), "GET "), err.Error())
}

// callCase is one SDK call, the request it must make, the answer it gets and what it must
// return.
type callCase struct {
	name      string
	call      func(ctx context.Context, c *client.Client) (any, error)
	method    string
	path      string
	query     string // encoded; "" for none
	body      string // JSON; "" for no body
	answer    answer
	check     func(t *testing.T, got any)
	wantError string
}

func runCalls(t *testing.T, cases []callCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeServer(t, tt.answer)
			got, err := tt.call(context.Background(), newClient(t, f.URL))
			if tt.wantError != "" {
				require.ErrorContains(t, err, tt.wantError)
			} else {
				require.NoError(t, err)
			}

			seen := f.seen()
			require.Len(t, seen, 1)
			r := seen[0]
			require.Equal(t, tt.method, r.Method)
			require.Equal(t, tt.path, r.Path)
			wantQuery, err := url.ParseQuery(tt.query)
			require.NoError(t, err)
			require.Equal(t, wantQuery, r.Query)
			if tt.body == "" {
				require.Empty(t, r.Body)
				require.Empty(t, r.Header.Get("Content-Type"))
			} else {
				require.JSONEq(t, tt.body, r.Body)
				require.Equal(t, "application/json", r.Header.Get("Content-Type"))
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
