package app

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveGuarded serves a trivial handler with the timeouts and caps of h on a loopback port.
func serveGuarded(t *testing.T, h HTTPLimits) (string, *connGuard) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv, guard := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), h.resolved(), slog.New(slog.DiscardHandler))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), guard
}

// accepted waits until the server has accepted n connections: the kernel completes a
// connection before the server accepts it, and one not yet accepted is neither held nor
// refused.
func accepted(t *testing.T, g *connGuard, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return g.acceptedSoFar() >= n }, 30*time.Second, time.Millisecond,
		"the server accepted %d connections", n)
}

// halfSent opens n connections that each send the start of a request header and never its
// end, as a slowloris client does.
func halfSent(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, _ = io.WriteString(c, "POST /v1/jobs HTTP/1.1\r\nHost: stint\r\nX-Slow: ") // a refused one may be closed already
		conns[i] = c
	}
	return conns
}

// held counts the connections the server still holds open after wait: a read on a closed
// one ends at once (EOF or reset); on a held one it times out.
func held(t *testing.T, conns []net.Conn, wait time.Duration) int {
	t.Helper()
	var (
		mu sync.Mutex
		n  int
		wg sync.WaitGroup
	)
	for _, c := range conns {
		wg.Go(func() {
			require.NoError(t, c.SetReadDeadline(time.Now().Add(wait)))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n
}

// get sends one request on a client of its own (keep-alive) and returns the status.
func get(c *http.Client, addr string) (int, error) {
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestSlowloris: of 2,000 half-sent requests from one address the server holds at most
// MaxPendingPerIP, each until the header timeout; a client whose connection already carried
// a request (a worker's keep-alive connection) is served all along.
func TestSlowloris(t *testing.T) {
	t.Parallel()
	const pending = 50
	addr, guard := serveGuarded(t, HTTPLimits{MaxPendingPerIP: pending, ReadHeaderTimeout: 5 * time.Second})

	worker := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	t.Cleanup(worker.CloseIdleConnections)
	code, err := get(worker, addr)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	n := 2000
	if lim := fdLimit(); lim > 0 && lim < 3*uint64(n) {
		n = int(lim / 3)
		t.Logf("file descriptor limit %d: %d half-sent requests", lim, n)
	}
	slow := halfSent(t, addr, n)
	accepted(t, guard, n+1)
	require.Equal(t, pending, held(t, slow, 500*time.Millisecond), "held connections")

	code, err = get(worker, addr)
	require.NoError(t, err, "the keep-alive connection is served during the flood")
	require.Equal(t, http.StatusOK, code)

	// The header timeout ends the held ones; then the address may connect again.
	require.Zero(t, held(t, slow, 15*time.Second), "held past the header timeout")
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	require.Eventually(t, func() bool {
		code, err := get(fresh, addr)
		return err == nil && code == http.StatusOK
	}, 15*time.Second, 10*time.Millisecond, "a new connection once the flood is over")
}

// TestMaxConns: connections past the cap are closed when accepted; closing one makes room.
func TestMaxConns(t *testing.T) {
	t.Parallel()
	addr, guard := serveGuarded(t, HTTPLimits{MaxConns: 5, MaxPendingPerIP: -1})
	idle := make([]net.Conn, 8)
	for i := range idle {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		idle[i] = c
	}
	accepted(t, guard, len(idle))
	require.Equal(t, 5, held(t, idle, 500*time.Millisecond))

	// A held connection can still make requests.
	for _, c := range idle {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: stint\r\n\r\n"); err != nil {
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			continue // refused
		}
		require.Equal(t, http.StatusOK, resp.StatusCode)
		_ = resp.Body.Close()
		_ = c.Close()
		break
	}
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	require.Eventually(t, func() bool {
		code, err := get(fresh, addr)
		return err == nil && code == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond, "room for a new connection")
}
