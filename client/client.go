package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stint-dev/stint/apitype"
)

const (
	defaultUserAgent    = "stint-go-client"
	defaultPollInterval = 250 * time.Millisecond
	// maxErrorBody bounds how much of an error answer is read.
	maxErrorBody = 1 << 20
)

// Client talks to one stint cluster over HTTP. It is safe for concurrent use.
type Client struct {
	servers      []string      // base URLs without a trailing slash
	current      atomic.Uint32 // index into servers of the one to try first
	hc           *http.Client
	token        string
	userAgent    string
	pollInterval time.Duration
	namespace    string // where job names are looked up; empty: the server's default
	tlsConfig    *tls.Config
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests with hc, as it is. A Timeout set on hc
// applies to ordinary calls; long polls (Lease), followed logs and streams of jobs lift it so
// they are not cut short. Without it, the client's own transport keeps up to 64 idle
// connections to each server, so that as many concurrent calls reuse theirs.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithTLSConfig makes the client verify https servers, and present a client certificate,
// as cfg says: RootCAs is the CA bundle the servers' certificates must chain to (nil: the
// system's roots; LoadCA reads a PEM file), Certificates or GetClientCertificate the client
// certificate of mutual TLS (a worker's identity). It applies to every server of the list
// and to the client given by WithHTTPClient, whose Transport must then be nil or an
// *http.Transport (New refuses another kind); neither cfg nor that client is changed.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) { c.tlsConfig = cfg }
}

// LoadCA reads a PEM bundle of CA certificates (a file such as ca.crt) into a pool, for
// tls.Config's RootCAs.
func LoadCA(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("load CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("load CA bundle %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// withTLS returns a copy of hc whose transport uses cfg.
func withTLS(hc *http.Client, cfg *tls.Config) (*http.Client, error) {
	var tr *http.Transport
	switch t := hc.Transport.(type) {
	case nil:
		tr = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		tr = t.Clone()
	default:
		return nil, fmt.Errorf("WithTLSConfig: the HTTP client's transport is a %T, not an *http.Transport: give it the TLS config yourself", t)
	}
	tr.TLSClientConfig = cfg.Clone() // the transport adds its protocols to it
	cp := *hc
	cp.Transport = tr
	return &cp, nil
}

// WithToken sends "Authorization: Bearer token" with every request.
func WithToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// WithNamespace makes calls that name a job by name (get, update, delete, trigger, cancel,
// pause, resume, webhook, backfill, and ListRuns' Job filter) look it up in namespace
// instead of the default one. Job ids work in any namespace.
func WithNamespace(namespace string) Option {
	return func(c *Client) { c.namespace = namespace }
}

// jobQuery is the query of a call that names a job: its namespace, when the client has one.
func (c *Client) jobQuery() url.Values {
	if c.namespace == "" {
		return nil
	}
	return url.Values{"namespace": {c.namespace}}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// WithPollInterval sets how often WaitRun asks for the run (default 250ms).
func WithPollInterval(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.pollInterval = d
		}
	}
}

// New returns a client of the server at baseURL, or of the servers of a comma-separated list
// of base URLs. A URL without a scheme gets "http://"; https:// servers are verified
// against the system's roots, or the CA bundle of WithTLSConfig.
func New(baseURL string, opts ...Option) (*Client, error) {
	var servers []string
	for s := range strings.SplitSeq(baseURL, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		norm, err := normalizeBaseURL(s)
		if err != nil {
			return nil, fmt.Errorf("new client: %w", err)
		}
		servers = append(servers, norm)
	}
	if len(servers) == 0 {
		return nil, errors.New("new client: no server URL given")
	}
	c := &Client{
		servers:      servers,
		hc:           defaultHTTPClient(len(servers)),
		userAgent:    defaultUserAgent,
		pollInterval: defaultPollInterval,
	}
	for _, o := range opts {
		o(c)
	}
	if c.tlsConfig != nil {
		hc, err := withTLS(c.hc, c.tlsConfig)
		if err != nil {
			return nil, fmt.Errorf("new client: %w", err)
		}
		c.hc = hc
	}
	return c, nil
}

// idleConnsPerServer is how many idle connections to each server the client's own
// transport keeps: as many as the calls a busy program makes at once. (net/http's default
// keeps 2, so that the third of many concurrent callers opens and closes a connection for
// every call.)
const idleConnsPerServer = 64

// defaultHTTPClient is the HTTP client of a Client given none (WithHTTPClient): net/http's
// default transport, keeping idleConnsPerServer idle connections to each of servers.
func defaultHTTPClient(servers int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = idleConnsPerServer
	tr.MaxIdleConns = max(tr.MaxIdleConns, idleConnsPerServer*servers)
	return &http.Client{Transport: tr}
}

func normalizeBaseURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("server URL %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("server URL %q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return "", fmt.Errorf("server URL %q: no host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("server URL %q: must have no query or fragment", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Servers returns the base URLs the client uses, in failover order.
func (c *Client) Servers() []string { return append([]string(nil), c.servers...) }

// Health asks GET /healthz: nil when the server is alive.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.do(ctx, nil, http.MethodGet, "/healthz", nil, nil, nil)
	return err
}

// Ready asks GET /readyz: nil when the server can serve (store reachable, migrations done).
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, nil, http.MethodGet, "/readyz", nil, nil, nil)
	return err
}

// do sends one call and decodes a 2xx JSON answer into out (when out is not nil and the body
// is not empty). It returns the status code. hc nil means the client's HTTP client.
func (c *Client) do(ctx context.Context, hc *http.Client, method, path string, query url.Values, in, out any) (int, error) {
	resp, err := c.send(ctx, hc, method, path, query, in)
	if err != nil {
		return 0, err
	}
	defer closeBody(resp.Body)
	if out == nil {
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil && !errors.Is(err, io.EOF) {
		return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return resp.StatusCode, nil
}

// send sends one call and returns the response of a 2xx answer with its body open. An error
// answer is returned as *apitype.Problem or *HTTPError.
func (c *Client) send(ctx context.Context, hc *http.Client, method, path string, query url.Values, in any) (*http.Response, error) {
	var body []byte
	if b, ok := in.(encodedBody); ok {
		body = b
	} else if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		body = b
	}
	return c.sendBody(ctx, hc, method, path, query, body, nil)
}

// encodedBody is a request body already encoded as JSON: send sends it as it is.
type encodedBody []byte

// sendBody is send with the body already encoded (nil: none) and extra request headers.
func (c *Client) sendBody(ctx context.Context, hc *http.Client, method, path string, query url.Values, body []byte, header http.Header) (*http.Response, error) {
	var newBody func() io.Reader
	if body != nil {
		newBody = func() io.Reader { return bytes.NewReader(body) }
	}
	return c.sendWith(ctx, hc, method, path, query, newBody, header)
}

// sendWith is sendBody with the body made afresh by newBody (nil: none) for each server tried.
func (c *Client) sendWith(ctx context.Context, hc *http.Client, method, path string, query url.Values, newBody func() io.Reader, header http.Header) (*http.Response, error) {
	if hc == nil {
		hc = c.hc
	}
	target := path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}

	first := int(c.current.Load()) % len(c.servers)
	var lastErr error
	for i := range c.servers {
		idx := (first + i) % len(c.servers)
		var rd io.Reader // a nil *bytes.Reader would be a non-nil body
		if newBody != nil {
			rd = newBody()
		}
		req, err := http.NewRequestWithContext(ctx, method, c.servers[idx]+target, rd)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		if rd != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json, application/problem+json")
		if c.userAgent != "" {
			req.Header.Set("User-Agent", c.userAgent)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := hc.Do(req)
		if err != nil {
			lastErr = transportError(method, c.servers[idx]+path, err)
			if ctx.Err() != nil || !canFailOver(ctx, method, err) {
				return nil, lastErr
			}
			c.moveOn(first, idx)
			continue
		}
		if resp.StatusCode >= 500 && i < len(c.servers)-1 && canResend(ctx, method) {
			// This server cannot serve the call (its store is down, it is stopping): another
			// one may.
			lastErr = errorFromResponse(method, path, resp)
			closeBody(resp.Body)
			c.moveOn(first, idx)
			continue
		}
		if idx != first {
			c.current.CompareAndSwap(uint32(first), uint32(idx))
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			defer closeBody(resp.Body)
			return nil, errorFromResponse(method, path, resp)
		}
		return resp, nil
	}
	return nil, lastErr
}

// moveOn makes the server after idx the first to try, unless another call already moved
// on from first: calls that fail together move the client once.
func (c *Client) moveOn(first, idx int) {
	if idx == first {
		c.current.CompareAndSwap(uint32(first), uint32((idx+1)%len(c.servers)))
	}
}

// idempotentKey marks a context whose call may be sent again to another server whatever
// became of it (see withIdempotent).
type idempotentKey struct{}

// withIdempotent marks ctx's call as safe to send again: the worker protocol's calls are
// (a heartbeat or a lease poll is asked again, a log chunk or a completion resent is
// recognised by its sequence number or fencing token).
func withIdempotent(ctx context.Context) context.Context {
	return context.WithValue(ctx, idempotentKey{}, true)
}

// canResend reports whether a call may be sent again once a server saw it: a read, or a
// call marked idempotent.
func canResend(ctx context.Context, method string) bool {
	if method == http.MethodGet || method == http.MethodHead {
		return true
	}
	v, _ := ctx.Value(idempotentKey{}).(bool)
	return v
}

// canFailOver reports whether a call that failed with err may be sent to another server: when
// the connection was never made (so the server never saw it), or when it may be resent.
func canFailOver(ctx context.Context, method string, err error) bool {
	if canResend(ctx, method) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// transportError words a failed round trip as "METHOD URL: cause", without the *url.Error's
// own repetition of method and URL.
func transportError(method, target string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%s %s: %w", method, target, err)
}

// errorFromResponse turns an error answer into *apitype.Problem when it is a problem
// document, and into *HTTPError otherwise.
func errorFromResponse(method, path string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		var p apitype.Problem
		if err := json.Unmarshal(b, &p); err == nil && (p.Title != "" || p.Status != 0 || p.Detail != "") {
			if p.Status == 0 {
				p.Status = resp.StatusCode
			}
			if p.Title == "" {
				p.Title = http.StatusText(resp.StatusCode)
			}
			return &p
		}
	}
	return &HTTPError{Method: method, Path: path, StatusCode: resp.StatusCode, Body: strings.TrimSpace(string(b))}
}

// HTTPError is an error answer that is not a problem document.
type HTTPError struct {
	Method     string
	Path       string
	StatusCode int
	Body       string // the start of the body, trimmed
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Body != "" {
		body := e.Body
		if len(body) > 200 {
			body = body[:200] + "..."
		}
		s += ": " + body
	}
	return s
}

// StatusCode returns the HTTP status of an error answer (*apitype.Problem or *HTTPError) in
// err's chain, or 0 when err is not one.
func StatusCode(err error) int {
	var p *apitype.Problem
	if errors.As(err, &p) {
		return p.Status
	}
	var h *HTTPError
	if errors.As(err, &h) {
		return h.StatusCode
	}
	return 0
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }

// closeBody drains a little of what is left, so the connection can be reused, and closes.
func closeBody(b io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(b, 64<<10))
	_ = b.Close()
}

// noTimeout returns the client's HTTP client with no overall Timeout, for calls whose length
// the server decides (long polls, followed logs); ctx still bounds them.
func (c *Client) noTimeout() *http.Client {
	if c.hc.Timeout == 0 {
		return c.hc
	}
	cp := *c.hc
	cp.Timeout = 0
	return &cp
}

// pathOf joins a prefix and escaped id, refusing an empty id.
func pathOf(what, prefix, id, suffix string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%s: empty id", what)
	}
	return prefix + url.PathEscape(id) + suffix, nil
}
